"""The Runs board and the run detail, computed from the watch cache (reference §4.3).

The detail's phase tree is :func:`tau_core.status_tree.phases` -- the same implementation as
``tau run status`` -- fed with a :class:`~tau_core.status_tree.Snapshot` built from cached objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from tau_core import keys
from tau_core.status_tree import Snapshot, phases, terminal_state
from taugrid_portal.portal.cache import Obj, WatchCache
from taugrid_portal.portal.directory import Scope
from taugrid_portal.portal.history import DurableRuns, durable_row

RUN_KEYS = ("jobs", "rayjobs")
DETAIL_KEYS = ("jobs", "rayjobs", "pods", "workloads")
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def _meta(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict((obj or {}).get("metadata") or {})


def _cond_true(obj: Obj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def job_status(job: Obj) -> str:
    for ctype in ("Complete", "Failed", "Suspended"):
        if _cond_true(job, ctype):
            return ctype
    if int((job.get("status") or {}).get("active") or 0) > 0:
        return "Running"
    return "Pending"


def rayjob_status(rayjob: Obj) -> str:
    status = rayjob.get("status") or {}
    return str(status.get("jobDeploymentStatus") or status.get("jobStatus") or "Pending")


def age(created: str | None, now: datetime) -> str:
    if not created:
        return "<unknown>"
    try:
        then = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def is_tau(obj: Obj) -> bool:
    return any(k.startswith(keys.DOMAIN + "/") for k in (_meta(obj).get("labels") or {}))


def tracking(obj: Obj) -> tuple[str, str]:
    meta = _meta(obj)
    ann, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    target = ann.get(keys.STELLAR_EXPERIMENT_ID) or labels.get(keys.STELLAR_EXPERIMENT) or ""
    path = "/stellar?" + urlencode({"target": target}) if target else ""  # an annotation: any text
    if ann.get(keys.EXPERIMENT_SOURCE) == "stellar" and ann.get(keys.METRICS_SESSION_ID):
        return "tracked", path
    return ("available", path) if target else ("untracked", "")


def run_row(obj: Obj, kind: str, cluster: str, now: datetime) -> dict[str, Any]:
    meta = _meta(obj)
    labels, ann = meta.get("labels") or {}, meta.get("annotations") or {}
    state, path = tracking(obj)
    return {
        "name": meta.get("name", ""), "kind": kind, "runId": labels.get(keys.RUN_ID) or labels.get(keys.RUN) or "",
        "namespace": meta.get("namespace", ""), "cluster": cluster, "resourceUid": meta.get("uid", ""),
        "durableId": "", "source": "tau" if is_tau(obj) else "external",
        "status": job_status(obj) if kind == "Job" else rayjob_status(obj),
        "created": meta.get("creationTimestamp", ""), "age": age(meta.get("creationTimestamp"), now),
        "queue": labels.get(keys.KUEUE_QUEUE_NAME, ""), "experimentTracking": state, "experimentPath": path,
        "executionTarget": "multiKueue" if (obj.get("spec") or {}).get("managedBy") == MULTIKUEUE else "",
        "attempt": int(ann[keys.RETRY_ATTEMPT]) if str(ann.get(keys.RETRY_ATTEMPT, "")).isdigit() else None,
    }


def _submitter(job: Obj) -> bool:
    return any(o.get("kind") in ("RayJob", "RayCluster") for o in _meta(job).get("ownerReferences") or [])


HISTORY_UNAVAILABLE = "durable run history is not available in this build; showing live runs only"


def runs_board(cache: WatchCache, scope: Scope, *, include_external: bool = False,
               history: bool = False, durable: DurableRuns | None = None) -> dict[str, Any]:
    """The live runs, merged with ``durable`` (the recorded runs, :mod:`.history`) when that is available;
    with ``history`` and no durable tier the board says it is missing."""
    now = datetime.now(UTC)
    ns = scope.namespace
    rows: list[dict[str, Any]] = []
    for key, kind in (("jobs", "Job"), ("rayjobs", "RayJob")):
        for obj in cache.items(key):
            meta = _meta(obj)
            if ns and meta.get("namespace") != ns:
                continue
            if kind == "Job" and _submitter(obj):
                continue
            if not include_external and not is_tau(obj):
                continue
            if scope.managed and scope.local_queue and \
                    (meta.get("labels") or {}).get(keys.KUEUE_QUEUE_NAME) not in (scope.local_queue, None):
                continue
            rows.append(run_row(obj, kind, scope.cluster, now))
    if durable is not None and durable.state == "available":
        by_uid = {r.resource_uid: r for r in durable.latest if r.resource_uid}
        for row in rows:
            if row["resourceUid"] in by_uid:
                row["durableId"] = by_uid.pop(row["resourceUid"]).durable_id
        rows += [durable_row(r) for r in by_uid.values() if not ns or r.namespace == ns]
    rows.sort(key=lambda r: (r["created"], r["namespace"], r["name"]), reverse=True)
    if durable is not None and durable.state != "live-only":
        state, diagnostic = durable.state, durable.diagnostic
    else:
        state, diagnostic = ("history-unavailable", HISTORY_UNAVAILABLE) if history else ("live-only", "")
    return {"namespace": ns, "total": len(rows), "runs": rows, "historyState": state,
            "historyDiagnostic": diagnostic}


def snapshot(cache: WatchCache, ns: str, name: str) -> Snapshot:
    job, rayjob = cache.get("jobs", ns, name), cache.get("rayjobs", ns, name)
    snap = Snapshot(namespace=ns, name=name, job=job, rayjob=rayjob, now=datetime.now(UTC))
    workload = snap.workload
    if workload is None:
        return snap
    uid = _meta(workload).get("uid")
    snap.workloads = [w for w in cache.items("workloads") if _meta(w).get("namespace") == ns
                      and (_meta(w).get("labels") or {}).get(keys.KUEUE_JOB_UID) == uid]
    ray_cluster = ((rayjob or {}).get("status") or {}).get("rayClusterName")

    def mine(pod: Obj) -> bool:
        labels = _meta(pod).get("labels") or {}
        if _meta(pod).get("namespace") != ns:
            return False
        if job is not None:
            return labels.get("controller-uid") == uid or labels.get("batch.kubernetes.io/controller-uid") == uid
        return bool(ray_cluster and labels.get(keys.RAY_CLUSTER) == ray_cluster) or labels.get(keys.JOB_NAME) == name

    snap.pods = [p for p in cache.items("pods") if mine(p)]
    return snap


def relevant_events(snap: Snapshot, events: list[Obj]) -> list[dict[str, Any]]:
    uids = {_meta(x).get("uid") for x in [snap.workload, *snap.workloads, *snap.pods] if x}
    names = {snap.name} | {_meta(x).get("name") for x in snap.pods}
    out = []
    for e in events:
        inv = e.get("involvedObject") or e.get("regarding") or {}
        if inv.get("uid") in uids or (inv.get("name") in names and not inv.get("uid")):
            out.append({"type": e.get("type", ""), "reason": e.get("reason", ""), "message": e.get("message", ""),
                        "object": f"{inv.get('kind', '')}/{inv.get('name', '')}",
                        "time": e.get("lastTimestamp") or e.get("eventTime") or _meta(e).get("creationTimestamp")})
    out.sort(key=lambda e: str(e["time"] or ""))
    return out[-50:]


def pod_row(pod: Obj) -> dict[str, Any]:
    status, spec = pod.get("status") or {}, pod.get("spec") or {}
    return {"name": _meta(pod).get("name", ""), "phase": status.get("phase", ""), "node": spec.get("nodeName", ""),
            "restarts": sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []),
            "containers": [c.get("name") for c in spec.get("containers") or []]}


def run_detail(snap: Snapshot, cluster: str) -> dict[str, Any]:
    workload = snap.workload
    assert workload is not None
    terminal, succeeded = terminal_state(snap)
    row = run_row(workload, snap.kind or "Job", cluster, snap.now or datetime.now(UTC))
    meta = _meta(workload)
    return {
        "run": row,
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
        "terminal": terminal, "succeeded": succeeded,
        "phases": [{"name": p.name, "state": p.state, "detail": p.detail, "hint": p.hint,
                    "elapsedSeconds": p.elapsed_seconds} for p in phases(snap)],
        "workloads": [{"name": _meta(w).get("name", ""),
                       "admitted": _cond_true(w, "Admitted"), "quotaReserved": _cond_true(w, "QuotaReserved")}
                      for w in snap.workloads],
        "pods": [pod_row(p) for p in snap.pods],
        "tracking": {"state": row["experimentTracking"], "path": row["experimentPath"]},
        "diagnostics": {"workloads": "ready" if snap.workloads else "empty",
                        "pods": "ready" if snap.pods else "empty"},
    }
