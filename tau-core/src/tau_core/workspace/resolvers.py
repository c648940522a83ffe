"""Resolution against the live cluster: the built-in ``workspace-connection``,
``workspace-defaults`` and ``workload-profile`` resolvers.

They plug into :func:`tau_core.config.resolve.resolve_run` through the resolver hook, so the
offline path stays untouched when no cluster is involved:

* **workspace-connection**: the repository descriptor is activated (verified, pinned, cached);
  an explicit ``--context``/``TAU_CONTEXT`` skips activation and uses the ambient kubeconfig;
  ``TAU_CONTEXT`` naming another context than the descriptor is an error. Without a
  descriptor, the cluster's single v0 workspace is discovered through its primary marker.
* **workspace-defaults**: namespace, queue, priority, output root and service account of a
  Ready TauWorkspace (no bypass).
* **workload-profile**: when the config selects ``policy.profile``, the ready profile revision
  published in TauCluster status, refused when stale, not Ready or when its hash does not
  match its profiles.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from tau_core import keys
from tau_core.config.workspace import WorkspaceConnection, WorkspaceDefaults
from tau_core.errors import ClusterError, ConfigError
from tau_core.keys import V0_PRIMARY_WORKSPACE
from tau_core.workspace.connection import WORKSPACE_API, verify_workspace

TAU_CLUSTER_PATH = f"{WORKSPACE_API}/clusters/cluster"


def _env(request: Any) -> Mapping[str, str]:
    return request.options.env if request.options.env is not None else os.environ


def _system_namespace(env: Mapping[str, str], descriptor: Any = None) -> str:
    if descriptor is not None:
        return str(descriptor.system_namespace)
    return env.get(keys.ENV_SYSTEM_NAMESPACE) or keys.SYSTEM_NAMESPACE_DEFAULT


def _has_kubeconfig(env: Mapping[str, str]) -> bool:
    from tau_core.kube import kubeconfig_paths

    return any(p.exists() for p in kubeconfig_paths(None, env))


def resolve_connection(request: Any) -> WorkspaceConnection | None:
    from tau_core.workspace.connection import connect, stdin_confirm
    from tau_core.workspace.descriptor import load_descriptor

    env = _env(request)
    flag_context = request.options.context
    env_context = env.get("TAU_CONTEXT") or None
    path = request.target.connection_path() if request.target is not None else None
    if path is None:
        explicit = flag_context or env_context
        if not explicit and (request.options.dry_run == "client" or not _has_kubeconfig(env)):
            return None  # no descriptor and no context: the offline path decides (decision 4)
        return _discover_primary(flag_context or env_context, env)
    descriptor = load_descriptor(Path(path))
    if descriptor.is_local:
        return None
    if env_context and not flag_context and env_context != descriptor.context_name:
        raise ConfigError(
            f'$TAU_CONTEXT names context "{env_context}" but {path} names "{descriptor.context_name}"',
            hint="pass --context to choose one",
        )
    base = WorkspaceConnection(workspace=descriptor.workspace, system_namespace=descriptor.system_namespace,
                               descriptor=str(path))
    if flag_context or env_context:
        # an explicit context uses the ambient kubeconfig and skips activation
        return attrs.evolve(base, context=flag_context or env_context)
    conn = connect(descriptor, confirm=stdin_confirm, env=env)
    pins = conn.pins
    return attrs.evolve(base, context=conn.context_name, kubeconfig=conn.kubeconfig_path, verified=True,
                        namespace=pins.namespace, queue=pins.queue, service_account=pins.service_account,
                        workspace_uid=pins.workspace_uid, priority_tier=_text(conn.defaults.get("priority")),
                        output_root=_text(conn.defaults.get("outputRoot")))


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _discover_primary(context: str | None, env: Mapping[str, str]) -> WorkspaceConnection | None:
    from tau_core.kube import run

    system_ns = _system_namespace(env)

    async def find() -> WorkspaceConnection | None:
        from tau_core.kube import KubeSession

        async with await KubeSession.connect(context=context, env=env) as session:
            try:
                items: Any = await session.list_items(f"{WORKSPACE_API}/namespaces/{system_ns}/workspaces")
            except ClusterError:
                return None  # not a TauGrid cluster, or no access: nothing to discover
            primary = [w for w in items
                       if (w.get("metadata", {}).get("annotations") or {}).get(V0_PRIMARY_WORKSPACE) == "true"]
            if len(primary) > 1:
                names = ", ".join(sorted(w["metadata"]["name"] for w in primary))
                raise ClusterError(f"several TauWorkspaces in {system_ns} carry the primary marker: {names}",
                                   hint="pass --workspace, or ask the platform team to fix the marker")
            if not primary:
                return None
            return WorkspaceConnection(workspace=primary[0]["metadata"]["name"], context=session.context,
                                       system_namespace=system_ns)

    return run(find)


def _verified_defaults(ws: Mapping[str, Any]) -> WorkspaceDefaults:
    """The defaults of a TauWorkspace as :func:`~tau_core.workspace.connection.verify_workspace` read them."""
    defaults = ws.get("defaults") or {}
    return WorkspaceDefaults(namespace=_text(ws["namespace"]), queue=_text(ws["queue"]),
                             service_account=_text(ws.get("service_account")),
                             workspace_uid=_text(ws.get("workspace_uid")),
                             priority_tier=_text(defaults.get("priority")),
                             output_root=_text(defaults.get("outputRoot")))


def _connection_of(request: Any) -> WorkspaceConnection:
    return WorkspaceConnection.from_mapping(request.connection)


def resolve_workspace_defaults(request: Any) -> WorkspaceDefaults | None:
    connection = _connection_of(request)
    if connection.verified and connection.workspace == request.workspace:
        return connection.workspace_defaults()
    if not (connection.context or _has_kubeconfig(_env(request))):
        return None
    from tau_core.kube import run

    env = _env(request)
    system_ns = connection.system_namespace or _system_namespace(env)

    async def read() -> Mapping[str, Any]:
        from tau_core.kube import KubeSession

        async with await KubeSession.connect(kubeconfig=connection.kubeconfig, context=connection.context,
                                             env=env) as session:
            return await verify_workspace(session, request.workspace, system_ns)

    return _verified_defaults(run(read))


def resolve_workload_profile(request: Any) -> Any:
    """The live catalog, consulted when the config selects a profile (``policy.profile``).

    A config without ``policy.profile`` renders from its own explicit compute values; a
    selected profile is always checked fail-closed against the published revision.
    """
    connection = _connection_of(request)
    env = _env(request)
    if request.selection is None or not request.selection.profile:
        return None
    if not (connection.context or _has_kubeconfig(env)):
        return None
    from tau_core.config.profiles import ProfileCatalog, profile_set_hash
    from tau_core.kube import run

    async def read() -> tuple[str, Mapping[str, Any] | None]:
        from tau_core.kube import KubeSession

        async with await KubeSession.connect(kubeconfig=connection.kubeconfig, context=connection.context,
                                             env=env) as session:
            return session.context, await session.get(TAU_CLUSTER_PATH, missing_ok=True)

    context, cluster = run(read)
    if cluster is None:
        return None  # no TauCluster: no published profiles (an explicit policy.profile then fails closed)
    generation = int(cluster.get("metadata", {}).get("generation") or 0)
    published = (cluster.get("status") or {}).get("workloadProfiles") or {}
    profiles = [dict(p) for p in published.get("profiles") or []]
    where = f"TauCluster cluster (context {context})"
    if not profiles:
        return None
    observed = published.get("observedGeneration")
    if observed != generation:
        raise ClusterError(f"{where} publishes workload profiles for generation {observed}, but it is at generation "
                           f"{generation}: the profile set is stale", hint="wait for the controller to reconcile, "
                           "then retry (tau cluster profiles export shows the published set)")
    ready = [c for c in (cluster.get("status") or {}).get("conditions") or []
             if c.get("type") == "WorkloadProfilesReady"]
    if not ready or ready[0].get("status") != "True":
        reason = f" ({ready[0].get('reason')}: {ready[0].get('message')})" if ready else ""
        raise ClusterError(f"{where} does not report WorkloadProfilesReady=True{reason}",
                           hint="ask the platform team to repair the workload profiles (tau cluster validate topology)")
    set_hash = str(published.get("profileSetHash") or "")
    published_profiles: list[Mapping[str, Any]] = list(profiles)
    if set_hash != profile_set_hash(published_profiles):
        raise ClusterError(f"{where} profileSetHash does not match its published profiles",
                           hint="the profile set is being rewritten; retry after the controller reconciles")
    catalog = ProfileCatalog(generation, set_hash, profiles, "cluster", where)
    catalog.typed()  # fail closed on a published profile of the wrong shape, naming the field
    return catalog
