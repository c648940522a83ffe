"""Which cluster and which system namespace an operator or read verb talks to.

* Context: ``--context``, else ``$TAU_CONTEXT``, else the repository descriptor's
  ``cluster.contextName`` (read verbs only), else the kubeconfig's current context.  A context taken from
  the descriptor is reached through the isolated kubeconfig `tau workspace connection` pinned for it, when
  there is one (the only place an ``access.method: aks`` context exists).
* System namespace: ``--system-namespace`` (or its deprecated alias ``--platform-namespace``), else
  the descriptor's ``cluster.systemNamespace``, else ``$TAU_SYSTEM_NAMESPACE``, else ``tau-system``.

:func:`taugrid_api` rewrites "this cluster does not serve TauWorkspace resources" into the one message
every verb gives for a cluster without the TauGrid CRDs.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from tau_core import keys
from tau_core.errors import ClusterError, UsageError
from tau_core.kube import DEFAULT_SYSTEM_NAMESPACE, ENV_CONTEXT, ENV_SYSTEM_NAMESPACE, KubeApiError, KubeSession
from tau_workspace.names import dns_label

if TYPE_CHECKING:
    from tau_core.workspace import ConnectionDescriptor

TAU_API = f"/apis/{keys.API_VERSION}"
KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"


@attrs.frozen
class Target:
    """A resolved cluster context (None: the kubeconfig's current one), system namespace, and kubeconfig
    (None: the user's; else the repository's pinned, isolated one)."""

    context: str | None
    system_namespace: str
    kubeconfig: str | None = None

    def workspaces_path(self, name: str | None = None) -> str:
        base = f"{TAU_API}/namespaces/{self.system_namespace}/workspaces"
        return f"{base}/{name}" if name else base

    def quota_requests_path(self, name: str | None = None) -> str:
        base = f"{TAU_API}/namespaces/{self.system_namespace}/quotarequests"
        return f"{base}/{name}" if name else base


def _descriptor(start: Path | None) -> ConnectionDescriptor | None:
    from tau_core.errors import TauError
    from tau_core.workspace import find_descriptor, load_descriptor

    try:
        path = find_descriptor(start or Path.cwd())
        if path is None:
            return None
        descriptor = load_descriptor(path, check_version=False)
    except TauError:
        return None  # a broken descriptor is `tau workspace connection --offline`'s business, not ours
    return None if descriptor.is_local else descriptor


def resolve_target(*, context: str | None, system_namespace: str | None, platform_namespace: str | None = None,
                   use_descriptor_context: bool = True, env: Mapping[str, str] | None = None,
                   start: Path | None = None) -> Target:
    """The context and system namespace for a verb, in the documented precedence."""
    env = os.environ if env is None else env
    if system_namespace and platform_namespace and system_namespace != platform_namespace:
        raise UsageError("--system-namespace and --platform-namespace name different namespaces",
                         hint="--platform-namespace is a deprecated alias; pass only --system-namespace")
    explicit_ns = system_namespace or platform_namespace
    descriptor = _descriptor(start)
    ns = (explicit_ns or (descriptor.system_namespace if descriptor else None)
          or env.get(ENV_SYSTEM_NAMESPACE) or DEFAULT_SYSTEM_NAMESPACE)
    ctx = context or env.get(ENV_CONTEXT) or None
    kubeconfig = None
    if ctx is None and use_descriptor_context and descriptor is not None:
        ctx = descriptor.context_name or None
        kubeconfig = pinned_kubeconfig(descriptor, ctx, env)
    return Target(context=ctx, system_namespace=dns_label(ns, "--system-namespace"), kubeconfig=kubeconfig)


def pinned_kubeconfig(descriptor: ConnectionDescriptor, context: str | None, env: Mapping[str, str]) -> str | None:
    """The isolated kubeconfig `tau workspace connection` pinned for this very descriptor and context, if any."""
    from tau_core.workspace import ConnectionStore, config_dir

    state = ConnectionStore(config_dir(env)).load(descriptor)
    if not state or state.get("descriptor_digest") != descriptor.digest or state.get("context_name") != context:
        return None
    path = Path(str(state.get("kubeconfig_path") or ""))
    return str(path) if path.is_file() else None


def not_taugrid(context: str) -> ClusterError:
    return ClusterError(
        f"{context} has no TauWorkspace resources, so it does not appear to be a TauGrid cluster",
        hint="check your repository's tau/workspace.connection.yaml or pass --context "
             "(a platform team installs TauGrid with `tau cluster install`)")


def is_missing_type(exc: KubeApiError) -> bool:
    """A 404 for a whole resource type (not for one named object)."""
    return exc.not_found and not (exc.body.get("details") or {}).get("name")


@asynccontextmanager
async def taugrid_api(target: Target) -> AsyncIterator[KubeSession]:
    """A session on ``target``'s context; a cluster without the Tau CRDs gets the "not TauGrid" error."""
    async with await KubeSession.connect(kubeconfig=target.kubeconfig, context=target.context) as session:
        try:
            yield session
        except KubeApiError as exc:
            if is_missing_type(exc) and f".{keys.API_GROUP}" in exc.message:
                raise not_taugrid(session.context) from exc
            raise


def is_terminating(obj: Mapping[str, Any] | None) -> bool:
    return bool(obj and (obj.get("metadata") or {}).get("deletionTimestamp"))
