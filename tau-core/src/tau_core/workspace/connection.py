"""Activating a repository's workspace connection.

``connect`` turns a validated descriptor into a verified, pinned :class:`Connection`:

1. the named kubeconfig context is isolated into a private kubeconfig (file 0600, directory
   0700) under the Tau config directory, so the repository never depends on whatever context
   happens to be current; for ``access.method: aks`` the kubeconfig comes from ARM
   (``listClusterUserCredential``) and authenticates through Tau's own exec plugin
   (:mod:`tau_core.workspace.aks`, signing in through :mod:`tau_core.azure_auth`);
2. first use of a repository on a machine, a changed descriptor or a changed cluster entry
   needs the user's approval (non-interactive callers get a clear error);
3. the TauWorkspace must be Ready at its current generation, its LocalQueue readable, and the
   researcher's verbs allowed (SelfSubjectAccessReview);
4. the workspace UID, namespace, queue and service account are pinned; a drift needs review;
5. a successful verification is cached for five minutes.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tau_core.config.workspace import WorkspacePins
from tau_core.errors import ClusterError, TauError
from tau_core.fsutil import write_json_atomic
from tau_core.workspace.descriptor import ConnectionDescriptor

STATE_SCHEMA = "tau.workspace.connection-state.v1"
READINESS_TTL_SECONDS = 300.0
WORKSPACE_API = "/apis/tau.azure.com/v1alpha1"
LOCALQUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"

#: (verb, group, resource, subresource) a researcher needs in the workspace namespace.
RESEARCHER_ACCESS: tuple[tuple[str, str, str, str], ...] = (
    ("create", "batch", "jobs", ""),
    ("get", "batch", "jobs", ""),
    ("delete", "batch", "jobs", ""),
    ("create", "ray.io", "rayjobs", ""),
    ("list", "", "pods", ""),
    ("get", "", "pods", "log"),
    ("get", "kueue.x-k8s.io", "localqueues", ""),
)

#: confirm(review_text, question) -> approved?  May raise TauError for non-interactive callers.
Confirm = Callable[[str, str], bool]


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$TAU_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/tau``, else ``~/.config/tau``."""
    env = os.environ if env is None else env
    if env.get("TAU_CONFIG_DIR"):
        return Path(env["TAU_CONFIG_DIR"])
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "tau"


def _h(text: str, n: int = 12) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


@dataclass
class Connection:
    """A verified (or cached) workspace connection, as ``tau run`` consumes it."""

    workspace: str
    workspace_uid: str
    namespace: str
    queue: str
    service_account: str | None
    context_name: str
    system_namespace: str
    kubeconfig_path: str
    authorization_mode: str | None
    descriptor_path: str
    descriptor_digest: str
    defaults: dict[str, Any] = field(default_factory=dict)
    verified_at: float = 0.0
    cached: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def pins(self) -> WorkspacePins:
        """The pinned values (workspace UID, namespace, queue, service account) as one typed value."""
        return WorkspacePins.from_mapping({"workspace_uid": self.workspace_uid, "namespace": self.namespace,
                                           "queue": self.queue, "service_account": self.service_account})


