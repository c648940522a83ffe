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
from typing import Any

from tau_testing.sim.controllers import _util as u
from tau_testing.sim.controllers import events
from tau_testing.sim.controllers.kueue_model import (
    ADMISSION_COMPONENT,
    ADMISSION_GATE,
    API,
    FINALIZER,
    INTEGRATIONS,
    JOB,
    JOB_COMPONENT,
    JOB_UID_LABEL,
    MANAGED_LABEL,
    POD,
    PREEMPTED_MESSAGE,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    RAYCLUSTER,
    RAYJOB,
    SUBMITTER_TEMPLATE,
    WORKLOAD_COMPONENT,
    Integration,
    _eligible,
    _finished,
    _has_reservation,
    _is_active,
    _is_finished,
    _is_suspended,
    _mark_evicted,
    _owner,
    _pod_spec_of,
    _podset_requests,
    _priority,
    _queued_at,
    _templates,
    evict,
    preempt,
    workload_name,
    workloads_for,
)
from tau_testing.sim.controllers.kueue_quota import _add_usage, _assign, _flavor_usage, _queue_for, _reserved_at
from tau_testing.sim.controllers.pods import kill_pod

__all__ = ["ADMISSION_COMPONENT", "ADMISSION_GATE", "API", "FINALIZER", "INTEGRATIONS", "JOB", "JOB_COMPONENT",
           "JOB_UID_LABEL", "MANAGED_LABEL", "POD", "PREEMPTED_MESSAGE", "PRIORITY_LABEL", "QUEUE_LABEL",
           "RAYCLUSTER", "RAYJOB", "SUBMITTER_TEMPLATE", "WORKLOAD_COMPONENT", "Integration", "evict",
           "preempt", "workload_name", "workloads_for"]


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
            cq_name, problem = _queue_for(wl, lqs, cqs, namespaces, flavors)
            if problem is not None:
                changed |= self._set_pending(cluster, wl, "Inadmissible", problem)
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
