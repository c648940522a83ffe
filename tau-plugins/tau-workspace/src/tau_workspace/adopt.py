"""``tau workspace adopt``: hand a platform-provisioned namespace to TauGrid as a ``cluster-wide`` workspace.

The preflight only reads: the single-workspace rule, the Namespace, its LocalQueue and the
ClusterQueue behind it, and (unless ``--data-pvc ''``) a Bound PVC with an existing StorageClass.
Every object's UID is recorded (and compared with ``--*-uid`` when given); ``--apply`` repeats the
preflight, refuses if any UID changed, asks for a server dry run and creates the TauWorkspace.
It never creates anything else: no Namespace, RBAC, queue, PVC or StorageClass.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from tau_core import keys
from tau_core.errors import ConflictError
from tau_core.kube import KubeApiError, KubeSession
from tau_workspace import names
from tau_workspace.intent import DEFAULT_QUEUE, WorkspaceIntent
from tau_workspace.preflight import guarded, require_same, workspace_slot
from tau_workspace.target import KUEUE_API, Target, taugrid_api


@attrs.frozen
class AdoptRequest:
    name: str
    namespace: str | None = None
    queue: str = DEFAULT_QUEUE
    data_pvc: str = "blob-training"
    namespace_uid: str | None = None
    queue_uid: str | None = None
    pvc_uid: str | None = None
    storage_class: str | None = None
    cluster_queue: str | None = None
    output_root: str | None = None
    priority: str = "normal"


@attrs.frozen
class Observation:
    """What the preflight saw: the UID of every object it read, and the one-line summary."""

    uids: dict[str, str]
    summary: str
    slot: str


def build_intent(req: AdoptRequest, system_namespace: str) -> WorkspaceIntent:
    from tau_core.errors import UsageError
    from tau_workspace.create import PRIORITIES

    name = names.dns_label(req.name, "workspace name")
    for value, flag in ((req.cluster_queue, "--cluster-queue"), (req.data_pvc or None, "--data-pvc")):
        if value is not None:
            names.dns_label(value, flag)
    if req.priority not in PRIORITIES:
        raise UsageError(f"--priority must be one of: {', '.join(PRIORITIES)} (got {names.shown(req.priority)})")
    return WorkspaceIntent(
        name=name, system_namespace=system_namespace,
        namespace=names.dns_label(req.namespace if req.namespace is not None else name, "--namespace"),
        queue=names.dns_label(req.queue, "--queue"),
        output_root=names.absolute_clean_path(req.output_root or f"/data/projects/{name}/runs", "--output-root"),
        priority=req.priority, create_namespace=False)


def _expect(what: str, uid: str, expected: str | None, flag: str) -> None:
    if expected and uid != expected:
        raise ConflictError(f"{what} has uid {uid}, not the {flag} {expected}",
                            hint="the object was replaced since the platform recorded it; check it and rerun")


async def _namespace(session: KubeSession, req: AdoptRequest, intent: WorkspaceIntent, uids: dict[str, str]) -> None:
    ns = intent.namespace
    what = f'Namespace "{ns}"'
    obj, uids[what] = await guarded(session, f"/api/v1/namespaces/{ns}", what,
                                    "the platform provisions the namespace before adopting it")
    _expect(what, uids[what], req.namespace_uid, "--namespace-uid")
    labels = (obj.get("metadata") or {}).get("labels") or {}
    owner = labels.get(keys.WORKSPACE)
    if owner and owner != intent.name:
        raise ConflictError(f'Namespace "{ns}" is already assigned to TauWorkspace "{owner}"',
                            hint="adopt a namespace that no other workspace owns")
    default_queue = labels.get(keys.KUEUE_DEFAULT_LOCAL_QUEUE)
    if default_queue and default_queue != intent.queue:
        raise ConflictError(f'Namespace "{ns}" names default LocalQueue "{default_queue}", not "{intent.queue}"',
                            hint=f"pass --queue {default_queue}, or fix the namespace label")


async def _queues(session: KubeSession, req: AdoptRequest, intent: WorkspaceIntent, uids: dict[str, str]) -> str:
    ns, q = intent.namespace, intent.queue
    what = f'LocalQueue "{ns}/{q}"'
    lq, uids[what] = await guarded(session, f"{KUEUE_API}/namespaces/{ns}/localqueues/{q}", what,
                                   "the platform creates the LocalQueue first")
    _expect(what, uids[what], req.queue_uid, "--queue-uid")
    cq = str((lq.get("spec") or {}).get("clusterQueue") or "")
    if not cq:
        raise ConflictError(f'LocalQueue "{ns}/{q}" does not reference a ClusterQueue')
    if req.cluster_queue and cq != req.cluster_queue:
        raise ConflictError(f'LocalQueue "{ns}/{q}" references ClusterQueue "{cq}", not --cluster-queue '
                            f'"{req.cluster_queue}"')
    what = f'ClusterQueue "{cq}"'
    _, uids[what] = await guarded(session, f"{KUEUE_API}/clusterqueues/{cq}", what,
                                  "the LocalQueue points at a ClusterQueue that does not exist")
    return f"LocalQueue {ns}/{q} -> ClusterQueue {cq}"


async def _pvc(session: KubeSession, req: AdoptRequest, intent: WorkspaceIntent, uids: dict[str, str]) -> str:
    ns, name = intent.namespace, req.data_pvc
    what = f'PVC "{ns}/{name}"'
    pvc, uids[what] = await guarded(session, f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}", what,
                                    "provision the durable /data claim first, or pass --data-pvc '' to skip it")
    _expect(what, uids[what], req.pvc_uid, "--pvc-uid")
    phase = (pvc.get("status") or {}).get("phase")
    if phase != "Bound":
        raise ConflictError(f'PVC "{ns}/{name}" is not Bound (phase {phase or "unknown"})',
                            hint="wait for the volume to bind, then rerun")
    sc = str((pvc.get("spec") or {}).get("storageClassName") or "")
    if not sc:
        raise ConflictError(f'PVC "{ns}/{name}" names no storageClassName')
    if req.storage_class and sc != req.storage_class:
        raise ConflictError(f'PVC "{ns}/{name}" uses storageClass "{sc}", not --storage-class "{req.storage_class}"')
    what = f'StorageClass "{sc}"'
    _, uids[what] = await guarded(session, f"/apis/storage.k8s.io/v1/storageclasses/{sc}", what,
                                  "the PVC names a StorageClass that is gone")
    return f"PVC {ns}/{name} Bound (storageClass={sc})"


async def observe(session: KubeSession, target: Target, req: AdoptRequest, intent: WorkspaceIntent) -> Observation:
    slot = await workspace_slot(session, target, intent)
    uids: dict[str, str] = {}
    await _namespace(session, req, intent, uids)
    parts = [f"Namespace {intent.namespace}", await _queues(session, req, intent, uids)]
    if req.data_pvc:
        parts.append(await _pvc(session, req, intent, uids))
    parts.append(f"TauWorkspace {slot}")
    return Observation(uids, "preflight passed: " + "; ".join(parts), slot)


Hook = Callable[[KubeSession], Awaitable[None]]


async def adopt(target: Target, req: AdoptRequest, intent: WorkspaceIntent, *, apply: bool,
                between: Hook | None = None) -> tuple[str, str | None]:
    """(summary, result line or None for a preview)."""
    async with taugrid_api(target) as session:
        first = await observe(session, target, req, intent)
        if not apply:
            return first.summary, None
        if between is not None:
            await between(session)
        second = await observe(session, target, req, intent)
        for what, uid in first.uids.items():
            require_same(what, uid, second.uids.get(what, "(gone)"))
        if second.slot == "compatible":
            return first.summary, (f'TauWorkspace "{intent.name}" already matches the requested adoption; '
                                   "no changes made")
        try:
            await session.create(target.workspaces_path(), intent.manifest(), dry_run=True)
            await session.create(target.workspaces_path(), intent.manifest())
        except KubeApiError as exc:
            if exc.already_exists:
                raise ConflictError(f'TauWorkspace "{intent.name}" was created by someone else during preflight',
                                    hint="rerun the command to compare it") from exc
            raise
    return first.summary, (f"TauWorkspace {intent.system_namespace}/{intent.name} created (cluster-wide "
                           "authorization: the platform's existing RBAC grants researcher access)")
