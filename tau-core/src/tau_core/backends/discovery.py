"""Finding a run across the connected workspace and every configured workspace connection (``tau logs``).

Routes are the repository's own connection (probed first) plus every cached connection state under
``<config>/connections``.  Each route is revalidated before it is trusted (the TauWorkspace still has
the pinned UID and namespace and is Ready), then asked whether it holds a Job or RayJob of that
name.  Probes run in parallel, each bounded by a timeout, the whole search by a budget.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tau_core import keys
from tau_core.errors import NotFoundError, TauError
from tau_core.kube import KubeSession, api_path
from tau_core.kube import run as run_async

PROBE_TIMEOUT = 10.0
SEARCH_BUDGET = 30.0


@dataclass(frozen=True)
class Route:
    workspace: str
    namespace: str
    context: str | None
    kubeconfig: str | None
    system_namespace: str
    workspace_uid: str = ""
    origin: str = "connection"  # repository | connection

    @property
    def label(self) -> str:
        return f"{self.workspace} (context {self.context or 'current'}, namespace {self.namespace})"


def cached_routes(config_root: Path) -> list[Route]:
    """Every readable connection state file under ``config_root/connections``."""
    routes: list[Route] = []
    for path in sorted((config_root / "connections").glob("*.json")):
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a damaged state file is not a route
        if not isinstance(state, dict) or not state.get("namespace") or not state.get("kubeconfig_path"):
            continue
        system_namespace = str(state.get("system_namespace") or keys.SYSTEM_NAMESPACE_DEFAULT)
        routes.append(Route(str(state.get("workspace", "")), str(state["namespace"]), state.get("context_name"),
                            str(state["kubeconfig_path"]), system_namespace,
                            str(state.get("workspace_uid") or ""), "connection"))
    return routes


@dataclass
class Probe:
    route: Route
    kind: str | None = None
    error: str | None = None


async def _probe(route: Route, name: str) -> Probe:
    from tau_core.backends.kubernetes import JOB_API, RAYJOB_API, WORKSPACE_API, _workspace_namespace

    session = await KubeSession.connect(kubeconfig=route.kubeconfig, context=route.context)
    try:
        if route.workspace:
            ws = await session.get(api_path(*WORKSPACE_API, namespace=route.system_namespace, name=route.workspace),
                                   missing_ok=True)
            if ws is None:
                return Probe(route, error=f"TauWorkspace {route.workspace} no longer exists; reconnect the workspace")
            meta = ws.get("metadata") or {}
            if route.workspace_uid and meta.get("uid") != route.workspace_uid:
                return Probe(route, error=f"TauWorkspace {route.workspace} was replaced; reconnect the workspace")
            if _workspace_namespace(ws) != route.namespace:
                return Probe(route, error=f"TauWorkspace {route.workspace} moved to another namespace; reconnect "
                                          "the workspace")
            if (ws.get("status") or {}).get("phase") != "Ready":
                return Probe(route, error=f"TauWorkspace {route.workspace} is not Ready; reconnect the workspace")
        for kind, api in (("Job", JOB_API), ("RayJob", RAYJOB_API)):
            try:
                found = await session.get(api_path(*api, namespace=route.namespace, name=name), missing_ok=True)
            except TauError as exc:
                if kind == "RayJob" and "KubeRay is not installed" in exc.message:
                    continue
                raise
            if found is not None:
                return Probe(route, kind=kind)
        return Probe(route)
    finally:
        await session.close()


async def _search(routes: list[Route], name: str, probe_timeout: float, budget: float) -> list[Probe]:
    """Probe every route at once (each within ``probe_timeout``); the answers that came within ``budget``."""
    import anyio

    from tau_core.aio import first_error

    found: dict[int, Probe] = {}

    async def bounded(index: int, route: Route) -> None:
        try:
            with anyio.fail_after(probe_timeout):
                found[index] = await _probe(route, name)
        except TimeoutError:
            found[index] = Probe(route, error=f"no answer within {probe_timeout:g}s")
        except TauError as exc:
            found[index] = Probe(route, error=exc.message)

    try:
        with anyio.move_on_after(budget):
            async with anyio.create_task_group() as group:
                for index, route in enumerate(routes):
                    group.start_soon(bounded, index, route)
    except BaseExceptionGroup as errors:
        raise first_error(errors) from None
    return [found[i] for i in sorted(found)]


def find_run(name: str, routes: list[Route], *, workspace: str | None = None,
             probe_timeout: float = PROBE_TIMEOUT, budget: float = SEARCH_BUDGET) -> tuple[Route, str]:
    """The one route holding run ``name`` (and its kind); absence and ambiguity are clear errors."""
    unique: dict[tuple[Any, ...], Route] = {}
    for r in routes:
        if workspace and r.workspace != workspace:
            continue
        unique.setdefault((r.kubeconfig, r.context, r.namespace), r)
    candidates = list(unique.values())
    if workspace and not candidates:
        raise NotFoundError(f"no configured Tau workspace connection for workspace \"{workspace}\"",
                            hint="connect it with `tau workspace connection` in its repository, or pass --context "
                                 "and --namespace")
    probes = run_async(_search, candidates, name, probe_timeout, budget)
    hits = [p for p in probes if p.kind]
    if len(hits) == 1:
        return hits[0].route, str(hits[0].kind)
    if len(hits) > 1:
        where = "; ".join(p.route.label for p in hits)
        raise TauError(f"run \"{name}\" exists in multiple configured Tau workspaces ({where})",
                       hint="pass --workspace, or --context and --namespace, to select one")
    searched = "; ".join(p.route.label + (f" [{p.error}]" if p.error else "") for p in probes) or "no workspaces"
    raise NotFoundError(
        f"run \"{name}\" was not found in the connected workspace or configured Tau workspace connections; "
        f"searched {searched}",
        hint="pass --context and --namespace to select a target explicitly")


def routes_for(*, env: Mapping[str, str] | None = None, cwd: Path | None = None,
               confirm: Any = None) -> list[Route]:
    """The repository's connection (first) and every cached connection."""
    from tau_core.workspace.connection import config_dir

    routes: list[Route] = []
    from tau_core.workspace.descriptor import find_descriptor, load_descriptor

    path = find_descriptor(cwd)
    if path is not None:
        descriptor = load_descriptor(path)
        if not descriptor.is_local:
            from tau_core.workspace import connect
            from tau_core.workspace.connection import stdin_confirm

            conn = connect(descriptor, confirm=confirm or stdin_confirm, env=env)
            routes.append(Route(conn.workspace, conn.namespace, conn.context_name, conn.kubeconfig_path,
                                conn.system_namespace, conn.workspace_uid, "repository"))
    routes.extend(cached_routes(config_dir(env)))
    return routes


def ambient_routes(system_namespace: str | None = None) -> list[Route]:
    """With no workspace connection configured: the current kubeconfig context and its primary workspace."""
    from tau_core.kube import kubeconfig_paths
    from tau_core.lifecycle.base import RunRef, backend_for

    if not any(p.exists() for p in kubeconfig_paths()):
        return []
    backend: Any = backend_for("kubernetes", system_namespace=system_namespace)  # namespace discovery is its own
    try:
        target = backend.resolve_namespace(RunRef(""))
    except TauError:
        return []  # no primary workspace on this cluster: nothing to search
    return [Route(target.workspace or "", target.namespace, backend.last_context or None, None, backend.sys_namespace,
                  "", "kubeconfig")]
