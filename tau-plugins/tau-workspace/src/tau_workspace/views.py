"""``tau workspace list``, ``status`` and ``check``: read the TauWorkspace objects and say what they mean.

``check`` applies the exact Ready rule: phase ``Ready``, ``metadata.generation`` > 0 and
``status.observedGeneration`` equal to it.  ``--data-pvc`` adds a look at the durable ``/data`` claim.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from tau_core.errors import ClusterError, NotFoundError, TauError
from tau_core.kube import KubeApiError
from tau_core.output import render_table
from tau_workspace.target import Target, taugrid_api


def _text(value: Any) -> str:
    return str(value) if value not in (None, "") else "-"


@attrs.frozen
class WorkspaceView:
    """One TauWorkspace object and the values the CLI derives from it."""

    obj: Mapping[str, Any]

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name", ""))

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.obj.get("spec") or {}

    @property
    def status(self) -> Mapping[str, Any]:
        return self.obj.get("status") or {}

    @property
    def phase(self) -> str:
        return str(self.status.get("phase") or "")

    @property
    def namespace(self) -> str:
        return str((self.status.get("target") or {}).get("resolvedNamespace")
                   or (self.spec.get("target") or {}).get("namespace") or "")

    @property
    def local_queue(self) -> str:
        return str((self.status.get("queue") or {}).get("localQueue") or self.spec.get("queue") or "")

    @property
    def cluster_queue(self) -> str:
        return str((self.status.get("queue") or {}).get("clusterQueue") or "")

    @property
    def service_account(self) -> str:
        return str((self.spec.get("workloadIdentity") or {}).get("serviceAccountName") or "default")

    @property
    def ready(self) -> bool:
        generation = int((self.obj.get("metadata") or {}).get("generation") or 0)
        observed = self.status.get("observedGeneration")
        return self.phase == "Ready" and generation > 0 and observed == generation

    def document(self) -> dict[str, Any]:
        return {**self.obj, "resolved": {"namespace": self.namespace, "localQueue": self.local_queue,
                                         "serviceAccount": self.service_account}}

    def text(self) -> str:
        rows = [("phase", self.phase), ("namespace", self.namespace), ("queue", self.local_queue),
                ("serviceAccount", self.service_account)]
        if self.cluster_queue:
            rows.append(("clusterQ", self.cluster_queue))
        output_root = (self.spec.get("defaults") or {}).get("outputRoot")
        if output_root:
            rows.append(("outputRoot", output_root))
        out = [f"Workspace: {self.name}"] + [f"  {k + ':':<16}{_text(v)}" for k, v in rows]
        conditions = [(c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
                      for c in self.status.get("conditions") or []]
        out += ["", "Conditions:", render_table([[_text(x) for x in row] for row in conditions],
                                                ["TYPE", "STATUS", "REASON", "MESSAGE"])
                if conditions else "  (none reported yet)"]
        quota = [(q.get("resource"), q.get("flavor"), q.get("nominal"), q.get("admitted"), q.get("pending"))
                 for q in self.status.get("quota") or []]
        if quota:
            out += ["", "Quota:", render_table([[_text(x) for x in row] for row in quota],
                                               ["RESOURCE", "FLAVOR", "NOMINAL", "ADMITTED", "PENDING"])]
        return "\n".join(out)


async def list_workspaces(target: Target) -> list[WorkspaceView]:
    async with taugrid_api(target) as session:
        items = await session.list_items(target.workspaces_path())
    return sorted((WorkspaceView(i) for i in items), key=lambda v: v.name)


def list_text(views: list[WorkspaceView]) -> str:
    if not views:
        return "no workspaces found"
    return render_table([[v.name, _text(v.phase), _text(v.namespace), _text(v.local_queue)] for v in views],
                        ["NAME", "PHASE", "NAMESPACE", "QUEUE"])


async def get_workspace(target: Target, name: str) -> WorkspaceView:
    async with taugrid_api(target) as session:
        return await fetch(session, target, name)


async def fetch(session: Any, target: Target, name: str) -> WorkspaceView:
    obj = await session.get(target.workspaces_path(name), missing_ok=True)
    if obj is None:
        raise NotFoundError(f'TauWorkspace "{name}" not found in namespace {target.system_namespace}',
                            hint="list the workspaces with `tau workspace list` (or pass -n/--context)")
    return WorkspaceView(obj)


@attrs.frozen
class CheckResult:
    view: WorkspaceView
    warnings: list[str]


async def check_workspace(target: Target, name: str, data_pvc: str | None) -> CheckResult:
    async with taugrid_api(target) as session:
        view = await fetch(session, target, name)
        warnings: list[str] = []
        if data_pvc and view.namespace:
            path = f"/api/v1/namespaces/{view.namespace}/persistentvolumeclaims/{data_pvc}"
            try:
                pvc = await session.get(path, missing_ok=True)
            except KubeApiError as exc:
                raise ClusterError(f'cannot verify durable /data PVC "{data_pvc}" in namespace '
                                   f'"{view.namespace}": {exc.message}', hint=exc.hint) from exc
            if pvc is None:
                warnings.append(f'durable /data PVC "{data_pvc}" not found in namespace "{view.namespace}". '
                                "Runs that declare it will not start; ask the platform team to provision it, or "
                                "drop --data-pvc if this workspace keeps no durable /data.")
            elif (pvc.get("status") or {}).get("phase") != "Bound":
                phase = (pvc.get("status") or {}).get("phase") or "unknown"
                warnings.append(f'durable /data PVC "{data_pvc}" in namespace "{view.namespace}" is not Bound '
                                f"(phase {phase}); pods that mount it stay Pending until it binds.")
    return CheckResult(view, warnings)


def not_ready_error(view: WorkspaceView) -> TauError:
    generation = (view.obj.get("metadata") or {}).get("generation")
    observed = view.status.get("observedGeneration")
    stale = "" if observed == generation else f"; status describes generation {observed}, the spec is at {generation}"
    return TauError(f'workspace "{view.name}" is not Ready (phase={view.phase or "Pending"}){stale}',
                    hint=f"the Conditions above say why; the controller reconciles it (tau workspace status "
                         f"{view.name})")
