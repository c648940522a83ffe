"""Kueue stand-in, the model: labels and names, the job integrations, what a Workload says about itself, and
the public eviction and preemption calls. The controller lives in ``tau_testing.sim.controllers.kueue``."""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any, cast

from tau_testing.sim.controllers import _util as u
from tau_testing.sim.controllers import events

API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
FINALIZER = "kueue.x-k8s.io/resource-in-use"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
ADMISSION_COMPONENT = "kueue-admission"
JOB_COMPONENT = "kueue-job-controller"
WORKLOAD_COMPONENT = "kueue-workload-controller"
PREEMPTED_MESSAGE = "Preempted to accommodate a higher priority Workload"
SUBMITTER_TEMPLATE = {
    "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "ray-job-submitter", "image": "rayproject/ray:2.40.0",
                        "resources": {"requests": {"cpu": "500m", "memory": "200Mi"},
                                      "limits": {"cpu": "1", "memory": "1Gi"}}}],
    }
}


# ------------------------------------------------------------------------------------------ integrations


@dataclass(frozen=True)
class Integration:
    api_version: str
    kind: str
    group: str


JOB = Integration("batch/v1", "Job", "batch")
RAYJOB = Integration("ray.io/v1", "RayJob", "ray.io")
RAYCLUSTER = Integration("ray.io/v1", "RayCluster", "ray.io")
POD = Integration("v1", "Pod", "")
INTEGRATIONS = (JOB, RAYJOB, RAYCLUSTER, POD)
_BY_KIND = {i.kind: i for i in INTEGRATIONS}


def workload_name(kind: str, group: str, name: str, uid: str) -> str:
    """Kueue's ``GetWorkloadNameForOwnerWithGVK``: ``<kind>-<name>-<first 5 hex of sha1>``."""
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode()).hexdigest()
    prefix = f"{kind.lower()}-{name}"[: 252 - 5]
    return f"{prefix}-{digest[:5]}"


def _templates(integ: Integration, obj: dict[str, Any]) -> list[tuple[str, int, dict[str, Any]]]:
    """(pod set name, count, live reference to the pod template) for a job object."""
    spec = obj.setdefault("spec", {})
    if integ is JOB:
        parallelism = int(spec.get("parallelism", 1) or 0)
        completions = spec.get("completions")
        count = min(parallelism, int(completions)) if completions is not None else parallelism
        return [("main", count, spec.setdefault("template", {}))]
    if integ is POD:
        return [("main", 1, obj)]
    cluster_spec = spec.setdefault("rayClusterSpec", {}) if integ is RAYJOB else spec
    out = [("head", 1, cluster_spec.setdefault("headGroupSpec", {}).setdefault("template", {}))]
    for group in cluster_spec.get("workerGroupSpecs") or []:
        replicas = group.get("replicas")
        if replicas is None:
            replicas = group.get("minReplicas", 0)
        count = int(replicas or 0) * int(group.get("numOfHosts", 1) or 1)
        out.append((group.get("groupName", "workers"), count, group.setdefault("template", {})))
    if integ is RAYJOB and (spec.get("submissionMode") or "K8sJobMode") == "K8sJobMode":
        template = spec.get("submitterPodTemplate")
        out.append(("submitter", 1, template if template is not None else copy.deepcopy(SUBMITTER_TEMPLATE)))
    return out


def _pod_spec_of(template: dict[str, Any]) -> dict[str, Any]:
    return cast("dict[str, Any]", template.setdefault("spec", {}))


def _is_suspended(integ: Integration, obj: dict[str, Any]) -> bool:
    if integ is POD:
        return bool((obj.get("spec") or {}).get("schedulingGates")) and not (obj.get("spec") or {}).get("nodeName")
    return bool((obj.get("spec") or {}).get("suspend"))


def _finished(integ: Integration, obj: dict[str, Any]) -> tuple[str, str] | None:
    status = obj.get("status") or {}
    if integ is JOB:
        for cond in status.get("conditions") or []:
            if cond.get("status") == "True" and cond.get("type") == "Complete":
                return ("Succeeded", "Job finished successfully")
            if cond.get("status") == "True" and cond.get("type") == "Failed":
                return ("Failed", cond.get("message") or "Job failed")
        return None
    if integ is RAYJOB:
        deployment = status.get("jobDeploymentStatus")
        if deployment == "Complete":
            return ("Succeeded", status.get("message") or "Job finished successfully")
        if deployment == "Failed":
            return ("Failed", status.get("message") or "Job failed")
        return None
    if integ is POD:
        phase = status.get("phase")
        if phase == "Succeeded":
            return ("Succeeded", "Pod finished successfully")
        if phase == "Failed":
            return ("Failed", status.get("message") or "Pod failed")
    return None


def _eligible(integ: Integration, obj: dict[str, Any]) -> bool:
    if not u.labels(obj).get(QUEUE_LABEL) or u.is_deleting(obj):
        return False
    owner = u.controller_of(obj)
    if integ is RAYCLUSTER:
        return not (owner and owner.get("kind") == "RayJob")
    if integ is POD:
        return not (owner and owner.get("kind") in ("Job", "RayCluster", "RayJob", "JobSet"))
    return True


