"""The queue gate: a workload that ships its own Secret reaches Kueue only after the Secret exists.

A managed (SDK) submission with ``tau.secret`` / ``secret_from_env`` / ``secret_from_file`` renders a
Secret next to the workload.  Creating the workload first lets the Secret be owned by it (deleted with it),
but Kueue could admit the workload - and its pods fail on a missing ``secretKeyRef`` - before the Secret is
there.  So such a workload is created *suspended and without* its ``kueue.x-k8s.io/queue-name`` label:
Kueue ignores it and no pod starts.  Once every Secret exists the label comes back through a merge patch
guarded by the workload's UID and resourceVersion, so a concurrent change (a cancel, a replacement) is
never overwritten; on a conflict the guard re-reads and tries again only while the workload is still ours
and still gated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tau_core import keys
from tau_core.errors import ConflictError
from tau_core.kube import KubeApiError, KubeSession

from .objects import Obj, _labels, _labels_ref, _meta, _path_of

ATTEMPTS = 5


def gate(objects: Sequence[Obj]) -> str | None:
    """Take the queue label off ``objects[0]`` when the run ships a Secret; returns the queue to restore."""
    workload = objects[0]
    queue = _labels(workload).get(keys.KUEUE_QUEUE_NAME)
    ships_secret = any(o.get("kind") == "Secret" for o in objects[1:])
    if not queue or not ships_secret or (workload.get("spec") or {}).get("suspend") is not True:
        return None  # nothing to wait for (or a workload kind Kueue would not hold suspended)
    _labels_ref(workload).pop(keys.KUEUE_QUEUE_NAME)
    return str(queue)


def own(secret: Obj, workload: Obj) -> None:
    """Make ``workload`` the owner of ``secret`` (the garbage collector deletes it with the run)."""
    meta = _meta(workload)
    secret.setdefault("metadata", {})["ownerReferences"] = [{
        "apiVersion": workload.get("apiVersion"), "kind": workload.get("kind"), "name": meta.get("name"),
        "uid": meta.get("uid"), "blockOwnerDeletion": False}]


async def release(session: KubeSession, workload: Obj, queue: str) -> Obj:
    """Restore the queue label on the created ``workload``, guarded by its UID and resourceVersion."""
    path = _path_of(workload, named=True)
    uid = _meta(workload).get("uid")
    current: dict[str, Any] | None = workload
    for _ in range(ATTEMPTS):
        if current is None or _meta(current).get("uid") != uid:
            raise ConflictError(f"{_what(workload)} was deleted or replaced before it could be queued",
                                hint="submit the run again")
        if _labels(current).get(keys.KUEUE_QUEUE_NAME) == queue:
            return current  # an earlier attempt of this submission already queued it
        body = {"metadata": {"uid": uid, "resourceVersion": _meta(current).get("resourceVersion"),
                             "labels": {keys.KUEUE_QUEUE_NAME: queue}}}
        try:
            return await session.patch(path, body)
        except KubeApiError as exc:
            if exc.status != 409:
                raise
        current = await session.get(path, missing_ok=True)  # changed meanwhile: look again, then retry
    raise ConflictError(f"{_what(workload)} kept changing; its queue label could not be restored",
                        hint="check it with `tau run status`, then cancel and submit again")


def _what(workload: Obj) -> str:
    meta = _meta(workload)
    return f"{str(workload.get('kind', '')).lower()} {meta.get('namespace')}/{meta.get('name')}"
