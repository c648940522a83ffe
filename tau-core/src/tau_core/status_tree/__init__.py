"""The run status phase tree and failure classification, derived from plain Kubernetes objects.

Nothing here talks to a cluster: :class:`Snapshot` holds what one status refresh read (the Job or
RayJob, its Kueue Workloads, pods, ResourceClaims and events) and :func:`phases` turns it into the
ordered phase tree of reference run-config-and-rendering §4.1.  :func:`classify` is §4.2.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tau_core.lifecycle.base import FailureReason, Phase

PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
START_FAILURES = ("CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
                  "Error")
RAY_SUCCESS = ("succeed", "complete")
RAY_FAILURE = ("fail", "error", "stop", "cancel")


Obj = dict[str, Any]


@dataclass
class Snapshot:
    """Everything one status refresh read about run ``name``."""

    namespace: str
    name: str
    job: Obj | None = None
    rayjob: Obj | None = None
    workloads: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    claims: list[Obj] = field(default_factory=list)
    events: list[Obj] = field(default_factory=list)
    now: datetime | None = None
    versions: dict[str, str] = field(default_factory=dict)
    """resourceVersion of each list read (``workloads``, ``pods``, ``events``), for watches."""
    positions: dict[str, int] = field(default_factory=dict)
    """Queue position of pending Workloads (Kueue visibility API), by Workload name, when served."""
    departed: list[Obj] = field(default_factory=list)
    """Pods of this run seen earlier and deleted since (their last state): evidence that outlives the pod."""

    @property
    def workload(self) -> Obj | None:
        """The run's workload object; a Job wins over a RayJob of the same name."""
        return self.job or self.rayjob

    @property
    def kind(self) -> str | None:
        if self.job is not None:
            return "Job"
        if self.rayjob is not None:
            return "RayJob"
        return None


# -- small helpers --------------------------------------------------------------------------