def _priority(cluster: Any, obj: dict[str, Any], pod_spec: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
    wpc_name = u.labels(obj).get(PRIORITY_LABEL)
    if wpc_name:
        wpc = u.get(cluster, API, "WorkloadPriorityClass", None, wpc_name)
        if wpc is not None:
            return int(wpc.get("value") or 0), {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                               "name": wpc_name}
    pc_name = pod_spec.get("priorityClassName")
    if pc_name:
        pc = u.get(cluster, "scheduling.k8s.io/v1", "PriorityClass", None, pc_name)
        if pc is not None:
            return int(pc.get("value") or 0), {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                               "name": pc_name}
    return 0, None


# ------------------------------------------------------------------------------------------ workload helpers


def _has_reservation(wl: dict[str, Any]) -> bool:
    return bool((wl.get("status") or {}).get("admission")) and u.condition_true(wl, "QuotaReserved")


def _is_finished(wl: dict[str, Any]) -> bool:
    return u.condition_true(wl, "Finished")


def _is_active(wl: dict[str, Any]) -> bool:
    return (wl.get("spec") or {}).get("active", True) is not False


def _queued_at(wl: dict[str, Any]) -> str:
    cond = u.find_condition(wl, "Requeued") or u.find_condition(wl, "Evicted")
    if cond and cond.get("status") == "True":
        return cond.get("lastTransitionTime") or ""
    return wl["metadata"].get("creationTimestamp") or ""


def _podset_requests(podset: dict[str, Any]) -> dict[str, int]:
    count = int(podset.get("count", 1))
    per_pod = u.pod_requests(_pod_spec_of(copy.deepcopy(podset.get("template") or {})))
    return {res: amount * count for res, amount in per_pod.items() if amount}


def _owner(cluster: Any, wl: dict[str, Any]) -> tuple[Integration | None, dict[str, Any] | None]:
    ref = u.controller_of(wl)
    if ref is None:
        return None, None
    integ = _BY_KIND.get(ref.get("kind", ""))
    if integ is None:
        return None, None
    obj = u.get(cluster, integ.api_version, integ.kind, wl["metadata"].get("namespace"), ref["name"])
    if obj is None or obj["metadata"].get("uid") != ref.get("uid"):
        return integ, None
    return integ, obj


# ------------------------------------------------------------------------------------------ public API


def evict(cluster: Any, namespace: str, workload: str, *, reason: str = "Preempted", message: str | None = None,
          requeue: bool = True) -> dict[str, Any]:
    """Evict an admitted Workload now (as Kueue does on preemption, a stop policy or a deactivation).

    The job is suspended and its pods deleted on the next reconcile; with ``requeue=False`` the Workload is
    also deactivated (``spec.active: false``) so it stays out of the queue.
    """
    wl = u.get(cluster, API, "Workload", namespace, workload)
    if wl is None:
        raise LookupError(f"workload {namespace}/{workload} not found")
    message = message or (PREEMPTED_MESSAGE if reason == "Preempted" else f"Evicted: {reason}")
    if not requeue:
        wl["spec"]["active"] = False
        wl = cluster.store.update(wl)
    _mark_evicted(cluster, wl, reason, message)
    return u.get(cluster, API, "Workload", namespace, workload) or wl


def preempt(cluster: Any, namespace: str, workload: str, *, reason: str = "Preempted",
            message: str = PREEMPTED_MESSAGE, preemption_reason: str = "InClusterQueue",
            requeue: bool = True) -> dict[str, Any]:
    """Preempt an admitted Workload: ``Evicted`` (reason ``Preempted``) plus ``Preempted`` conditions and a
    ``Preempted`` event; the job is suspended and its pods deleted on the next reconcile."""
    wl = u.get(cluster, API, "Workload", namespace, workload)
    if wl is None:
        raise LookupError(f"workload {namespace}/{workload} not found")
    if not requeue:
        wl["spec"]["active"] = False
        wl = cluster.store.update(wl)
    _mark_evicted(cluster, wl, reason, message, preemption_reason=preemption_reason)
    return u.get(cluster, API, "Workload", namespace, workload) or wl


def workloads_for(cluster: Any, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The Workloads Kueue made for a job object (by the ``kueue.x-k8s.io/job-uid`` label)."""
    uid = obj["metadata"]["uid"]
    return [w for w in u.list_objects(cluster, API, "Workload", obj["metadata"].get("namespace"))
            if u.labels(w).get(JOB_UID_LABEL) == uid]


def _mark_evicted(cluster: Any, wl: dict[str, Any], reason: str, message: str,
                  preemption_reason: str | None = None) -> bool:
    status = copy.deepcopy(wl.get("status") or {})
    conditions = status.setdefault("conditions", [])
    current = u.now(cluster)
    evicted = u.find_condition({"status": status}, "Evicted")
    if evicted is not None and evicted.get("status") == "True" and evicted.get("reason") == reason:
        return False
    u.set_condition(conditions, "Evicted", "True", reason, message, current)
    if preemption_reason:
        u.set_condition(conditions, "Preempted", "True", preemption_reason, message, current)
    stats = status.setdefault("schedulingStats", {}).setdefault("evictions", [])
    entry = next((e for e in stats if e.get("reason") == reason), None)
    if entry is None:
        stats.append({"reason": reason, "underlyingCause": "", "count": 1})
    else:
        entry["count"] = int(entry.get("count") or 0) + 1
    wl = copy.deepcopy(wl)
    wl["status"] = status
    if u.update_status(cluster, wl) is None:
        return False
    if preemption_reason:
        events.record(cluster, wl, "Preempted", message, component=ADMISSION_COMPONENT)
    events.record(cluster, wl, f"EvictedDueTo{reason}", message, component=WORKLOAD_COMPONENT)
    return True
