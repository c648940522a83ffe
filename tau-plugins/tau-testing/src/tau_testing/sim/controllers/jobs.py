"""The batch/v1 Job controller: pods from parallelism/completions (NonIndexed and Indexed), suspension,
backoffLimit, activeDeadlineSeconds, the Job conditions and ``ttlSecondsAfterFinished``.

Simplifications: failed pods are replaced at once (no exponential back-off delay), pods carry no
``batch.kubernetes.io/job-tracking`` finalizer (counts are taken from the pods that exist, never lowered),
and ``podFailurePolicy``/``successPolicy`` are not evaluated.

A pod preempted by the scheduler (``DisruptionTarget`` reason ``PreemptionByScheduler``) is removed once
this controller has counted it, as on a real cluster: the scheduler deletes its victims (after setting the
condition, and before its ``Preempted`` Event, which an asynchronous recorder sends), and the Job's tracking
finalizer holds the pod only until the Job controller has accounted for the failure.  A client therefore
meets a Job whose preempted pod is already gone; the condition and the Event are what remain.
"""

from __future__ import annotations

import copy
from typing import Any

from tau_testing.sim.controllers import _util as u
from tau_testing.sim.controllers import events
from tau_testing.sim.controllers.pods import kill_pod

COMPONENT = "job-controller"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
COMPLETE_REASON = "CompletionsReached"
COMPLETE_MESSAGE = "Reached expected number of succeeded pods"
BACKOFF_MESSAGE = "Job has reached the specified backoff limit"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"


def job_finished(job: dict[str, Any]) -> str | None:
    """``"Complete"`` or ``"Failed"`` when the Job has finished, else ``None``."""
    for ctype in ("Complete", "Failed"):
        if u.condition_true(job, ctype):
            return ctype
    return None


def _format_indexes(indexes: set[int]) -> str:
    """Kubernetes' compressed index list: ``0-2,5``."""
    out: list[str] = []
    ordered = sorted(indexes)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def _parse_indexes(text: str | None) -> set[int]:
    result: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            result.update(range(int(a), int(b) + 1))
        else:
            result.add(int(part))
    return result


def _pod_index(pod: dict[str, Any]) -> int | None:
    raw = (pod["metadata"].get("annotations") or {}).get(INDEX_KEY) or u.labels(pod).get(INDEX_KEY)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


