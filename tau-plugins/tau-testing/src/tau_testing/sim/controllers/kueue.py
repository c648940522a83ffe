"""A Kueue v0.18 stand-in (``kueue.x-k8s.io/v1beta2`` objects): Workloads, quota, admission and eviction.

What it does, in the order of one reconcile pass:

1. *Job integrations.* A batch/v1 Job, a ray.io RayJob, a standalone (or RayService-owned) RayCluster and a
   bare or Deployment-owned Pod that carry ``kueue.x-k8s.io/queue-name`` get a Workload named as Kueue names
   it (``job-<name>-<hash5>``, owner reference to the job, label ``kueue.x-k8s.io/job-uid``, finalizer
   ``kueue.x-k8s.io/resource-in-use``) with pod sets built from their pod templates (Job: ``main`` with
   ``parallelism`` pods; RayJob: ``head``, one per worker group and ``submitter`` in K8sJobMode). Jobs are
   held suspended (the role of Kueue's webhook); pods get the ``kueue.x-k8s.io/admission`` scheduling gate.
2. *Finished work.* A Workload whose job finished gets ``Finished=True`` and stops counting against quota.
3. *Eviction.* An ``Evicted=True`` Workload (``preempt()``, ``evict()``, automatic preemption or a
   HoldAndDrain stop policy) suspends its job, restores the pod templates, and goes back to the queue with
   ``QuotaReserved=False``, ``Admitted=False``, ``Requeued=True``.
4. *Scheduling.* Per ClusterQueue, pending Workloads in BestEffortFIFO (or StrictFIFO) order (priority, then
   queueing time) try each resource group's flavors in order against ``nominalQuota``; a fit sets
   ``status.admission``, ``QuotaReserved`` and ``Admitted``, injects the flavor's ``nodeLabels`` and
   ``tolerations`` into the job's pod templates and unsuspends it (a gated Pod gets them and loses its gate in
   one update, which the API server allows for gated pods; a queue-labelled pod the webhook did not gate is left
   alone). A miss leaves ``QuotaReserved=False``
   with Kueue's wording (``couldn't assign flavors to pod set main: insufficient unused quota for cpu in
   flavor default-flavor, 2 more needed``). ``preemption.withinClusterQueue: LowerPriority`` preempts.
5. *Status* of ClusterQueues and LocalQueues: pending/reserving/admitted counts, flavorsReservation and
   flavorsUsage, ``Active`` condition.

Not simulated: cohorts and borrowing, fair sharing, admission checks (MultiKueue, provisioning), topology
aware scheduling, waitForPodsReady, partial admission.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any, cast

from tau_testing.sim.controllers import _util as u
from tau_testing.sim.controllers import events
from tau_testing.sim.controllers.pods import kill_pod
from tau_testing.sim.controllers.scheduler import tolerates

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


# ------------------------------------------------------------------------------------------ controller


class KueueController:
    """Kueue's job framework, workload controller and scheduler in one pass; toggle with ``.enabled``.

    ``label_keys_to_copy`` mirrors Kueue's ``labelKeysToCopy`` configuration (job labels copied onto the
    Workload).
    """

    def __init__(self, label_keys_to_copy: list[str] | None = None) -> None:
        self.enabled = True
        self.label_keys_to_copy = list(label_keys_to_copy or [])
        self._sequence: dict[str, int] = {}  # creation order of the Workloads this controller made

    # ---- the mutating webhook --------------------------------------------------------------------------

    def admission_hook(self, operation: str, rtype: Any, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """What Kueue's mutating webhooks do when a job is created: suspend it (or gate the pod), so no pod
        starts before admission whatever order the controllers run in. Register it in
        ``cluster.store.admission_hooks`` (``install_default_controllers`` does)."""
        if operation != "CREATE" or not self.enabled:
            return
        kind = (rtype.group, rtype.kind)
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        if kind == ("apps", "Deployment"):
            queue = labels.get(QUEUE_LABEL)
            template = (obj.get("spec") or {}).get("template")
            if queue and isinstance(template, dict):
                tlabels = template.setdefault("metadata", {}).setdefault("labels", {})
                tlabels.setdefault(QUEUE_LABEL, queue)
            return
        integ = {("batch", "Job"): JOB, ("ray.io", "RayJob"): RAYJOB, ("ray.io", "RayCluster"): RAYCLUSTER,
                 ("", "Pod"): POD}.get(kind)
        if integ is None or not labels.get(QUEUE_LABEL) or not isinstance(obj.get("spec"), dict):
            return
        if not _eligible(integ, obj):
            return
        if integ is POD:
            if obj["spec"].get("nodeName"):
                return
            gates = obj["spec"].setdefault("schedulingGates", [])
            if not any(g.get("name") == ADMISSION_GATE for g in gates if isinstance(g, dict)):
                gates.append({"name": ADMISSION_GATE})
            labels[MANAGED_LABEL] = "true"
            meta["labels"] = labels
        else:
            obj["spec"]["suspend"] = True

    def reconcile(self, cluster: Any) -> bool:
        changed = False
        workloads = u.list_objects(cluster, API, "Workload")
        for step in (self._sync_jobs, self._workload_lifecycle, self._schedule, self._start_admitted,
                     self._queue_status):
            if step(cluster, workloads):
                changed = True
                workloads = u.list_objects(cluster, API, "Workload")
        return changed

    # ---- 1. job integrations ---------------------------------------------------------------------------

    def _sync_jobs(self, cluster: Any, workloads: list[dict[str, Any]]) -> bool:
        changed = False
        existing = {u.key(w): w for w in workloads}
        for integ in INTEGRATIONS:
            objs = u.list_objects(cluster, integ.api_version, integ.kind, label_selector=QUEUE_LABEL)
            objs.sort(key=lambda o: (o["metadata"].get("creationTimestamp") or "", *u.key(o)))
            for obj in objs:
                if not _eligible(integ, obj):
                    continue
                ns, name = u.key(obj)
                wl_name = workload_name(integ.kind, integ.group, name, obj["metadata"]["uid"])
                wl = existing.get((ns, wl_name))
                finished = _finished(integ, obj)
                if wl is None:
                    if finished:
                        continue
                    if integ is POD and not _is_suspended(integ, obj):
                        continue  # not gated by the webhook (or already bound): left alone, as Kueue does
                    changed |= self._hold(cluster, integ, obj)
                    changed |= self._create_workload(cluster, integ, obj, wl_name)
                    continue
                if finished and not _is_finished(wl):
                    changed |= self._finish(cluster, wl, *finished)
                elif not finished and not _has_reservation(wl) and not _is_suspended(integ, obj) \
                        and not _is_finished(wl):
                    changed |= self._hold(cluster, integ, obj)
        return changed

    def _hold(self, cluster: Any, integ: Integration, obj: dict[str, Any]) -> bool:
        """Keep a job without quota from running: suspend it, or gate the pod."""
        if _is_suspended(integ, obj):
            return False
        if integ is POD:
            return False  # the API server lets scheduling gates only be removed after creation
        fresh = copy.deepcopy(obj)
        fresh["spec"]["suspend"] = True
        return u.update(cluster, fresh) is not None

    def _create_workload(self, cluster: Any, integ: Integration, obj: dict[str, Any], wl_name: str) -> bool:
        ns, _name = u.key(obj)
        pod_sets = []
        priority_spec: dict[str, Any] = {}
        for ps_name, count, template in _templates(integ, copy.deepcopy(obj)):
            if integ is POD:
                template = {"metadata": {"labels": dict(u.labels(obj))}, "spec": copy.deepcopy(obj.get("spec"))}
                template["spec"].pop("schedulingGates", None)
                template["spec"].pop("nodeName", None)
            else:
                template = copy.deepcopy(template)
            pod_sets.append({"name": ps_name, "count": count, "template": template})
            if not priority_spec:
                prio, ref = _priority(cluster, obj, template.get("spec") or {})
                priority_spec = {"priority": prio}
                if ref:
                    priority_spec["priorityClassRef"] = ref
        wl_labels = {JOB_UID_LABEL: obj["metadata"]["uid"]}
        for key in self.label_keys_to_copy:
            if key in u.labels(obj):
                wl_labels[key] = u.labels(obj)[key]
        wl = {
            "apiVersion": API,
            "kind": "Workload",
            "metadata": {"name": wl_name, "namespace": ns, "labels": wl_labels, "finalizers": [FINALIZER],
                         "ownerReferences": [u.owner_ref(obj)]},
            "spec": {"queueName": u.labels(obj)[QUEUE_LABEL], "podSets": pod_sets, "active": True,
                     **priority_spec},
        }
        created = u.create(cluster, wl)
        if created is None:
            return False
        self._sequence[created["metadata"]["uid"]] = len(self._sequence)
        events.record(cluster, obj, "CreatedWorkload", f"Created Workload: {ns}/{wl_name}", component=JOB_COMPONENT)
        return True

    def _finish(self, cluster: Any, wl: dict[str, Any], reason: str, message: str) -> bool:
        status = copy.deepcopy(wl.get("status") or {})
        conditions = status.setdefault("conditions", [])
        current = u.now(cluster)
        u.set_condition(conditions, "Finished", "True", reason, message, current)
        if u.find_condition({"status": status}, "Admitted") is not None:
            u.set_condition(conditions, "Admitted", "False", "Finished", "Workload has finished", current)
        return u.write_status_if_changed(cluster, wl, status)

    # ---- 2/3. workload lifecycle: deletion, eviction, requeue ---------------------------------------------

    def _workload_lifecycle(self, cluster: Any, workloads: list[dict[str, Any]]) -> bool:
        changed = False
        queues = {u.key(q): q for q in u.list_objects(cluster, API, "LocalQueue")}
        cqs = {q["metadata"]["name"]: q for q in u.list_objects(cluster, API, "ClusterQueue")}
        for wl in workloads:
            meta = wl["metadata"]
            if meta.get("deletionTimestamp"):
                if FINALIZER in (meta.get("finalizers") or []):
                    fresh = copy.deepcopy(wl)
                    fresh["metadata"]["finalizers"] = [f for f in meta["finalizers"] if f != FINALIZER]
                    changed |= u.update(cluster, fresh) is not None
                continue
            if _is_finished(wl):
                continue
            integ, owner = _owner(cluster, wl)
            if _has_reservation(wl) and not u.condition_true(wl, "Evicted"):
                if not _is_active(wl):
                    changed |= _mark_evicted(cluster, wl, "Deactivated", "The workload is deactivated")
                    continue
                lq = queues.get((meta["namespace"], wl["spec"].get("queueName", "")))
                cq_name = wl["status"]["admission"].get("clusterQueue")
                cq = cqs.get(cq_name)
                if lq is not None and (lq.get("spec") or {}).get("stopPolicy") == "HoldAndDrain":
                    changed |= _mark_evicted(cluster, wl, "LocalQueueStopped", "The LocalQueue is stopped")
                elif cq is not None and (cq.get("spec") or {}).get("stopPolicy") == "HoldAndDrain":
                    changed |= _mark_evicted(cluster, wl, "ClusterQueueStopped", "The ClusterQueue is stopped")
                continue
            if _has_reservation(wl) and u.condition_true(wl, "Evicted"):
                changed |= self._stop_and_requeue(cluster, wl, integ, owner)
        return changed

    def _stop_and_requeue(self, cluster: Any, wl: dict[str, Any], integ: Integration | None,
                          owner: dict[str, Any] | None) -> bool:
        evicted = u.find_condition(wl, "Evicted") or {}
        message = evicted.get("message", "")
        if integ is not None and owner is not None:
            if integ is POD:
                events.record(cluster, owner, "Stopped", message, component=JOB_COMPONENT)
                kill_pod(cluster, owner)
            elif not (owner.get("spec") or {}).get("suspend"):
                fresh = copy.deepcopy(owner)
                fresh["spec"]["suspend"] = True
                if u.update(cluster, fresh) is not None:
                    events.record(cluster, owner, "Stopped", message, component=JOB_COMPONENT)
                return True
            elif integ is JOB and (owner.get("status") or {}).get("startTime"):
                return False  # wait for the Job controller to stop the pods
            else:
                self._restore_templates(cluster, wl, integ, owner)
        status = copy.deepcopy(wl.get("status") or {})
        conditions = status.setdefault("conditions", [])
        current = u.now(cluster)
        status.pop("admission", None)
        requeue = _is_active(wl)
        u.set_condition(conditions, "QuotaReserved", "False", "Pending" if requeue else "Inactive", message, current)
        u.set_condition(conditions, "Admitted", "False", "NoReservation", "The workload has no reservation",
                        current)
        if requeue:
            u.set_condition(conditions, "Requeued", "True", evicted.get("reason", "Evicted"), message, current)
        else:
            u.set_condition(conditions, "Requeued", "False", "Deactivated", "The workload is deactivated",
                            current)
        return u.write_status_if_changed(cluster, wl, status)

    def _restore_templates(self, cluster: Any, wl: dict[str, Any], integ: Integration,
                           owner: dict[str, Any]) -> bool:
        fresh = copy.deepcopy(owner)
        originals = {ps["name"]: ps.get("template") or {} for ps in wl["spec"].get("podSets") or []}
        for ps_name, _count, template in _templates(integ, fresh):
            original = _pod_spec_of(copy.deepcopy(originals.get(ps_name, {})))
            spec = _pod_spec_of(template)
            for field in ("nodeSelector", "tolerations"):
                if field in original:
                    spec[field] = copy.deepcopy(original[field])
                else:
                    spec.pop(field, None)
        if fresh == owner:
            return False
        return u.update(cluster, fresh) is not None

    # ---- 4. scheduling -------------------------------------------------------------------------------------

    def _schedule(self, cluster: Any, workloads: list[dict[str, Any]]) -> bool:
        changed = False
        flavors = {f["metadata"]["name"]: f for f in u.list_objects(cluster, API, "ResourceFlavor")}
        cqs = {q["metadata"]["name"]: q for q in u.list_objects(cluster, API, "ClusterQueue")}
        lqs = {u.key(q): q for q in u.list_objects(cluster, API, "LocalQueue")}
        namespaces = {n["metadata"]["name"]: n for n in u.list_objects(cluster, "v1", "Namespace")}
        usage: dict[str, dict[tuple[str, str], int]] = {name: {} for name in cqs}
        admitted: dict[str, list[dict[str, Any]]] = {name: [] for name in cqs}
        for wl in workloads:
            if _has_reservation(wl) and not _is_finished(wl):
                cq_name = wl["status"]["admission"].get("clusterQueue")
                _add_usage(usage.setdefault(cq_name, {}), wl, +1)
                admitted.setdefault(cq_name, []).append(wl)
        heads: dict[str, list[dict[str, Any]]] = {}
        for wl in workloads:
            if _has_reservation(wl) or _is_finished(wl) or u.is_deleting(wl):
                continue
            if not _is_active(wl):
                continue
            ns = wl["metadata"]["namespace"]
            lq_name = wl["spec"].get("queueName", "")
            lq = lqs.get((ns, lq_name))
            if lq is None:
                changed |= self._set_pending(cluster, wl, "Inadmissible",
                                             f"LocalQueue {lq_name} is terminating or missing")
                continue
            if (lq.get("spec") or {}).get("stopPolicy", "None") not in (None, "None"):
                changed |= self._set_pending(cluster, wl, "Inadmissible", f"LocalQueue {lq_name} is stopped")
                continue
            cq_name = (lq.get("spec") or {}).get("clusterQueue", "")
            cq = cqs.get(cq_name)
            if cq is None:
                changed |= self._set_pending(cluster, wl, "Inadmissible",
                                             f"ClusterQueue {cq_name} is terminating or missing")
                continue
            if (cq.get("spec") or {}).get("stopPolicy", "None") not in (None, "None"):
                changed |= self._set_pending(cluster, wl, "Inadmissible", f"ClusterQueue {cq_name} is stopped")
                continue
            ns_labels = u.labels(namespaces.get(ns, {"metadata": {}}))
            if not u.selector_matches((cq.get("spec") or {}).get("namespaceSelector"), ns_labels,
                                      nil_matches=False):
                changed |= self._set_pending(cluster, wl, "Inadmissible",
                                             "Workload namespace doesn't match ClusterQueue selector")
                continue
            missing = [f["name"] for rg in (cq.get("spec") or {}).get("resourceGroups") or []
                       for f in rg.get("flavors") or [] if f.get("name") not in flavors]
            if missing:
                changed |= self._set_pending(cluster, wl, "Inadmissible",
                                             f"ClusterQueue {cq_name} is inactive")
                continue
            heads.setdefault(cq_name, []).append(wl)

        for cq_name in sorted(heads):
            cq = cqs[cq_name]
            strict = (cq.get("spec") or {}).get("queueingStrategy") == "StrictFIFO"
            ordered = sorted(heads[cq_name], key=lambda w: (-int((w.get("spec") or {}).get("priority") or 0),
                                                            _queued_at(w),
                                                            self._sequence.get(w["metadata"]["uid"], 1 << 62),
                                                            *u.key(w)))
            cq_usage = usage.setdefault(cq_name, {})
            blocked = False
            for wl in ordered:
                assignment, message = _assign(cq, flavors, wl, cq_usage)
                if assignment is not None and not blocked:
                    if self._admit(cluster, wl, cq_name, assignment):
                        changed = True
                        admitted_wl = {"status": {"admission": {"clusterQueue": cq_name,
                                                                "podSetAssignments": assignment}}}
                        _add_usage(cq_usage, admitted_wl, +1)
                    continue
                if assignment is None:
                    victims = self._preemption_victims(cq, flavors, wl, cq_usage, admitted.get(cq_name, []))
                    if victims:
                        for victim in victims:
                            victim_msg = (f"Preempted to accommodate a workload (UID: {wl['metadata']['uid']}, "
                                          f"JobUID: {u.labels(wl).get(JOB_UID_LABEL, '')}) due to prioritization "
                                          f"in the ClusterQueue")
                            changed |= _mark_evicted(cluster, victim, "Preempted", victim_msg,
                                                     preemption_reason="InClusterQueue")
                            admitted[cq_name] = [a for a in admitted[cq_name] if u.key(a) != u.key(victim)]
                        message = f"{message}. Pending the preemption of {len(victims)} workload(s)"
                else:
                    message = "Workload no longer fits after processing another workload"
                changed |= self._set_pending(cluster, wl, "Pending", message)
                if strict:
                    blocked = True
        return changed

    def _preemption_victims(self, cq: dict[str, Any], flavors: dict[str, Any], wl: dict[str, Any],
                            usage: dict[tuple[str, str], int], admitted: list[dict[str, Any]]) -> list[dict[str, Any]]:
        policy = (((cq.get("spec") or {}).get("preemption") or {}).get("withinClusterQueue")) or "Never"
        if policy == "Never":
            return []
        priority = int((wl.get("spec") or {}).get("priority") or 0)
        candidates = []
        for other in admitted:
            if u.condition_true(other, "Evicted"):
                continue
            other_prio = int((other.get("spec") or {}).get("priority") or 0)
            if other_prio < priority or (policy == "LowerOrNewerEqualPriority" and other_prio == priority
                                         and _queued_at(other) > _queued_at(wl)):
                candidates.append(other)
        candidates.sort(key=lambda w: (int((w.get("spec") or {}).get("priority") or 0),
                                       _reserved_at(w)), reverse=False)
        candidates.sort(key=lambda w: int((w.get("spec") or {}).get("priority") or 0))
        trial = dict(usage)
        chosen: list[dict[str, Any]] = []
        for victim in candidates:
            _add_usage(trial, victim, -1)
            chosen.append(victim)
            assignment, _ = _assign(cq, flavors, wl, trial)
            if assignment is not None:
                return chosen
        return []

    def _set_pending(self, cluster: Any, wl: dict[str, Any], reason: str, message: str) -> bool:
        cond = u.find_condition(wl, "QuotaReserved")
        if cond and cond.get("status") == "False" and cond.get("reason") == reason and cond.get("message") == message:
            return False
        status = copy.deepcopy(wl.get("status") or {})
        u.set_condition(status.setdefault("conditions", []), "QuotaReserved", "False", reason, message,
                        u.now(cluster))
        status["resourceRequests"] = [
            {"name": ps.get("name", "main"),
             "resources": {res: u.format_quantity(res, amount)
                           for res, amount in sorted(_podset_requests(ps).items())}}
            for ps in (wl.get("spec") or {}).get("podSets") or []]
        if not u.write_status_if_changed(cluster, wl, status):
            return False
        events.record(cluster, wl, "Pending", message, component=ADMISSION_COMPONENT)
        return True

    def _admit(self, cluster: Any, wl: dict[str, Any], cq_name: str, assignment: list[dict[str, Any]]) -> bool:
        status = copy.deepcopy(wl.get("status") or {})
        conditions = status.setdefault("conditions", [])
        current = u.now(cluster)
        status["admission"] = {"clusterQueue": cq_name, "podSetAssignments": assignment}
        u.set_condition(conditions, "QuotaReserved", "True", "QuotaReserved",
                        f"Quota reserved in ClusterQueue {cq_name}", current)
        u.set_condition(conditions, "Admitted", "True", "Admitted", "The workload is admitted", current)
        for ctype in ("Evicted", "Preempted"):
            cond = u.find_condition({"status": status}, ctype)
            if cond and cond.get("status") == "True":
                u.set_condition(conditions, ctype, "False", "QuotaReserved", f"Previously: {cond.get('message')}",
                                current)
        requeued = u.find_condition({"status": status}, "Requeued")
        if requeued is not None:
            u.remove_condition(conditions, "Requeued")
        if not u.write_status_if_changed(cluster, wl, status):
            return False
        waited = max(0, round(u.seconds_between(u.parse_ts(_queued_at(wl)) or current, current)))
        events.record(cluster, wl, "QuotaReserved",
                      f"Quota reserved in ClusterQueue {cq_name}, wait time since queued was {waited}s",
                      component=ADMISSION_COMPONENT)
        events.record(cluster, wl, "Admitted",
                      f"Admitted by ClusterQueue {cq_name}, wait time since reservation was 0s",
                      component=ADMISSION_COMPONENT)
        return True

    # ---- start admitted jobs --------------------------------------------------------------------------------

    def _start_admitted(self, cluster: Any, workloads: list[dict[str, Any]]) -> bool:
        changed = False
        flavors = {f["metadata"]["name"]: f for f in u.list_objects(cluster, API, "ResourceFlavor")}
        for wl in workloads:
            if not _has_reservation(wl) or not u.condition_true(wl, "Admitted") or _is_finished(wl) \
                    or u.condition_true(wl, "Evicted") or u.is_deleting(wl):
                continue
            integ, owner = _owner(cluster, wl)
            if integ is None or owner is None or not _is_suspended(integ, owner):
                continue
            changed |= self._unsuspend(cluster, wl, integ, owner, flavors)
        return changed

    def _unsuspend(self, cluster: Any, wl: dict[str, Any], integ: Integration, owner: dict[str, Any],
                   flavors: dict[str, Any]) -> bool:
        fresh = copy.deepcopy(owner)
        assignments = {a["name"]: a for a in wl["status"]["admission"].get("podSetAssignments") or []}
        for ps_name, _count, template in _templates(integ, fresh):
            assignment = assignments.get(ps_name)
            if assignment is None:
                continue
            spec = _pod_spec_of(template)
            for flavor_name in sorted(set((assignment.get("flavors") or {}).values())):
                flavor = (flavors.get(flavor_name) or {}).get("spec") or {}
                if flavor.get("nodeLabels"):
                    selector = spec.setdefault("nodeSelector", {})
                    selector.update(flavor["nodeLabels"])
                for tol in flavor.get("tolerations") or []:
                    tolerations = spec.setdefault("tolerations", [])
                    if tol not in tolerations:
                        tolerations.append(copy.deepcopy(tol))
        if integ is POD:
            fresh["spec"]["schedulingGates"] = [g for g in fresh["spec"].get("schedulingGates") or []
                                                if g.get("name") != ADMISSION_GATE]
            if not fresh["spec"]["schedulingGates"]:
                del fresh["spec"]["schedulingGates"]
            # one update: the API server lets a still-gated pod gain node selector entries and tolerations
            stored = u.update(cluster, fresh)
        else:
            fresh["spec"]["suspend"] = False
            stored = u.update(cluster, fresh)
        if stored is None:
            return False
        cq = wl["status"]["admission"].get("clusterQueue")
        events.record(cluster, owner, "Started", f"Admitted by clusterQueue {cq}", component=JOB_COMPONENT)
        return True

    # ---- 5. queue status ------------------------------------------------------------------------------------

    def _queue_status(self, cluster: Any, workloads: list[dict[str, Any]]) -> bool:
        changed = False
        cqs = u.list_objects(cluster, API, "ClusterQueue")
        lqs = u.list_objects(cluster, API, "LocalQueue")
        flavors = {f["metadata"]["name"] for f in u.list_objects(cluster, API, "ResourceFlavor")}
        lq_to_cq = {u.key(q): (q.get("spec") or {}).get("clusterQueue", "") for q in lqs}
        per_cq: dict[str, dict[str, list[dict[str, Any]]]] = {}
        per_lq: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
        for wl in workloads:
            if _is_finished(wl) or u.is_deleting(wl):
                continue
            lq_key = (wl["metadata"]["namespace"], wl["spec"].get("queueName", ""))
            if _has_reservation(wl):
                cq_name = wl["status"]["admission"]["clusterQueue"]
                state = "admitted" if u.condition_true(wl, "Admitted") else "reserving"
            elif _is_active(wl):
                cq_name = lq_to_cq.get(lq_key, "")
                state = "pending"
            else:
                continue
            per_cq.setdefault(cq_name, {}).setdefault(state, []).append(wl)
            per_lq.setdefault(lq_key, {}).setdefault(state, []).append(wl)
        current = u.now(cluster)
        cq_names = set()
        for cq in cqs:
            name = cq["metadata"]["name"]
            cq_names.add(name)
            buckets = per_cq.get(name, {})
            status = copy.deepcopy(cq.get("status") or {})
            reserving = buckets.get("admitted", []) + buckets.get("reserving", [])
            status["pendingWorkloads"] = len(buckets.get("pending", []))
            status["reservingWorkloads"] = len(reserving)
            status["admittedWorkloads"] = len(buckets.get("admitted", []))
            status["flavorsReservation"] = _flavor_usage(cq, reserving)
            status["flavorsUsage"] = _flavor_usage(cq, buckets.get("admitted", []))
            missing = sorted({f.get("name") for rg in (cq.get("spec") or {}).get("resourceGroups") or []
                              for f in rg.get("flavors") or []} - flavors)
            conditions = status.setdefault("conditions", [])
            if (cq.get("spec") or {}).get("stopPolicy", "None") not in (None, "None"):
                u.set_condition(conditions, "Active", "False", "Stopped", "Can't admit new workloads: is stopped",
                                current)
            elif missing:
                u.set_condition(conditions, "Active", "False", "FlavorNotFound",
                                f"Can't admit new workloads: references missing ResourceFlavor(s): {missing}",
                                current)
            else:
                u.set_condition(conditions, "Active", "True", "Ready", "Can admit new workloads", current)
            changed |= u.write_status_if_changed(cluster, cq, status)
        cq_by_name = {q["metadata"]["name"]: q for q in cqs}
        for lq in lqs:
            key = u.key(lq)
            buckets = per_lq.get(key, {})
            status = copy.deepcopy(lq.get("status") or {})
            reserving = buckets.get("admitted", []) + buckets.get("reserving", [])
            status["pendingWorkloads"] = len(buckets.get("pending", []))
            status["reservingWorkloads"] = len(reserving)
            status["admittedWorkloads"] = len(buckets.get("admitted", []))
            target = cq_by_name.get(lq_to_cq.get(key, ""))
            status["flavorsReservation"] = _flavor_usage(target, reserving, borrowed=False) if target else []
            status["flavorsUsage"] = (_flavor_usage(target, buckets.get("admitted", []), borrowed=False)
                                      if target else [])
            conditions = status.setdefault("conditions", [])
            if (lq.get("spec") or {}).get("stopPolicy", "None") not in (None, "None"):
                u.set_condition(conditions, "Active", "False", "Stopped", "LocalQueue is stopped", current)
            elif target is None:
                u.set_condition(conditions, "Active", "False", "ClusterQueueDoesNotExist",
                                "Can't submit new workloads to clusterQueue", current)
            else:
                u.set_condition(conditions, "Active", "True", "Ready", "Can submit new workloads to localQueue",
                                current)
            changed |= u.write_status_if_changed(cluster, lq, status)
        return changed


# ------------------------------------------------------------------------------------------ quota math


def _reserved_at(wl: dict[str, Any]) -> str:
    cond = u.find_condition(wl, "QuotaReserved") or {}
    return cond.get("lastTransitionTime") or ""


def _add_usage(usage: dict[tuple[str, str], int], wl: dict[str, Any], sign: int) -> None:
    for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
        for res, flavor in (psa.get("flavors") or {}).items():
            amount = u.milli((psa.get("resourceUsage") or {}).get(res, 0))
            usage[(flavor, res)] = usage.get((flavor, res), 0) + sign * amount


def _flavor_usage(cq: dict[str, Any], workloads: list[dict[str, Any]], *,
                  borrowed: bool = True) -> list[dict[str, Any]]:
    usage: dict[tuple[str, str], int] = {}
    for wl in workloads:
        _add_usage(usage, wl, +1)
    out = []
    for rg in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in rg.get("flavors") or []:
            resources = []
            for res in flavor.get("resources") or []:
                total = usage.get((flavor["name"], res["name"]), 0)
                entry = {"name": res["name"], "total": u.format_quantity(res["name"], total)}
                if borrowed:  # ClusterQueues report borrowing; LocalQueues have no such field
                    entry["borrowed"] = "0"
                resources.append(entry)
            out.append({"name": flavor["name"], "resources": resources})
    return out


def _flavor_mismatch(flavor_name: str, flavor: dict[str, Any], pod_spec: dict[str, Any]) -> str | None:
    spec = flavor.get("spec") or {}
    tolerations = list(pod_spec.get("tolerations") or []) + list(spec.get("tolerations") or [])
    for taint in spec.get("nodeTaints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            # Go's %v of a corev1.Taint value
            return (f"untolerated taint {{{taint.get('key')} {taint.get('value') or ''} {taint.get('effect')} "
                    f"<nil>}} in flavor {flavor_name}")
    node_labels = spec.get("nodeLabels") or {}
    selector = pod_spec.get("nodeSelector") or {}
    for k, v in node_labels.items():
        if k in selector and selector[k] != v:
            return f"flavor {flavor_name} doesn't match node affinity"
    required = ((((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution")) or {})
    terms = required.get("nodeSelectorTerms") or []
    if terms and node_labels:
        def term_ok(term: dict[str, Any]) -> bool:
            for expr in term.get("matchExpressions") or []:
                k = expr.get("key")
                if k not in node_labels:
                    continue
                op, values = expr.get("operator"), expr.get("values") or []
                if (op == "In" and node_labels[k] not in values) or (op == "NotIn" and node_labels[k] in values) \
                        or op == "DoesNotExist":
                    return False
            return True

        if not any(term_ok(t) for t in terms):
            return f"flavor {flavor_name} doesn't match node affinity"
    return None


def _assign(cq: dict[str, Any], flavors: dict[str, Any], wl: dict[str, Any],
            usage: dict[tuple[str, str], int]) -> tuple[list[dict[str, Any]] | None, str]:
    """Flavor assignment for every pod set, or ``None`` and Kueue's reason."""
    groups = (cq.get("spec") or {}).get("resourceGroups") or []
    covers = {}
    for index, rg in enumerate(groups):
        for res in rg.get("coveredResources") or []:
            covers[res] = index
    assumed = dict(usage)
    assignments = []
    for podset in (wl.get("spec") or {}).get("podSets") or []:
        ps_name = podset.get("name", "main")
        count = int(podset.get("count", 1))
        requests = _podset_requests(podset)
        if "pods" in covers:
            requests["pods"] = count * 1000
        pod_spec = ((podset.get("template") or {}).get("spec")) or {}
        reasons: list[str] = []
        chosen: dict[str, str] = {}
        for res in sorted(requests):
            if res not in covers:
                return None, f"couldn't assign flavors to pod set {ps_name}: resource {res} unavailable in " \
                             f"ClusterQueue"
        by_group: dict[int, list[str]] = {}
        for res in sorted(requests):
            by_group.setdefault(covers[res], []).append(res)
        for index in sorted(by_group):
            wanted = by_group[index]
            found = None
            for flavor in groups[index].get("flavors") or []:
                fname = flavor.get("name")
                fobj = flavors.get(fname)
                if fobj is None:
                    reasons.append(f"flavor {fname} not found")
                    continue
                mismatch = _flavor_mismatch(fname, fobj, pod_spec)
                if mismatch:
                    reasons.append(mismatch)
                    continue
                quotas = {r["name"]: u.milli(r.get("nominalQuota", 0)) for r in flavor.get("resources") or []}
                fits = True
                for res in wanted:
                    need = requests[res]
                    quota = quotas.get(res, 0)
                    in_use = assumed.get((fname, res), 0)
                    earlier = assumed.get((fname, res), 0) - usage.get((fname, res), 0)  # this workload's
                    if earlier + need > quota:
                        cap = u.format_quantity(res, quota)
                        if earlier:
                            reasons.append(
                                f"insufficient quota for {res} in flavor {fname}, previously considered podsets "
                                f"requests ({u.format_quantity(res, earlier)}) + current podset request "
                                f"({u.format_quantity(res, need)}) > maximum capacity ({cap})")
                        else:
                            reasons.append(f"insufficient quota for {res} in flavor {fname}, request > maximum "
                                           f"capacity ({u.format_quantity(res, need)} > {cap})")
                        fits = False
                    elif in_use + need > quota:
                        more = in_use + need - quota
                        reasons.append(f"insufficient unused quota for {res} in flavor {fname}, "
                                       f"{u.format_quantity(res, more)} more needed")
                        fits = False
                if fits:
                    found = fname
                    break
            if found is None:
                return None, f"couldn't assign flavors to pod set {ps_name}: {', '.join(reasons)}"
            for res in wanted:
                chosen[res] = found
        for res, fname in chosen.items():
            assumed[(fname, res)] = assumed.get((fname, res), 0) + requests[res]
        assignments.append({
            "name": ps_name,
            "flavors": dict(sorted(chosen.items())),
            "resourceUsage": {res: u.format_quantity(res, amount) for res, amount in sorted(requests.items())},
            "count": count,
        })
    return assignments, ""
