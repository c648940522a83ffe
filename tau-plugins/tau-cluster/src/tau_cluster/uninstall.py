"""``tau cluster uninstall``: drain the queue policy while Kueue still runs, then remove the release."""

from __future__ import annotations

import sys
from typing import Any

from tau_cluster.helm import Helm, HelmError
from tau_cluster.options import UninstallOptions
from tau_core.errors import TauError
from tau_core.kube import KubeApiError, KubeSession, api_path

NEED_YES = ("uninstall removes the TauGrid control plane; rerun with --yes once active TauWorkspace objects "
            "have been migrated")
REMOVED = ("TauGrid Helm release removed. CRDs, user-created custom resources, retained namespaces, cloud "
           "infrastructure, storage and workspace data stay in the cluster.")
DRY_RUN_DONE = "TauGrid Helm uninstall dry run finished; nothing in the cluster was changed."


def say(message: str) -> None:
    print(message, file=sys.stderr)


def queue_objects(values: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(api path prefix, plural, name) of the release's queue policy, named from its values."""
    bq = values.get("baselineQueue") or {}
    objects = [("kueue.x-k8s.io/v1beta2", "clusterqueues", str(bq.get("name") or "jobqueue")),
               ("kueue.x-k8s.io/v1beta2", "resourceflavors",
                str((bq.get("flavor") or {}).get("name") or "taugrid-default-cpu"))]
    topology = bq.get("topology") or {}
    if topology.get("enabled", True):
        objects.append(("kueue.x-k8s.io/v1beta2", "topologies", str(topology.get("name") or "default-node-topology")))
    return objects


SINGULAR = {"clusterqueues": "clusterqueue", "resourceflavors": "resourceflavor", "topologies": "topology"}


def describe(objects: list[tuple[str, str, str]]) -> str:
    return ", ".join(f"{SINGULAR.get(plural, plural)}/{name}" for _, plural, name in objects)


def drain(helm: Helm, options: UninstallOptions) -> tuple[bool, list[tuple[str, str, str]]]:
    """Phase 1: ``helm upgrade`` with the queue policy off. Never raises; returns (drained, queue objects)."""
    if not helm.releases(options.release) or not any(
            r.namespace == options.namespace for r in helm.releases(options.release)):
        return False, []
    try:
        values = helm.values(options.release, options.namespace)
    except HelmError as exc:
        say(f"Cannot read the values of release {options.release} ({exc.message}); skipping the queue drain, so "
            f"{describe(queue_objects({}))} may keep a Kueue finalizer that no controller can clear.")
        return False, queue_objects({})
    objects = queue_objects(values)
    if (values.get("baselineQueue") or {}).get("enabled") is False:
        return False, []
    try:
        meta = helm.metadata(options.release, options.namespace)
    except HelmError:
        say(f"Cannot read the deployed chart version of release {options.release}; skipping the queue drain.")
        return False, objects
    recorded, wanted = str(meta.get("chart") or ""), options.chart.rstrip("/").rsplit("/", 1)[-1]
    if recorded and recorded != wanted:
        say(f"Release {options.release} was installed from chart {recorded!r} but --chart names {wanted!r}; "
            f"skipping the queue drain, so {describe(objects)} may keep a Kueue finalizer.")
        return False, objects
    args = ["upgrade", options.release, options.chart, "--namespace", options.namespace, "--version",
            str(meta.get("version") or ""), "--timeout", options.timeout, "--reuse-values",
            "--set", "baselineQueue.enabled=false"]
    if options.no_hooks:
        args.append("--no-hooks")
    try:
        args += helm.capabilities().conflict_flags()
        helm.run(args, timeout=_seconds(options) + 60)
    except (HelmError, TauError) as exc:
        say(f"Draining the queue policy failed ({exc.message}); {describe(objects)} may keep a Kueue finalizer.")
        return False, objects
    return True, objects


async def leftovers(session: KubeSession, objects: list[tuple[str, str, str]]) -> list[str]:
    remaining = []
    for api_version, plural, name in objects:
        try:
            if await session.get(api_path(api_version, plural, name=name), missing_ok=True) is not None:
                remaining.append(f"{SINGULAR.get(plural, plural)}/{name}")
        except KubeApiError:
            continue
    return remaining


def uninstall_args(options: UninstallOptions) -> list[str]:
    args = ["uninstall", options.release, "--namespace", options.namespace, "--timeout", options.timeout,
            "--ignore-not-found"]
    for flag, on in (("--wait", options.wait), ("--dry-run", options.dry_run),
                     ("--keep-history", options.keep_history), ("--no-hooks", options.no_hooks)):
        if on:
            args.append(flag)
    return args


def recovery_guidance(options: UninstallOptions, objects: list[tuple[str, str, str]]) -> str:
    names = " ".join(f"{plural}/{name}" for _, plural, name in objects) or "clusterqueues/jobqueue"
    return "\n".join([
        "The queue policy was not drained, so Kueue objects may be stranded with finalizers. To recover:",
        "  1. in every workspace namespace: kubectl delete job,workload --all -n <workspace-namespace>",
        f"  2. kubectl patch {names} --type=merge -p '{{\"metadata\":{{\"finalizers\":[]}}}}'",
        f"  3. rerun: tau cluster uninstall --release {options.release} --namespace {options.namespace} --yes",
    ])


def _seconds(options: UninstallOptions) -> float:
    from tau_cluster.options import parse_duration

    return parse_duration(options.timeout, "--timeout")