class ConnectionStore:
    """Connection state files and isolated kubeconfigs under the Tau config directory."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or config_dir()

    def state_path(self, descriptor: ConnectionDescriptor) -> Path:
        repo, path = str(descriptor.repository_root.resolve()), str(descriptor.path.resolve())
        return self.root / "connections" / f"{descriptor.workspace}-{_h(repo)}-{_h(path)}.json"

    def kubeconfig_path(self, descriptor: ConnectionDescriptor, fingerprint: str) -> Path:
        context = descriptor.context_name or "local"
        safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in context)
        return (self.root / "kubeconfigs" /
                f"{safe}-{_h(str(descriptor.repository_root.resolve()))}-{descriptor.digest[7:19]}-{fingerprint[:12]}.yaml")

    def load(self, descriptor: ConnectionDescriptor) -> dict[str, Any] | None:
        path = self.state_path(descriptor)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # a damaged state file means "not connected yet": review again, never crash
        return data if isinstance(data, dict) and data.get("schema") == STATE_SCHEMA else None

    def save(self, descriptor: ConnectionDescriptor, state: Mapping[str, Any]) -> None:
        write_json_atomic(self.state_path(descriptor), state, mode=0o600, durable=True, dir_mode=0o700)

    def prune_kubeconfigs(self, keep: Path) -> None:
        """Remove isolated kubeconfigs of this repository that no state references any more."""
        prefix = keep.name.rsplit("-", 2)[0]
        for other in keep.parent.glob(f"{prefix}-*.yaml"):
            if other != keep:
                other.unlink(missing_ok=True)


def review_text(descriptor: ConnectionDescriptor) -> str:
    lines = [
        f"Descriptor:     {descriptor.path}",
        f"Workspace:      {descriptor.workspace}",
        f"Access:         {descriptor.access_method}",
        f"Context:        {descriptor.context_name}",
        f"System ns:      {descriptor.system_namespace}",
        f"Authorization:  {descriptor.authorization_mode}"
        + (f" (role {descriptor.required_role})" if descriptor.required_role else ""),
        f"Private network: {'yes' if descriptor.private_cluster else 'no'}",
    ]
    if descriptor.private_cluster and descriptor.network_instructions:
        lines.append(f"Network:        {descriptor.network_instructions}")
    if descriptor.aks_resource_id:
        lines += [f"AKS cluster:    {descriptor.aks_resource_id}", f"Tenant:         {descriptor.aks_tenant_id}"]
    return "\n".join(lines)


def _isolate(descriptor: ConnectionDescriptor, env: Mapping[str, str]) -> tuple[dict[str, Any], str]:
    from tau_core.kube import KubeConfig

    source = KubeConfig.load(None, env)
    isolated = source.isolate(descriptor.context_name)
    cluster_entry = json.dumps(isolated["clusters"][0], sort_keys=True)
    return isolated, hashlib.sha256(cluster_entry.encode()).hexdigest()


def connect(
    descriptor: ConnectionDescriptor,
    *,
    confirm: Confirm,
    env: Mapping[str, str] | None = None,
    store: ConnectionStore | None = None,
    now: Callable[[], float] = time.time,
    force_verify: bool = False,
    sign_in: bool | None = None,
) -> Connection:
    """Verify and pin the descriptor's workspace; see the module docstring.

    ``sign_in`` (AKS only) allows an interactive Entra sign-in; by default only when stdin is a terminal.
    """
    env = os.environ if env is None else env
    store = store or ConnectionStore(config_dir(env))
    if descriptor.access_method == "local":
        raise TauError(
            f"{descriptor.path} declares a local workspace (access.method: local); there is no cluster to connect",
            hint="run targets on this machine with `tau run TARGET` (local is the default for this repository)",
        )
    state = store.load(descriptor)
    if descriptor.access_method == "aks":
        if state is None and not confirm(review_text(descriptor), "Approve and connect?"):
            raise TauError("workspace connection was not approved", hint="nothing was saved; rerun to review again")
        cached = _aks_cached(descriptor, state, env, now=now, force_verify=force_verify, sign_in=sign_in)
        if cached is not None:
            return cached
        isolated, fingerprint = _aks_isolate(descriptor, env, sign_in=sign_in)
        approved = state is None
    else:
        isolated, fingerprint = _isolate(descriptor, env)
        approved = False
    kubeconfig = store.kubeconfig_path(descriptor, fingerprint)
    changed = False
    if state is None:
        if not approved and not confirm(review_text(descriptor), "Approve and connect?"):
            raise TauError("workspace connection was not approved", hint="nothing was saved; rerun to review again")
    else:
        target_changed = state.get("access_fingerprint") != fingerprint
        changed = target_changed or state.get("descriptor_digest") != descriptor.digest
        fresh = not changed and now() - float(state.get("verified_at", 0)) < READINESS_TTL_SECONDS
        if fresh and not force_verify and Path(str(state.get("kubeconfig_path", ""))).is_file():
            return _connection_from_state(state, cached=True)
        if changed:
            what = "Kubernetes context target changed" if target_changed else "the workspace descriptor changed"
            question = (f"Pin workspace {descriptor.workspace} on Kubernetes context {descriptor.context_name} "
                        "for this repository?")
            if not confirm(f"{what}.\n" + review_text(descriptor), question):
                raise TauError("workspace connection change was not confirmed", hint="the previous pins were kept")

    from tau_core.kube import write_private_kubeconfig

    write_private_kubeconfig(isolated, kubeconfig)
    verified = _verify(descriptor, kubeconfig)
    pinned = WorkspacePins.from_mapping(state) if state is not None and not changed else None
    _confirm_drift(descriptor, pinned, WorkspacePins.from_mapping(verified), confirm)
    new_state = {
        "schema": STATE_SCHEMA,
        "workspace": descriptor.workspace,
        "access_method": descriptor.access_method,
        "access_identity": descriptor.aks_resource_id or descriptor.context_name,
        "access_fingerprint": fingerprint,
        "authorization_mode": descriptor.authorization_mode,
        "context_name": descriptor.context_name,
        "system_namespace": descriptor.system_namespace,
        "kubeconfig_path": str(kubeconfig),
        "required_role": descriptor.required_role,
        "repository_root": str(descriptor.repository_root),
        "descriptor_path": str(descriptor.path),
        "descriptor_digest": descriptor.digest,
        "configured_at": (state or {}).get("configured_at") if not changed else None,
        "verified_at": now(),
        **verified,
    }
    new_state["configured_at"] = new_state["configured_at"] or datetime.now(UTC).isoformat()
    store.save(descriptor, new_state)
    store.prune_kubeconfigs(kubeconfig)
    return _connection_from_state(new_state, cached=False)


def _confirm_drift(descriptor: ConnectionDescriptor, pinned: WorkspacePins | None, verified: WorkspacePins,
                   confirm: Confirm) -> None:
    if pinned is None:
        return
    drift = pinned.drift(verified)
    if drift:
        details = ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in drift.items())
        question = (f"Pin the updated namespace {verified.namespace} and LocalQueue {verified.queue} "
                    f"for workspace {descriptor.workspace}?")
        if not confirm(f"The workspace changed since it was pinned: {details}", question):
            raise TauError("workspace connection change was not confirmed", hint="the previous pins were kept")


def _interactive(sign_in: bool | None) -> bool:
    if sign_in is not None:
        return sign_in
    import sys

    return bool(sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty())


def _aks_credential(descriptor: ConnectionDescriptor, env: Mapping[str, str]) -> Any:
    from tau_core.azure_auth import AzureCredential, device_code_prompt

    return AzureCredential(descriptor.aks_tenant_id or "", env=env, prompt=device_code_prompt)


def _aks_cached(descriptor: ConnectionDescriptor, state: Mapping[str, Any] | None, env: Mapping[str, str], *,
                now: Callable[[], float], force_verify: bool, sign_in: bool | None) -> Connection | None:
    """A fresh pinned AKS connection, once the sign-in behind its exec plugin is known to work."""
    from tau_core.azure_auth import aks_scope

    if state is None or force_verify or state.get("descriptor_digest") != descriptor.digest:
        return None
    if now() - float(state.get("verified_at", 0)) >= READINESS_TTL_SECONDS:
        return None
    kubeconfig = Path(str(state.get("kubeconfig_path", "")))
    try:
        args = json.loads(kubeconfig.read_text())["users"][0]["user"]["exec"]["args"]
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None  # missing or foreign isolated kubeconfig: fetch it again
    server_app = next((str(args[i + 1]) for i, a in enumerate(args[:-1]) if a == "--server-id"), None)
    credential = _aks_credential(descriptor, env)
    credential.get_token(aks_scope(server_app) if server_app else aks_scope(), interactive=_interactive(sign_in))
    return _connection_from_state(state, cached=True)


def _aks_isolate(descriptor: ConnectionDescriptor, env: Mapping[str, str], *,
                 sign_in: bool | None) -> tuple[dict[str, Any], str]:
    """ARM's user kubeconfig for the cluster, rewritten to use Tau's exec plugin; signs in when needed."""
    from tau_core.azure_auth import aks_scope
    from tau_core.workspace.aks import exec_kubeconfig, fetch_target

    credential = _aks_credential(descriptor, env)
    interactive = _interactive(sign_in)
    target = fetch_target(descriptor.aks_resource_id or "", credential, interactive=interactive)
    # the exec plugin must find a token silently later: get the AKS one now, while the user is here
    credential.get_token(aks_scope(target.server_app_id), interactive=interactive)
    config = exec_kubeconfig(target, descriptor.context_name or "aks", descriptor.aks_tenant_id or "")
    return config, target.fingerprint


def _connection_from_state(state: Mapping[str, Any], *, cached: bool) -> Connection:
    return Connection(
        workspace=state["workspace"],
        workspace_uid=state.get("workspace_uid", ""),
        namespace=state["namespace"],
        queue=state["queue"],
        service_account=state.get("service_account"),
        context_name=state.get("context_name", ""),
        system_namespace=state.get("system_namespace", ""),
        kubeconfig_path=state["kubeconfig_path"],
        authorization_mode=state.get("authorization_mode"),
        descriptor_path=state.get("descriptor_path", ""),
        descriptor_digest=state.get("descriptor_digest", ""),
        defaults=dict(state.get("defaults") or {}),
        verified_at=float(state.get("verified_at", 0)),
        cached=cached,
    )


def _verify(descriptor: ConnectionDescriptor, kubeconfig: Path) -> dict[str, Any]:
    from tau_core.kube import run

    return run(_verify_async, descriptor, kubeconfig)


async def _verify_async(descriptor: ConnectionDescriptor, kubeconfig: Path) -> dict[str, Any]:
    from tau_core.kube import KubeSession

    async with await KubeSession.connect(kubeconfig=kubeconfig, context=descriptor.context_name) as session:
        return await verify_workspace(session, descriptor.workspace, descriptor.system_namespace)


def _unhealthy(condition: Mapping[str, Any]) -> bool:
    bad = "True" if condition.get("type") == "DriftDetected" else "False"
    return condition.get("status") == bad


async def verify_workspace(session: Any, workspace: str, system_namespace: str) -> dict[str, Any]:
    """Check readiness, queue access and researcher verbs; return the values to pin."""
    path = f"{WORKSPACE_API}/namespaces/{system_namespace}/workspaces/{workspace}"
    obj = await session.get(path, missing_ok=True)
    if obj is None:
        raise ClusterError(
            f"TauWorkspace {workspace} was not found in namespace {system_namespace}",
            hint=f"check the descriptor's workspace name, or ask your platform team (`tau workspace list --context "
            f"{session.context}`)",
        )
    meta, spec, status = obj.get("metadata", {}), obj.get("spec") or {}, obj.get("status") or {}
    phase = status.get("phase") or "Pending"
    generation, observed = meta.get("generation"), status.get("observedGeneration")
    if phase != "Ready" or (generation is not None and observed != generation):
        reasons = [f"{c.get('type')}={c.get('status')} ({c.get('reason', '')}: {c.get('message', '')})"
                   for c in status.get("conditions") or [] if _unhealthy(c)]
        stale = "" if observed == generation else f"; status describes generation {observed}, spec is at {generation}"
        detail = f": {'; '.join(reasons)}" if reasons else ""
        raise ClusterError(
            f"TauWorkspace {workspace} is not Ready (phase {phase}{stale}){detail}",
            hint=f"tau workspace status {workspace} --context {session.context} shows what the controller reports",
        )
    namespace = ((status.get("target") or {}).get("resolvedNamespace") or (spec.get("target") or {}).get("namespace")
                 or workspace)
    queue = (status.get("queue") or {}).get("localQueue") or spec.get("queue") or "jobqueue"
    await session.get(f"{LOCALQUEUE_API}/namespaces/{namespace}/localqueues/{queue}")
    denied = []
    for verb, group, resource, sub in RESEARCHER_ACCESS:
        review = await session.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "group": group,
                                            "resource": resource, "subresource": sub}},
        })
        if not (review.get("status") or {}).get("allowed"):
            denied.append(f"{verb} {resource}{'/' + sub if sub else ''}{'.' + group if group else ''}")
    if denied:
        raise ClusterError(
            f"you are not allowed to {', '.join(denied)} in namespace {namespace} (workspace {workspace})",
            hint="ask your platform team to bind your identity to the workspace's researcher role",
        )
    defaults = dict(spec.get("defaults") or {})
    return {
        "workspace_uid": meta.get("uid", ""),
        "namespace": namespace,
        "queue": queue,
        "service_account": (spec.get("workloadIdentity") or {}).get("serviceAccountName"),
        "defaults": defaults,
    }


def stdin_confirm(review: str, question: str) -> bool:
    """Show ``review`` on stderr and read the answer from stdin (piped answers work).

    A caller with nothing on stdin (no terminal, no piped answer) gets a clear error instead
    of an implicit yes or no.
    """
    import sys

    import click

    click.echo(review, err=True)
    click.echo(f"{question} [y/N] ", err=True, nl=False)
    line = sys.stdin.readline() if sys.stdin is not None and not sys.stdin.closed else ""
    click.echo("", err=True)
    if not line:
        if question == "Approve and connect?":
            raise TauError(
                "this repository has not been connected with Tau on this machine",
                hint="run `tau workspace connection` from an interactive terminal (or pipe the answer: "
                "echo y | tau workspace connection)",
            )
        raise TauError(f"workspace connection requires interactive review: {question}",
                       hint="run `tau workspace connection` from an interactive terminal")
    return line.strip().lower() in ("y", "yes")
