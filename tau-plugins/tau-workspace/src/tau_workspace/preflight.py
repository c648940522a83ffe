"""Read-only checks shared by ``create`` and ``adopt``: the single-workspace rule and guarded reads.

Every guarded read returns the object's UID, so that ``--apply`` can repeat the preflight and refuse
when an object was replaced in between (same name, new UID).
"""

from __future__ import annotations

from typing import Any, Literal

from tau_core.errors import ConflictError, NotFoundError
from tau_core.kube import KubeSession
from tau_workspace.intent import WorkspaceIntent, compatible
from tau_workspace.target import KUEUE_API, Target, is_terminating

Slot = Literal["absent", "compatible"]


async def workspace_slot(session: KubeSession, target: Target, intent: WorkspaceIntent) -> Slot:
    """``absent`` when no TauWorkspace exists, ``compatible`` when the one there matches ``intent``."""
    items = await session.list_items(target.workspaces_path())
    ns = target.system_namespace
    if len(items) > 1:
        names = ", ".join(sorted(str((i.get("metadata") or {}).get("name")) for i in items))
        raise ConflictError(f"v0 supports one TauWorkspace, but {len(items)} already exist in namespace {ns} "
                            f"({names})", hint="delete the extra workspaces before creating another")
    if not items:
        return "absent"
    existing = items[0]
    name = (existing.get("metadata") or {}).get("name")
    if is_terminating(existing):
        raise ConflictError(f'TauWorkspace "{name}" in namespace {ns} is being deleted',
                            hint="wait until it is gone (kubectl get workspaces.tau.azure.com -n "
                                 f"{ns} -w), then rerun")
    if not compatible(intent, existing):
        raise ConflictError(f'v0 supports one active workspace, and TauWorkspace "{name}" already exists in '
                            f"namespace {ns} with a different intent",
                            hint=f"inspect it with `tau workspace status {name}`; change it with kubectl edit, "
                                 "or delete it first")
    return "compatible"


def _uid(obj: dict[str, Any], what: str) -> str:
    if is_terminating(obj):
        raise ConflictError(f"{what} is being deleted", hint="wait for the platform installer to recreate it")
    uid = str((obj.get("metadata") or {}).get("uid") or "")
    if not uid:
        raise ConflictError(f"{what} has no UID", hint="the API server returned an incomplete object; retry")
    return uid


async def guarded(session: KubeSession, path: str, what: str, hint: str) -> tuple[dict[str, Any], str]:
    """The object at ``path`` and its UID; missing, terminating or UID-less objects are refused."""
    obj = await session.get(path, missing_ok=True)
    if obj is None:
        raise NotFoundError(f"{what} not found", hint=hint)
    return obj, _uid(obj, what)


async def cluster_queue_uid(session: KubeSession, name: str) -> str:
    _, uid = await guarded(session, f"{KUEUE_API}/clusterqueues/{name}", f'ClusterQueue "{name}"',
                           "install TauGrid first (`tau cluster install`), which creates the baseline queue")
    return uid


def require_same(what: str, before: str, after: str) -> None:
    if before != after:
        raise ConflictError(f"{what} was replaced during preflight (uid {before} -> {after}); nothing was created",
                            hint="rerun the command to check the new object")
