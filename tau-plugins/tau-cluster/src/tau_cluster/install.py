"""``tau cluster install``: the offline dry run, release discovery, the two Helm passes and readiness."""

from __future__ import annotations

import sys
from typing import Any

from tau_cluster.helm import Capabilities, Helm, HelmError
from tau_cluster.options import InstallOptions
from tau_cluster.plan import count_kinds, parse_manifests, split_documents
from tau_core.errors import ConflictError, TauError

UNREACHABLE = ("manifest unknown", "not found", "pull access denied", "repository not found", "unauthorized",
               "denied", "403 forbidden", "401", "no such host", "failed to do request", "connection refused")
CRD_MANAGER = "taugrid-crds"


def say(message: str) -> None:
    print(message, file=sys.stderr)


def _chart_failure(options: InstallOptions, exc: HelmError) -> TauError:
    """The unreachable-default-chart message, or the Helm error as it was."""
    text = exc.stderr.lower()
    if options.default_chart and any(signal in text for signal in UNREACHABLE):
        return TauError(
            f"cannot fetch the default TauGrid chart {options.chart} version {options.version}: check that the "
            f"version is published and that Helm can log in to its registry ({exc.message})",
            hint="or pass --chart with another chart reference or a local chart directory")
    return exc


def render(helm: Helm, options: InstallOptions) -> list[tuple[str, str]]:
    """Offline ``helm template`` of the whole distribution (CRDs included): (kind, text) per object."""
    args = ["template", options.release, *options.chart_args(), "--namespace", options.namespace, "--include-crds",
            *(["--dependency-update"] if options.dependency_update else []), *options.value_args()]
    try:
        return split_documents(helm.run(args, timeout=options.timeout_seconds + 60, kube=False))
    except HelmError as exc:
        raise _chart_failure(options, exc) from exc


def dry_run(helm: Helm, options: InstallOptions) -> list[tuple[str, int]]:
    return count_kinds(kind for kind, _ in render(helm, options))


def existing_release(helm: Helm, options: InstallOptions) -> bool:
    """Whether the release exists in ``--namespace``; a release of that name elsewhere is refused."""
    found = [r for r in helm.releases(options.release) if r.status != "uninstalled"]
    elsewhere = sorted({r.namespace for r in found if r.namespace != options.namespace})
    if elsewhere:
        other = elsewhere[0]
        raise ConflictError(
            f"Helm release {options.release} already exists in namespace {other}, and a release cannot move "
            f"namespaces in place",
            hint=f"rerun with --namespace {other}, or migrate and uninstall that release before installing it "
                 f"in {options.namespace}")
    return bool(found)


def upgrade_args(options: InstallOptions, caps: Capabilities, *, bootstrap: bool) -> list[str]:
    args = ["upgrade", "--install", options.release, *options.chart_args(), "--namespace", options.namespace,
            "--timeout", options.timeout]
    if options.create_namespace:
        args.append("--create-namespace")
    if options.dependency_update:
        args.append("--dependency-update")
    if bootstrap:
        args.append("--wait")  # Kueue's webhooks must serve before queue objects are created
    else:
        args.append("--reset-values")  # never replay the bootstrap's baselineQueue.enabled=false
        if options.wait:
            args.append("--wait")
        if options.atomic:
            args.append(caps.rollback_flag())
    args += caps.conflict_flags()
    args += options.value_args()
    if bootstrap:
        args += ["--set", "baselineQueue.enabled=false"]
    return args


def tau_crds(rendered: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The Tau CRDs (group tau.azure.com) of a rendering."""
    docs = [text for kind, text in rendered if kind == "CustomResourceDefinition" and "tau.azure.com" in text]
    return [o for o in parse_manifests("\n---\n".join(docs))
            if str((o.get("spec") or {}).get("group", "")) == "tau.azure.com"]


def preflight(helm: Helm, options: InstallOptions) -> list[tuple[str, str]]:
    """Render offline before touching the cluster; a chart that renders a TauCluster without its CRD is refused."""
    rendered = render(helm, options)
    kinds = {kind for kind, _ in rendered}
    if "TauCluster" in kinds and not tau_crds(rendered):
        raise TauError(f"the chart {options.chart} renders a TauCluster but no Tau CRDs",
                       hint="a chart built from a checkout needs `python deploy/tools/sync_chart_crds.py` before "
                            "`helm dependency build`")
    return rendered


def helm_passes(helm: Helm, options: InstallOptions, *, fresh: bool) -> None:
    """Phase 1 (fresh releases only: control plane, forced --wait, no queue policy) then phase 2."""
    caps = helm.capabilities()
    timeout = options.timeout_seconds + 60
    if fresh:
        say("Phase 1/2: installing the control plane, CRDs and Kueue webhooks (no queue policy yet)...")
        try:
            helm.run(upgrade_args(options, caps, bootstrap=True), timeout=timeout)
        except HelmError as exc:
            failure = _chart_failure(options, exc)
            raise TauError(f"installing the TauGrid control plane before the queue policy failed: {failure.message}",
                           hint=failure.hint) from exc
    say(f"Phase {'2/2' if fresh else '2'}: applying the queue policy and the full values...")
    try:
        helm.run(upgrade_args(options, caps, bootstrap=False), timeout=timeout)
    except HelmError as exc:
        raise _chart_failure(options, exc) from exc


def success_text(options: InstallOptions) -> str:
    ns = options.namespace
    return "\n".join([
        f"TauGrid is installed and ready as Helm release {options.release} in namespace {ns}.",
        "Next steps:",
        f"  1. tau workspace create <name> --system-namespace {ns} --principal-name <group> --apply",
        f"  2. kubectl wait workspaces.tau.azure.com/<name> -n {ns} --for=condition=Ready",
        "  3. pre-provision the workspace result PVC and check that it is Bound",
        "  4. tau workspace init-repo <repository> --kube-context <context>",
        "  5. researchers run: tau run train",
    ])