class JobController:
    """Reconciles batch/v1 Jobs; toggle with ``.enabled``."""

    def __init__(self) -> None:
        self.enabled = True
        self._made: dict[str, int] = {}  # pods made per owner: fresh names even after deletions
        self._released: dict[str, set[str]] = {}  # failed pods counted and then removed, per owner

    def next_wakeup(self, cluster: Any) -> Any:
        """When a finished Job's TTL or a running Job's active deadline expires next."""
        current = u.now(cluster)
        upcoming = []
        for job in u.list_objects(cluster, "batch/v1", "Job"):
            spec, status = job.get("spec") or {}, job.get("status") or {}
            if job_finished(job):
                ttl = spec.get("ttlSecondsAfterFinished")
                done = u.parse_ts(status.get("completionTime")) or u.parse_ts(
                    (u.find_condition(job, "Failed") or {}).get("lastTransitionTime"))
                if ttl is not None and done is not None:
                    upcoming.append(u.plus(done, float(ttl)))
            elif spec.get("activeDeadlineSeconds") is not None and (started := u.parse_ts(status.get("startTime"))):
                upcoming.append(u.plus(started, float(spec["activeDeadlineSeconds"])))
        later = [t for t in upcoming if t > current]
        return min(later) if later else None

    def reconcile(self, cluster: Any) -> bool:
        pods_by_owner: dict[str, list[dict[str, Any]]] = {}
        for pod in u.list_objects(cluster, "v1", "Pod", label_selector="batch.kubernetes.io/controller-uid"):
            ref = u.controller_of(pod)
            if ref and ref.get("kind") == "Job":
                pods_by_owner.setdefault(ref["uid"], []).append(pod)
        changed = False
        for job in u.list_objects(cluster, "batch/v1", "Job"):
            if u.is_deleting(job):
                continue
            changed |= self._sync(cluster, job, pods_by_owner.get(job["metadata"]["uid"], []))
        return changed

    # ---------------------------------------------------------------------------------------------- sync

    def _sync(self, cluster: Any, job: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
        spec = job.get("spec") or {}
        current = u.now(cluster)
        finished = job_finished(job)
        active = [p for p in pods if not u.pod_is_terminal(p) and not u.is_deleting(p)]
        if finished:
            changed = self._release_preempted(cluster, job, pods)
            for pod in active:
                changed |= kill_pod(cluster, pod)
            return changed | self._ttl(cluster, job, current)

        status = copy.deepcopy(job.get("status") or {})
        conditions = status.setdefault("conditions", [])
        changed = False
        indexed = spec.get("completionMode") == "Indexed"
        succeeded_pods = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
        failed_pods = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
        succeeded = max(int(status.get("succeeded") or 0), len(succeeded_pods))
        restarts = 0
        if ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") == "OnFailure":
            restarts = sum(int(st.get("restartCount") or 0) for p in active
                           for st in (p.get("status") or {}).get("containerStatuses") or [])
        gone = self._released.get(job["metadata"]["uid"], set()) - {p["metadata"]["uid"] for p in failed_pods}
        failed = max(int(status.get("failed") or 0), len(failed_pods) + len(gone))
        done_indexes = _parse_indexes(status.get("completedIndexes"))
        if indexed:
            done_indexes |= {i for p in succeeded_pods if (i := _pod_index(p)) is not None}
            succeeded = max(succeeded, len(done_indexes))

        if spec.get("suspend"):
            changed = self._suspend(cluster, job, status, active, current)
            self._counts(status, 0, 0, succeeded, failed, indexed, done_indexes)
            return u.write_status_if_changed(cluster, job, status) | changed

        suspended_cond = u.find_condition({"status": status}, "Suspended")
        if suspended_cond and suspended_cond.get("status") == "True":
            u.set_condition(conditions, "Suspended", "False", "JobResumed", "Job resumed", current, probe_times=True)
            events.record(cluster, job, "Resumed", "Job resumed", component=COMPONENT)
        start = u.parse_ts(status.get("startTime"))
        if start is None:
            start = current
            status["startTime"] = u.ts(current)

        # ---- failure
        fail = _failure(spec, failed + restarts, u.seconds_between(start, current))
        if fail is not None:
            reason, message = fail
            for pod in active:
                kill_pod(cluster, pod)
            u.set_condition(conditions, "FailureTarget", "True", reason, message, current, probe_times=True)
            u.set_condition(conditions, "Failed", "True", reason, message, current, probe_times=True)
            self._counts(status, 0, 0, succeeded, failed, indexed, done_indexes)
            u.write_status_if_changed(cluster, job, status)
            events.record(cluster, job, reason, message, type="Warning", component=COMPONENT)
            self._release_preempted(cluster, job, failed_pods)
            return True

        # ---- success
        if _complete(spec, succeeded, done_indexes if indexed else None, bool(active)):
            for pod in active:
                kill_pod(cluster, pod)
            u.set_condition(conditions, "SuccessCriteriaMet", "True", COMPLETE_REASON, COMPLETE_MESSAGE, current,
                            probe_times=True)
            u.set_condition(conditions, "Complete", "True", COMPLETE_REASON, COMPLETE_MESSAGE, current,
                            probe_times=True)
            status["completionTime"] = u.ts(current)
            self._counts(status, 0, 0, succeeded, failed, indexed, done_indexes)
            u.write_status_if_changed(cluster, job, status)
            events.record(cluster, job, "Completed", "Job completed", component=COMPONENT)
            return True

        created = self._create_missing(cluster, job, pods, active, succeeded, done_indexes if indexed else None)
        ready = sum(1 for p in active if u.pod_is_ready(p))
        self._counts(status, len(active) + created, ready, succeeded, failed, indexed, done_indexes)
        changed |= u.write_status_if_changed(cluster, job, status)
        return self._release_preempted(cluster, job, failed_pods) | changed | bool(created)

    def _suspend(self, cluster: Any, job: dict[str, Any], status: dict[str, Any], active: list[dict[str, Any]],
                 current: Any) -> bool:
        """A suspended Job: its active pods deleted, ``Suspended=True``, no start time."""
        changed = False
        for pod in active:
            kill_pod(cluster, pod)
            events.record(cluster, job, "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}",
                          component=COMPONENT)
            changed = True
        if u.set_condition(status["conditions"], "Suspended", "True", "JobSuspended", "Job suspended", current,
                           probe_times=True):
            events.record(cluster, job, "Suspended", "Job suspended", component=COMPONENT)
        status.pop("startTime", None)
        return changed

    def _create_missing(self, cluster: Any, job: dict[str, Any], pods: list[dict[str, Any]],
                        active: list[dict[str, Any]], succeeded: int, done_indexes: set[int] | None) -> int:
        """Create the pods parallelism and completions still call for (``done_indexes``: an Indexed Job's
        completed indexes); the number created."""
        spec = job.get("spec") or {}
        completions = spec.get("completions")
        parallelism = int(spec.get("parallelism", 1) or 0)
        names_taken = {p["metadata"]["name"] for p in pods}
        created = 0
        if done_indexes is not None:
            active_indexes = {i for p in active if (i := _pod_index(p)) is not None}
            wanted = [i for i in range(int(completions or 0)) if i not in done_indexes and i not in active_indexes]
            room = max(parallelism - len(active), 0)
            for index in wanted[:room]:
                self._create_pod(cluster, job, index, names_taken)
                created += 1
        else:
            if completions is not None:
                want = min(parallelism, int(completions) - succeeded)
            else:
                want = parallelism if succeeded == 0 else 0
            for _ in range(max(want - len(active), 0)):
                self._create_pod(cluster, job, None, names_taken)
                created += 1
        return created

    def _release_preempted(self, cluster: Any, job: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
        """Remove the failed pods the scheduler preempted (and so deleted) once their failure is counted."""
        released = False
        for pod in pods:
            target = u.find_condition(pod, "DisruptionTarget") or {}
            if u.pod_is_terminal(pod) and target.get("reason") == "PreemptionByScheduler":
                ns, name = u.key(pod)
                if u.delete(cluster, "v1", "Pod", ns, name):
                    self._released.setdefault(job["metadata"]["uid"], set()).add(pod["metadata"]["uid"])
                    released = True
        return released

    @staticmethod
    def _counts(status: dict[str, Any], active: int, ready: int, succeeded: int, failed: int, indexed: bool,
                done: set[int]) -> None:
        for name, value in (("active", active), ("succeeded", succeeded), ("failed", failed)):
            if value:
                status[name] = value
            else:
                status.pop(name, None)
        status["ready"] = ready
        status["terminating"] = 0
        status["uncountedTerminatedPods"] = {}
        if indexed:
            status["completedIndexes"] = _format_indexes(done)

    def _create_pod(self, cluster: Any, job: dict[str, Any], index: int | None, taken: set[str]) -> None:
        meta = job["metadata"]
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        tmeta = template.get("metadata") or {}
        pod_labels = dict(tmeta.get("labels") or {})
        uid = meta["uid"]
        pod_labels.setdefault("controller-uid", uid)
        pod_labels.setdefault("batch.kubernetes.io/controller-uid", uid)
        pod_labels.setdefault("job-name", meta["name"])
        pod_labels.setdefault("batch.kubernetes.io/job-name", meta["name"])
        annotations = dict(tmeta.get("annotations") or {})
        pod_spec = template.get("spec") or {}
        prefix = meta["name"]
        if index is not None:
            pod_labels[INDEX_KEY] = str(index)
            annotations[INDEX_KEY] = str(index)
            prefix = f"{meta['name']}-{index}"
            pod_spec["hostname"] = f"{meta['name']}-{index}"
            env = {"name": "JOB_COMPLETION_INDEX",
                   "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_KEY}']"}}}
            for c in (pod_spec.get("containers") or []) + (pod_spec.get("initContainers") or []):
                c.setdefault("env", []).append(dict(env))
        n = self._made.get(uid, 0)
        while True:
            name = f"{prefix}-{u.suffix(uid, index, n)}"
            if name not in taken:
                break
            n += 1
        taken.add(name)
        self._made[uid] = n + 1
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": meta["namespace"], "generateName": f"{prefix}-",
                         "labels": pod_labels, "annotations": annotations, "ownerReferences": [u.owner_ref(job)]},
            "spec": pod_spec,
        }
        if not annotations:
            del pod["metadata"]["annotations"]
        if u.create(cluster, pod) is not None:
            events.record(cluster, job, "SuccessfulCreate", f"Created pod: {name}", component=COMPONENT)

    def _ttl(self, cluster: Any, job: dict[str, Any], current: Any) -> bool:
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        if ttl is None:
            return False
        status = job.get("status") or {}
        finished_at = u.parse_ts(status.get("completionTime"))
        if finished_at is None:
            cond = u.find_condition(job, "Failed")
            finished_at = u.parse_ts((cond or {}).get("lastTransitionTime"))
        if finished_at is None or u.seconds_between(finished_at, current) < float(ttl):
            return False
        ns, name = u.key(job)
        return u.delete(cluster, "batch/v1", "Job", ns, name, propagation="Background")


def _failure(spec: dict[str, Any], failures: int, running_for: float) -> tuple[str, str] | None:
    """(reason, message) when the Job has failed: past its backoffLimit or its activeDeadlineSeconds."""
    backoff_limit = spec.get("backoffLimit", 6)
    if backoff_limit is not None and failures > int(backoff_limit):
        return ("BackoffLimitExceeded", BACKOFF_MESSAGE)
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and running_for >= float(deadline):
        return ("DeadlineExceeded", DEADLINE_MESSAGE)
    return None


def _complete(spec: dict[str, Any], succeeded: int, done_indexes: set[int] | None, active: bool) -> bool:
    """Whether the Job met its completions (every index, for an Indexed Job; one success and no pod left
    running, without completions)."""
    completions = spec.get("completions")
    if done_indexes is not None:
        return completions is not None and done_indexes >= set(range(int(completions)))
    if completions is not None:
        return bool(succeeded >= int(completions))
    return succeeded > 0 and not active