def _status(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict((obj or {}).get("status") or {})


def _cond(obj: Mapping[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for c in _status(obj).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def _true(obj: Mapping[str, Any] | None, ctype: str) -> bool:
    c = _cond(obj, ctype)
    return bool(c and c.get("status") == "True")


def _meta(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict((obj or {}).get("metadata") or {})


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _elapsed(since: str | None, now: datetime | None) -> float | None:
    start = parse_time(since)
    if start is None or now is None:
        return None
    return max(0.0, (now - start).total_seconds())


def _container_statuses(pod: Obj, init: bool = False) -> list[dict[str, Any]]:
    key = "initContainerStatuses" if init else "containerStatuses"
    return list(_status(pod).get(key) or [])


def _waiting(cs: Mapping[str, Any]) -> dict[str, Any]:
    return dict((cs.get("state") or {}).get("waiting") or {})


def _terminated(cs: Mapping[str, Any]) -> dict[str, Any]:
    return dict((cs.get("state") or {}).get("terminated") or {})


def _last_terminated(cs: Mapping[str, Any]) -> dict[str, Any]:
    return dict((cs.get("lastState") or {}).get("terminated") or {})


def _events_for(events: Iterable[Obj], uids: set[str], names: set[str]) -> list[Obj]:
    out = []
    for ev in events:
        inv = ev.get("involvedObject") or ev.get("regarding") or {}
        if inv.get("uid") in uids or inv.get("name") in names:
            out.append(ev)
    return sorted(out, key=_event_time)


def _event_time(ev: Obj) -> str:
    return str(ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp")
               or _meta(ev).get("creationTimestamp") or "")


def ray_state(rayjob: Obj | None) -> tuple[str, str]:
    st = _status(rayjob)
    return str(st.get("jobDeploymentStatus") or ""), str(st.get("jobStatus") or "")


def _ray_terminal(rayjob: Obj | None) -> tuple[bool, bool]:
    """``(terminal, succeeded)`` for a RayJob."""
    deployment, job = ray_state(rayjob)
    text = f"{deployment} {job}".lower()
    if any(s in job.lower() for s in RAY_SUCCESS) or (deployment.lower() == "complete" and "fail" not in text):
        return True, True
    if any(f in text for f in RAY_FAILURE):
        return True, False
    return False, False


def terminal_state(snap: Snapshot) -> tuple[bool, bool]:
    """``(terminal, succeeded)`` of the run's workload."""
    if snap.job is not None:
        if _true(snap.job, "Complete") or _true(snap.job, "SuccessCriteriaMet"):
            return True, True
        if _true(snap.job, "Failed") or _true(snap.job, "FailureTarget"):
            return True, False
        return False, False
    if snap.rayjob is not None:
        return _ray_terminal(snap.rayjob)
    return False, False


# -- failure classification (§4.2) ------------------------------------------------------------

def classify(snap: Snapshot) -> FailureReason:
    """Why the run failed: Completed, Running, OOMKilled, Preempted, Evicted or Unknown.

    The evidence rules live in :mod:`tau_core.classification` (``verdict`` also says which evidence decided).
    """
    from tau_core.classification import verdict

    return verdict(snap).reason


def failure_signature(snap: Snapshot) -> str:
    """A short text that identifies the failure (for retry events), at most 160 characters."""
    parts: list[str] = []
    for pod in snap.pods:
        for cs in _container_statuses(pod):
            term = _terminated(cs) or _last_terminated(cs)
            if term and (term.get("exitCode") or term.get("reason") not in (None, "Completed")):
                parts.append(f"{cs.get('name')}:{term.get('reason') or 'Error'}:{term.get('exitCode')}")
        if _status(pod).get("reason"):
            parts.append(str(_status(pod).get("reason")))
    if snap.job is not None:
        failed = _cond(snap.job, "Failed")
        if failed:
            parts.append(str(failed.get("reason") or ""))
    if snap.rayjob is not None:
        deployment, job = ray_state(snap.rayjob)
        parts.append(f"{deployment}/{job}")
    text = ";".join(p for p in parts if p) or "unclassified"
    return text[:160]


# -- the phase tree (§4.1) -------------------------------------------------------------------

def _workload_phase(snap: Snapshot) -> Phase:
    name = "Kueue admission"
    wls = snap.workloads
    if not wls:
        if snap.workload is None:
            return Phase(name, "pending", "workload not observed")
        if "kueue.x-k8s.io/queue-name" not in (_meta(snap.workload).get("labels") or {}):
            return Phase(name, "skipped", "not queued through Kueue (no kueue.x-k8s.io/queue-name label)")
        return Phase(name, "active", "waiting for Kueue Workload",
                     hint="the workload needs the kueue.x-k8s.io/queue-name label and an existing LocalQueue")
    total = len(wls)
    finished = sum(1 for w in wls if _true(w, "Finished"))
    admitted = sum(1 for w in wls if (_true(w, "Admitted") or _true(w, "QuotaReserved")) and not _true(w, "Finished"))
    queues = sorted({str((w.get("spec") or {}).get("queueName") or "") for w in wls} - {""})
    queue = ",".join(queues) or "?"
    if finished == total:
        return Phase(name, "done", f"{total}/{total} finished; quota released queue={queue}")
    detail = f"{admitted + finished}/{total} admitted queue={queue}"
    if admitted + finished == total:
        return Phase(name, "done", detail)
    reason = ""
    warn = False
    for w in wls:
        if _true(w, "Admitted") or _true(w, "QuotaReserved"):
            continue
        evicted = _cond(w, "Evicted")
        preempted = _cond(w, "Preempted")
        for c in (preempted, evicted):
            if c and c.get("status") == "True":
                warn = True
                reason = str(c.get("message") or c.get("reason") or "")
        if not reason:
            qr = _cond(w, "QuotaReserved") or _cond(w, "Admitted") or _cond(w, "Pending")
            if qr:
                reason = str(qr.get("message") or qr.get("reason") or "")
        position = snap.positions.get(str(_meta(w).get("name")))
        if position is not None:
            detail += f" position={position + 1}"
    uids = {str(_meta(w).get("uid")) for w in wls}
    ev_reasons = [str(e.get("reason") or "") for e in _events_for(snap.events, uids, set())]
    if any(r in ("Evicted", "Preempted") for r in ev_reasons) and admitted == 0:
        warn = True
    if reason:
        detail += f" reason={reason}"
    if warn:
        return Phase(name, "warning", detail,
                     hint="Kueue reclaimed capacity for other work; the run is requeued and starts when quota frees up")
    hint = None
    low = reason.lower()
    if _short_of_quota(low):  # a flavor fits but lacks quota (other flavors may not fit at all)
        hint = ("the queue lacks free quota right now; the run starts when capacity frees up — ask the "
                "platform/queue owner for more capacity if it stays pending")
    elif "node affinity" in low or "taint" in low or "doesn't match" in low:
        hint = ("no ResourceFlavor of the queue matches the workload's node selector or tolerations; check "
                "compute.gpu_class and policy.node_selector against the workspace's flavors")
    elif "quota" in low or "insufficient" in low or "exceed" in low:
        hint = ("the queue lacks free quota right now; the run starts when capacity frees up — ask the "
                "platform/queue owner for more capacity if it stays pending")
    elif "localqueue" in low or "doesn't exist" in low or "not found" in low:
        hint = "the LocalQueue is missing or inactive; check `tau workspace status <workspace>`"
    return Phase(name, "active", detail, hint=hint)



def _short_of_quota(message: str) -> bool:
    """True when Kueue says some flavor lacks quota it does have (not a flavor capped at zero).

    Kueue lists one reason per flavor (``insufficient quota for cpu in flavor a, request > maximum
    capacity (500 > 32), untolerated taint {...} in flavor b``).  A flavor whose maximum is 0 offers none
    of that resource, which is a mismatch rather than a shortage.
    """
    start = 0
    while (at := message.find("insufficient", start)) >= 0:
        start = at + 1
        clause = message[at:].split(" in flavor ", 1)[-1]
        capacity = clause.split("maximum capacity (", 1)
        if len(capacity) == 1 or capacity[0].count(",") > 1:
            return True  # "insufficient unused quota ..." or no capacity figure for this flavor
        maximum = capacity[1].split(")", 1)[0].rpartition(">")[2].strip()
        if maximum not in ("0", "0m"):
            return True
    return False

def _pod_ids(pods: Iterable[Obj]) -> tuple[set[str], set[str]]:
    return {str(_meta(p).get("uid")) for p in pods}, {str(_meta(p).get("name")) for p in pods}


def _scheduling_phase(snap: Snapshot, admitted: bool) -> Phase:
    name = "Pod scheduling"
    pods = snap.pods
    if not pods:
        return Phase(name, "pending", "no pods yet" if admitted else "waiting for admission")
    assigned = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))
    detail = f"{assigned}/{len(pods)} assigned to nodes"
    if assigned == len(pods):
        return Phase(name, "done", detail)
    for p in pods:
        c = _cond(p, "PodScheduled")
        if c and c.get("status") == "False":
            return Phase(name, "warning", f"{detail} reason={c.get('reason')}: {c.get('message', '')}".rstrip(": "),
                         hint="check node selectors, taints and GPU capacity; confirm Kueue admission first")
    uids, names = _pod_ids(pods)
    for ev in reversed(_events_for(snap.events, uids, names)):
        if ev.get("reason") == "FailedScheduling":
            return Phase(name, "warning", f"{detail} reason=FailedScheduling: {ev.get('message', '')}",
                         hint="check node selectors, taints and GPU capacity; confirm Kueue admission first")
    return Phase(name, "active", detail)


def _dra_phase(snap: Snapshot) -> Phase:
    name = "DRA allocation"
    wanted = {
        str(rc.get("resourceClaimName") or rc.get("name"))
        for p in snap.pods for rc in (p.get("spec") or {}).get("resourceClaims") or []
    }
    if not wanted:
        return Phase(name, "skipped", "no ResourceClaims requested")
    allocated = sum(1 for c in snap.claims if (c.get("status") or {}).get("allocation"))
    total = max(len(wanted), len(snap.claims))
    detail = f"{allocated}/{total} allocated"
    if allocated >= total:
        return Phase(name, "done", detail)
    uids, names = _pod_ids(snap.pods)
    for ev in _events_for(snap.events, uids, names):
        msg = str(ev.get("message") or "")
        if "no suitable" in msg.lower() or "allocat" in str(ev.get("reason", "")).lower():
            return Phase(name, "warning", f"{detail}: {msg}", hint="no matching GPU device; check ResourceSlice "
                                                                    "availability for the device pool")
    return Phase(name, "active", detail)


def _pull_phase(snap: Snapshot) -> Phase:
    name = "Image pull"
    scheduled = [p for p in snap.pods if (p.get("spec") or {}).get("nodeName")]
    if not scheduled:
        return Phase(name, "pending", "waiting for scheduling")
    for p in scheduled:
        for cs in _container_statuses(p) + _container_statuses(p, init=True):
            w = _waiting(cs)
            if w.get("reason") in PULL_FAILURES:
                msg = str(w.get("message") or "")
                return Phase(name, "warning", f"{w.get('reason')}: {cs.get('image', '')} {msg}".strip(),
                             hint="verify the image name and tag, registry credentials and node egress")
    images: list[str] = []
    pending = False
    for p in scheduled:
        statuses = _container_statuses(p) + _container_statuses(p, init=True)
        declared = len((p.get("spec") or {}).get("containers") or [])
        if len(_container_statuses(p)) < declared:
            pending = True
        for cs in statuses:
            if cs.get("imageID") or _terminated(cs) or (cs.get("state") or {}).get("running"):
                if cs.get("image") and cs["image"] not in images:
                    images.append(str(cs["image"]))
            elif _waiting(cs).get("reason") in ("ContainerCreating", "PodInitializing", None, ""):
                pending = True
    if pending or not images:
        uids, names = _pod_ids(scheduled)
        pulling = [e for e in _events_for(snap.events, uids, names) if e.get("reason") == "Pulling"]
        detail = str(pulling[-1].get("message")) if pulling else "pulling images"
        return Phase(name, "active", detail)
    return Phase(name, "done", "available: " + ", ".join(images))


def _init_phase(snap: Snapshot) -> Phase:
    name = "Init containers"
    pods = snap.pods
    total = sum(len((p.get("spec") or {}).get("initContainers") or []) for p in pods)
    if not pods:
        return Phase(name, "pending", "waiting for pods")
    if total == 0:
        return Phase(name, "skipped", "no init containers")
    done = 0
    for p in pods:
        for cs in _container_statuses(p, init=True):
            term = _terminated(cs)
            if term and term.get("exitCode") == 0:
                done += 1
            elif term:
                return Phase(name, "warning", f"{cs.get('name')} exited {term.get('exitCode')} "
                                              f"({term.get('reason') or 'Error'})",
                             hint="the init step failed; read its log with `tau logs <run> -c <init-container>`")
            elif _waiting(cs).get("reason") in START_FAILURES:
                return Phase(name, "warning", f"{cs.get('name')}: {_waiting(cs).get('reason')}",
                             hint="the init step is crashing; read its log with `tau logs <run> -c <init-container>`")
    detail = f"{done}/{total} complete"
    if done >= total:
        return Phase(name, "done", detail)
    uids, names = _pod_ids(pods)
    for ev in reversed(_events_for(snap.events, uids, names)):
        if ev.get("reason") == "FailedMount":
            return Phase(name, "warning", f"{detail}; blocked: {ev.get('message')}",
                         hint="a volume cannot be mounted; check the PVC with `kubectl get pvc -n <namespace>`")
    return Phase(name, "active", detail)


def _start_phase(snap: Snapshot) -> Phase:
    name = "Container start"
    pods = snap.pods
    if not pods:
        return Phase(name, "pending", "waiting for pods")
    total = sum(len((p.get("spec") or {}).get("containers") or []) for p in pods)
    started = 0
    for p in pods:
        for cs in _container_statuses(p):
            term = _terminated(cs)
            if (cs.get("state") or {}).get("running") or term:
                started += 1
            if term and term.get("exitCode") not in (0, None):
                reason = term.get("reason") or "Error"
                hint = ("the container ran out of memory; raise compute.memory_limit or reduce the footprint"
                        if reason == "OOMKilled" else "the application failed; read `tau logs <run>`")
                return Phase(name, "warning", f"{started}/{total} started; {cs.get('name')} exited "
                                              f"{term.get('exitCode')} ({reason})", hint=hint)
            w = _waiting(cs)
            if w.get("reason") in START_FAILURES:
                return Phase(name, "warning", f"{started}/{total} started; {cs.get('name')}: {w.get('reason')}",
                             hint="the application or its configuration fails at start; read `tau logs <run>`")
    detail = f"{started}/{total} started"
    if total and started >= total:
        return Phase(name, "done", detail)
    return Phase(name, "active" if any((p.get("spec") or {}).get("nodeName") for p in pods) else "pending", detail)


def _pod_ready(pod: Obj) -> bool:
    return _status(pod).get("phase") == "Succeeded" or _true(pod, "Ready")


def _ready_phase(snap: Snapshot) -> Phase:
    name = "Ready"
    pods = snap.pods
    if not pods:
        return Phase(name, "pending", "waiting for pods")
    ready = sum(1 for p in pods if _pod_ready(p))
    detail = f"{ready}/{len(pods)} pods ready"
    failed = [p for p in pods if _status(p).get("phase") == "Failed"]
    if failed:
        reason = _status(failed[0]).get("reason") or "Failed"
        return Phase(name, "warning", f"{detail}; pod {_meta(failed[0]).get('name')} failed ({reason})",
                     hint="see `tau run status` warnings above and `tau logs <run>`")
    if ready == len(pods):
        return Phase(name, "done", detail)
    return Phase(name, "active" if any(_status(p).get("phase") == "Running" for p in pods) else "pending", detail)


def _raycluster_phase(snap: Snapshot) -> Phase:
    name = "RayCluster"
    st = _status(snap.rayjob)
    cluster = st.get("rayClusterName")
    terminal, succeeded = _ray_terminal(snap.rayjob)
    if not cluster:
        if terminal and not succeeded:
            return Phase(name, "warning", "RayJob failed before its RayCluster was created")
        return Phase(name, "active", "waiting for the RayCluster")
    cstate = ((st.get("rayClusterStatus") or {}).get("state")) or st.get("jobDeploymentStatus") or "unknown"
    if terminal and not succeeded:
        return Phase(name, "warning", f"created {cluster} status={cstate}; RayJob failed")
    return Phase(name, "done", f"created {cluster} status={cstate}")


def _rayjob_phase(snap: Snapshot) -> Phase:
    name = "RayJob status"
    deployment, job = ray_state(snap.rayjob)
    detail = f"deployment={deployment or '-'} job={job or '-'}"
    text = f"{deployment} {job}".lower()
    if any(f in text for f in RAY_FAILURE):
        msg = _status(snap.rayjob).get("message")
        return Phase(name, "warning", detail + (f": {msg}" if msg else ""),
                     hint="read the driver output with `tau logs <run>`")
    if any(s in text for s in (*RAY_SUCCESS, "running")):
        return Phase(name, "done", detail)
    return Phase(name, "active" if deployment else "pending", detail)


def _release_phase(snap: Snapshot) -> Phase:
    name = "Compute release"
    terminal, _ = _ray_terminal(snap.rayjob)
    if not terminal:
        return Phase(name, "pending", "RayJob still running")
    live = [p for p in snap.pods if _status(p).get("phase") in ("Pending", "Running")
            and not _meta(p).get("deletionTimestamp")]
    if live:
        return Phase(name, "active", f"resources NOT reusable; {len(live)} Ray pod(s) still hold nodes")
    return Phase(name, "done", "quota released; resources reusable; no active Ray pods remain")


def _latest_timestamp(snap: Snapshot) -> datetime | None:
    stamps: list[datetime] = []

    def add(text: Any) -> None:
        value = parse_time(text if isinstance(text, str) else None)
        if value is not None:
            stamps.append(value)

    for obj in [snap.workload, *snap.workloads, *snap.pods]:
        if not obj:
            continue
        add(_meta(obj).get("creationTimestamp"))
        for c in _status(obj).get("conditions") or []:
            add(c.get("lastTransitionTime"))
        for cs in _container_statuses(obj):
            for state in (cs.get("state") or {}).values():
                if isinstance(state, dict):
                    add(state.get("startedAt"))
                    add(state.get("finishedAt"))
    for ev in snap.events:
        add(_event_time(ev))
    return max(stamps) if stamps else None


def cluster_now(snap: Snapshot) -> datetime | None:
    """"Now" as the cluster sees it: the local clock, unless the cluster's own timestamps show that its
    clock is far from ours (more than a day either way), in which case the latest observed timestamp."""
    local = snap.now
    latest = _latest_timestamp(snap)
    if local is None or latest is None:
        return local or latest
    if abs((local - latest).total_seconds()) > 86400:
        return latest
    return max(local, latest)


def phases(snap: Snapshot) -> list[Phase]:
    """The ordered phase tree for one snapshot."""
    now = cluster_now(snap)
    workload = snap.workload
    out: list[Phase] = []
    if workload is None:
        out.append(Phase("Submitted", "pending", "no batch/v1 Job or RayJob found",
                         hint="check the name with `tau run list`, or pass -n/--workspace/--context"))
    else:
        what = "batch/v1 Job created" if snap.kind == "Job" else "RayJob created"
        out.append(Phase("Submitted", "done", what,
                         elapsed_seconds=_elapsed(_meta(workload).get("creationTimestamp"), now)))
    admission = _workload_phase(snap)
    out.append(admission)
    admitted = admission.state == "done" or any(_true(w, "Admitted") or _true(w, "QuotaReserved")
                                                for w in snap.workloads)
    if snap.kind == "RayJob":
        out.append(_raycluster_phase(snap))
    pod_phases = [_scheduling_phase(snap, admitted), _dra_phase(snap), _pull_phase(snap), _init_phase(snap),
                  _start_phase(snap), _ready_phase(snap)]
    terminal, succeeded = terminal_state(snap)
    if snap.kind == "RayJob" and terminal:
        if succeeded:
            for p in pod_phases:
                if p.state not in ("done", "skipped"):
                    p.state, p.detail = "done", "RayJob completed successfully; post-run RayCluster teardown"
                    p.hint = None
        elif not snap.pods:
            for p in pod_phases:
                if p.state in ("pending", "active"):
                    p.state, p.detail = "skipped", "no pods remain"
    if snap.kind == "Job" and terminal and not snap.pods:
        for p in pod_phases:
            if p.state in ("pending", "active"):
                p.state, p.detail = "skipped", "pods already removed"
        if not succeeded:
            failed = _cond(snap.job, "Failed") or _cond(snap.job, "FailureTarget") or {}
            pod_phases[-1] = Phase("Ready", "warning", f"Job failed ({failed.get('reason') or 'Failed'}); "
                                   "its pods were removed", hint="see the failure evidence and `tau logs <run>`")
    out.extend(pod_phases)
    if snap.kind == "RayJob":
        out.append(_rayjob_phase(snap))
        out.append(_release_phase(snap))
    return out


# the typed model, its JSON form and the text rendering (re-exported: ``from tau_core.status_tree import ...``)
from tau_core.status_tree.model import (  # noqa: E402
    PhaseView,
    PodView,
    RetryView,
    StatusTree,
    first_failure,
    format_duration,
    render_tree,
    status_converter,
)

__all__ = [
    "Obj", "PhaseView", "PodView", "RetryView", "Snapshot", "StatusTree", "classify", "cluster_now",
    "failure_signature", "first_failure", "format_duration", "parse_time", "phases", "ray_state",
    "render_tree", "status_converter",
    "terminal_state",
]
