"""Where a run lives on the cluster: an explicit namespace, its TauWorkspace, or the primary workspace."""

from __future__ import annotations

from dataclasses import dataclass

from tau_core import keys
from tau_core.errors import NotFoundError, TauError, UsageError
from tau_core.kube import KubeSession, api_path
from tau_core.lifecycle.base import RunRef

from .objects import WORKSPACE_API, Obj, _ann, _meta
from .session import BackendSession


@dataclass
class ResolvedTarget:
    namespace: str
    workspace: str | None = None
    queue: str | None = None


class Targeting(BackendSession):
    async def resolve(self, session: KubeSession, ref: RunRef) -> ResolvedTarget:
        """The namespace of ``ref``: explicit, else its TauWorkspace, else the cluster's primary workspace."""
        if ref.workspace:
            ws = await self._workspace(session, ref.workspace)
            ns = _workspace_namespace(ws)
            if ref.namespace and ref.namespace != ns:
                raise UsageError(f"namespace \"{ref.namespace}\" conflicts with TauWorkspace \"{ref.workspace}\" "
                                 f"target namespace \"{ns}\"", hint="drop -n, or pass the workspace's namespace")
            return ResolvedTarget(ns, ref.workspace, _workspace_queue(ws))
        if ref.namespace:
            return ResolvedTarget(ref.namespace)
        items = await session.list_items(api_path(*WORKSPACE_API, namespace=self.sys_namespace))
        primary = [w for w in items if _ann(w).get(keys.V0_PRIMARY_WORKSPACE) == "true"]
        chosen = primary[0] if len(primary) == 1 else (items[0] if len(items) == 1 else None)
        if chosen is None:
            if session.default_namespace:
                return ResolvedTarget(session.default_namespace)
            raise UsageError(
                "no namespace resolved for this workload: connect a workspace (see `tau workspace list`) "
                "or pass --namespace",
                hint=f"found {len(items)} TauWorkspace(s) in {self.sys_namespace} and none is marked primary")
        _require_ready(chosen)
        return ResolvedTarget(_workspace_namespace(chosen), _meta(chosen).get("name"), _workspace_queue(chosen))

    async def _workspace(self, session: KubeSession, name: str) -> Obj:
        ws = await session.get(api_path(*WORKSPACE_API, namespace=self.sys_namespace, name=name), missing_ok=True)
        if ws is None:
            raise NotFoundError(f"TauWorkspace \"{name}\" not found in namespace {self.sys_namespace}",
                                hint="list workspaces with `tau workspace list`, or pass --system-namespace")
        _require_ready(ws)
        return ws

    def resolve_namespace(self, ref: RunRef) -> ResolvedTarget:
        result: ResolvedTarget = self._run(self.resolve, ref)
        return result


def _require_ready(ws: Obj) -> None:
    phase = (ws.get("status") or {}).get("phase")
    observed = (ws.get("status") or {}).get("observedGeneration")
    generation = _meta(ws).get("generation")
    name = _meta(ws).get("name")
    if phase != "Ready":
        raise TauError(f"workspace \"{name}\" is not Ready (phase={phase or 'unknown'})",
                       hint=f"ask the platform team to fix it; `tau workspace status {name}` shows which "
                            "condition fails")
    if generation is not None and observed is not None and int(observed) < int(generation):
        raise TauError(f"workspace \"{name}\" has changes the controller has not reconciled yet "
                       f"(generation {generation}, observed {observed})", hint="retry in a moment")


def _workspace_namespace(ws: Obj) -> str:
    status = ws.get("status") or {}
    spec = ws.get("spec") or {}
    return str(((status.get("target") or {}).get("resolvedNamespace")) or (spec.get("target") or {}).get("namespace")
               or _meta(ws).get("name"))


def _workspace_queue(ws: Obj) -> str | None:
    q = ((ws.get("status") or {}).get("queue") or {}).get("localQueue") or (ws.get("spec") or {}).get("queue")
    return str(q) if q else None
