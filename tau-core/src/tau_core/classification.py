"""Why a run failed, and which piece of evidence says so (reference run-config-and-rendering §4.2).

The evidence of a disruption reaches a client through separate objects that no watch orders against
each other: the pod's ``DisruptionTarget`` condition, the ``Preempted``/``Evicted`` Event, the Kueue
Workload's ``Evicted``/``Preempted`` conditions and the Job's own ``Failed`` condition.  A client can see the
Job ``Failed`` before the pod update and the Event arrive (each resource has its own watch stream), and,
on a real cluster, after the preempted pod has already been deleted (the scheduler deletes its victims; the
Job controller's tracking finalizer only holds the pod until the failure is counted).  So:

* a pod of *this attempt* is recognised by its owner (the Job's uid on its ``controller-uid`` label or
  ``ownerReferences``), and a deleted one by the ``Created pod: <name>`` Events the Job controller recorded
  on the Job (matched by the Job's uid), never by a name shared with an earlier attempt;
* pods seen earlier and deleted since (``Snapshot.departed``) still count as evidence;
* :func:`verdict` says which object decided (``Verdict.evidence``), and :func:`settled` tells a caller
  whether a failure without any evidence may still be waiting for it (the backend then re-reads the
  cluster for a short, bounded grace period before it settles on ``Unknown``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tau_core.lifecycle.base import FailureReason
from tau_core.status_tree import Obj, Snapshot, terminal_state

JOB_CREATED_POD = "Created pod: "
SIGNAL_EXIT_CODES = (137, 143)  # SIGKILL/SIGTERM: the container was stopped from outside
DISRUPTION_CONDITION_MESSAGE = "DisruptionTarget"


@dataclass(frozen=True)
class Verdict:
    """A classification and the evidence that decided it (empty when nothing explains the failure)."""

    reason: FailureReason
    evidence: str = ""


def _status(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict((obj or {}).get("status") or {})


def _meta(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict((obj or {}).get("metadata") or {})


def _cond(obj: Mapping[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for c in _status(obj).get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return dict(c)
    return None


def _containers(pod: Obj) -> list[dict[str, Any]]:
    st = _status(pod)
    return list(st.get("containerStatuses") or []) + list(st.get("initContainerStatuses") or [])


def _terminations(cs: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict((cs.get(k) or {}).get("terminated") or {}) for k in ("state", "lastState")]


# -- which pods and events belong to this attempt -------------------------------------------------

def _owned(pod: Obj, owner_uid: str) -> bool:
    labels = _meta(pod).get("labels") or {}
    if owner_uid in (labels.get("controller-uid"), labels.get("batch.kubernetes.io/controller-uid")):
        return True
    return any(ref.get("uid") == owner_uid for ref in _meta(pod).get("ownerReferences") or [])


def attempt_pods(snap: Snapshot) -> list[Obj]:
    """Pods of the current attempt, live first, then those seen earlier and deleted since."""
    uid = str(_meta(snap.workload).get("uid") or "")
    live_uids = {_meta(p).get("uid") for p in snap.pods}
    departed = [p for p in snap.departed if _meta(p).get("uid") not in live_uids]
    if snap.job is None or not uid:
        return [*snap.pods, *departed]
    return [p for p in [*snap.pods, *departed] if _owned(p, uid)]


def _involved(ev: Obj) -> dict[str, Any]:
    return dict(ev.get("involvedObject") or ev.get("regarding") or {})


def created_pod_names(snap: Snapshot) -> set[str]:
    """Names of the pods the Job controller created for this Job (from its Events, matched by the Job's uid)."""
    uid = _meta(snap.job).get("uid")
    if not uid:
        return set()
    names = set()
    for ev in snap.events:
        inv = _involved(ev)
        message = str(ev.get("message") or ev.get("note") or "")
        if inv.get("kind") == "Job" and inv.get("uid") == uid and message.startswith(JOB_CREATED_POD):
            names.add(message[len(JOB_CREATED_POD):].strip())
    return names


def attempt_pod_events(snap: Snapshot) -> list[Obj]:
    """Events about this attempt's pods: by pod uid, or by a name the Job controller created for this Job."""
    pods = attempt_pods(snap)
    uids = {str(_meta(p).get("uid")) for p in pods if _meta(p).get("uid")}
    names = {str(_meta(p).get("name")) for p in pods} | created_pod_names(snap)
    known = {str(_meta(p).get("name")): _meta(p).get("uid") for p in pods}
    out = []
    for ev in snap.events:
        inv = _involved(ev)
        if inv.get("kind") not in (None, "", "Pod"):
            continue
        name, uid = inv.get("name"), inv.get("uid")
        if uid and uid in uids:
            out.append(ev)
        elif name in known:
            if not uid or not known[name]:
                out.append(ev)  # an event without a uid (or a pod read without one): the name is all there is
        elif name in names:
            out.append(ev)  # a pod this Job created and that is gone by now
    return out


# -- the verdict ------------------------------------------------------------------------------------

def _oom(pods: list[Obj]) -> Verdict | None:
    for pod in pods:
        name = _meta(pod).get("name")
        for cs in _containers(pod):
            if any(t.get("reason") == "OOMKilled" for t in _terminations(cs)):
                return Verdict(FailureReason.OOM_KILLED, f"pod {name}: container {cs.get('name')} OOMKilled")
        if _status(pod).get("reason") == "OOMKilled":
            return Verdict(FailureReason.OOM_KILLED, f"pod {name}: status reason OOMKilled")
    return None


def _evicted_pod(pod: Obj) -> bool:
    if _status(pod).get("reason") == "Evicted":
        return True
    target = _cond(pod, "DisruptionTarget")
    return bool(target and "evict" in str(target.get("reason", "")).lower())


def _preempted(snap: Snapshot, pods: list[Obj], events: list[Obj]) -> Verdict | None:
    for pod in pods:
        target = _cond(pod, "DisruptionTarget")
        if target and not _evicted_pod(pod):
            return Verdict(FailureReason.PREEMPTED, f"pod {_meta(pod).get('name')}: condition DisruptionTarget=True "
                                                    f"reason {target.get('reason') or '-'}")
    for ev in events:
        if "preempt" in str(ev.get("reason") or "").lower():
            return Verdict(FailureReason.PREEMPTED, f"event {ev.get('reason')} on pod {_involved(ev).get('name')}")
    for wl in snap.workloads:
        name = _meta(wl).get("name")
        preempted = _cond(wl, "Preempted")
        if preempted:
            return Verdict(FailureReason.PREEMPTED, f"Workload {name}: condition Preempted=True "
                                                    f"reason {preempted.get('reason') or '-'}")
        evicted = _cond(wl, "Evicted")
        if evicted and "preempt" in str(evicted.get("reason", "")).lower():
            return Verdict(FailureReason.PREEMPTED, f"Workload {name}: condition Evicted=True "
                                                    f"reason {evicted.get('reason')}")
    failed = _cond(snap.job, "Failed") or _cond(snap.job, "FailureTarget")
    if failed and failed.get("reason") == "PodFailurePolicy" and \
            DISRUPTION_CONDITION_MESSAGE in str(failed.get("message") or ""):
        return Verdict(FailureReason.PREEMPTED,
                       f"Job condition {failed.get('type')} reason PodFailurePolicy: {failed.get('message')}")
    return None


def _evicted(pods: list[Obj], events: list[Obj]) -> Verdict | None:
    for pod in pods:
        name = _meta(pod).get("name")
        if _status(pod).get("reason") == "Evicted":
            return Verdict(FailureReason.EVICTED, f"pod {name}: status reason Evicted")
        if any(str(c.get("reason")) == "Evicted" for c in _status(pod).get("conditions") or []):
            return Verdict(FailureReason.EVICTED, f"pod {name}: condition reason Evicted")
        target = _cond(pod, "DisruptionTarget")
        if target:
            return Verdict(FailureReason.EVICTED, f"pod {name}: condition DisruptionTarget=True "
                                                  f"reason {target.get('reason') or '-'}")
    for ev in events:
        if ev.get("reason") == "Evicted":
            return Verdict(FailureReason.EVICTED, f"event Evicted on pod {_involved(ev).get('name')}")
    return None


def _unexplained(snap: Snapshot, pods: list[Obj]) -> Verdict:
    """Unknown, with whatever the cluster does say about the failure (an exit code, the Job's reason)."""
    for pod in pods:
        for cs in _containers(pod):
            for term in _terminations(cs):
                code = term.get("exitCode")
                if code not in (None, 0):
                    return Verdict(FailureReason.UNKNOWN, f"pod {_meta(pod).get('name')}: container {cs.get('name')} "
                                                          f"exited {code} ({term.get('reason') or 'Error'})")
    failed = _cond(snap.job, "Failed")
    if failed and failed.get("reason") not in (None, "", "BackoffLimitExceeded"):
        return Verdict(FailureReason.UNKNOWN, f"Job condition Failed reason {failed.get('reason')}")
    return Verdict(FailureReason.UNKNOWN)


def verdict(snap: Snapshot) -> Verdict:
    """Completed, Running, OOMKilled, Preempted, Evicted or Unknown, with the evidence that decided it."""
    terminal, succeeded = terminal_state(snap)
    if terminal and succeeded:
        return Verdict(FailureReason.COMPLETED)
    if not terminal:
        return Verdict(FailureReason.RUNNING)
    pods = attempt_pods(snap)
    events = attempt_pod_events(snap)
    return _oom(pods) or _preempted(snap, pods, events) or _evicted(pods, events) or _unexplained(snap, pods)


def settled(snap: Snapshot, found: Verdict) -> bool:
    """False while a failed run's classification may still change as its evidence arrives.

    That is an ``Unknown`` with nothing that explains it: no pod of this attempt seen ending on its own
    (a non-signal exit code) and no specific reason on the Job (only ``BackoffLimitExceeded``, which every
    pod failure ends in).  A run in that state is re-read before it is reported as ``Unknown``.
    """
    if found.reason is not FailureReason.UNKNOWN:
        return True
    text = found.evidence
    if not text:
        return False
    return not any(f"exited {code} " in text for code in SIGNAL_EXIT_CODES)
