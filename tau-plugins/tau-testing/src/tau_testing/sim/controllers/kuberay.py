"""A KubeRay v1.6 stand-in: RayCluster pods and head Service, the RayJob lifecycle, RayService serve status.

*RayCluster*: one head pod (``<cluster>-head-<rand>``) and ``replicas × numOfHosts`` worker pods per group
(``<cluster>-<group>-worker-<rand>``) labelled ``ray.io/cluster``, ``ray.io/node-type``, ``ray.io/group``;
a head Service ``<cluster>-head-svc``; ``status.state: ready`` once every pod runs and is ready;
``spec.suspend`` deletes the pods (Kueue's lever for standalone and RayService clusters).

*RayJob*: ``jobDeploymentStatus`` moves ``Suspended`` (queued by Kueue) → ``Initializing`` (RayCluster
``<rayjob>-<rand>`` created, ``status.rayClusterName``) → ``Running`` (cluster ready; ``jobStatus``
PENDING → RUNNING) → ``Complete`` / ``Failed`` (``jobStatus`` SUCCEEDED / FAILED, ``endTime``). Suspending a
running RayJob deletes its cluster and returns it to ``Suspended``. With ``shutdownAfterJobFinishes`` the
RayCluster is deleted ``ttlSecondsAfterFinished`` seconds after the end; ``activeDeadlineSeconds`` fails it
with ``DeadlineExceeded``; a failed driver with attempts left under ``backoffLimit`` goes ``Retrying`` and
starts over on a new RayCluster (``status.failed`` counts the attempts).

The *driver* is not a separate submitter Job: its outcome comes from the script book
(``ScriptBook.add(match, PodScript(...), kind="RayJob")``): ``pull_seconds`` is the time spent in PENDING,
``run_seconds`` the time RUNNING, ``exit_code`` decides SUCCEEDED or FAILED, and ``logs`` are the driver's
lines. They are appended (timestamped) to the head pod's ``ray-driver-log-offload`` container log when the
head pod has that sidecar (as TauGrid renders it), else to the head pod's first container.

*RayService*: a RayCluster ``<service>-raycluster-<rand>`` (carrying the service's queue-name label so Kueue
admits it), the ``<service>-head-svc`` and ``<service>-serve-svc`` Services, and once the cluster is ready
``serviceStatus: Running``, ``Ready=True`` and every application of ``serveConfigV2`` RUNNING with HEALTHY
deployments. Zero-downtime upgrades (pending clusters) are not simulated.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from tau_testing.sim.controllers import _util as u
from tau_testing.sim.controllers import events
from tau_testing.sim.controllers.kuberay_status import (
    DEFAULT_PORTS,
    _desired_resources,
    _group_replicas,
    _head_ports,
    _serve_apps,
    _suspended_status,
)
from tau_testing.sim.controllers.kueue import QUEUE_LABEL
from tau_testing.sim.controllers.pods import kill_pod
from tau_testing.sim.scripts import scripts_of

RAY = "ray.io/v1"
COMPONENT = "kuberay-operator"
DRIVER_LOG_CONTAINER = "ray-driver-log-offload"

__all__ = ["COMPONENT", "DEFAULT_PORTS", "DRIVER_LOG_CONTAINER", "RAY", "KubeRayController"]

class KubeRayController:
    """RayCluster, RayJob and RayService reconcilers; toggle with ``.enabled``."""

    def __init__(self) -> None:
        self.enabled = True
        self._made: dict[str, int] = {}  # pods made per owner: fresh names even after deletions
        self._driver_start: dict[str, datetime] = {}
        self._driver_lines: dict[str, int] = {}

    def next_wakeup(self, cluster: Any) -> datetime | None:
        """The next driver transition, driver log line, cluster TTL or deadline of any RayJob."""
        current = u.now(cluster)
        upcoming: list[datetime] = []
        book = scripts_of(cluster)
        for rayjob in u.list_objects(cluster, RAY, "RayJob"):
            spec, status = rayjob.get("spec") or {}, rayjob.get("status") or {}
            deployment = status.get("jobDeploymentStatus")
            if deployment in ("Complete", "Failed"):
                end = u.parse_ts(status.get("endTime"))
                if spec.get("shutdownAfterJobFinishes") and end is not None:
                    upcoming.append(u.plus(end, float(spec.get("ttlSecondsAfterFinished") or 0)))
                continue
            started = u.parse_ts(status.get("startTime"))
            if spec.get("activeDeadlineSeconds") is not None and started is not None:
                upcoming.append(u.plus(started, float(spec["activeDeadlineSeconds"])))
            submit = self._driver_start.get(rayjob["metadata"]["uid"])
            if deployment == "Running" and submit is not None:
                script = book.for_rayjob(rayjob)
                run_start = u.plus(submit, script.pull_seconds)
                upcoming.append(run_start)
                if script.run_seconds is not None:
                    run_end = u.plus(run_start, script.run_seconds)
                    upcoming.append(run_end)
                    lines = script.log_lines(rayjob, DRIVER_LOG_CONTAINER, DRIVER_LOG_CONTAINER)
                    step = script.log_every or (script.run_seconds / len(lines) if lines else 0)
                    upcoming.extend(min(u.plus(run_start, i * step), run_end) for i in range(len(lines)))
                elif script.log_every:
                    lines = script.log_lines(rayjob, DRIVER_LOG_CONTAINER, DRIVER_LOG_CONTAINER)
                    upcoming.extend(u.plus(run_start, i * script.log_every) for i in range(len(lines)))
        later = [t for t in upcoming if t > current]
        return min(later) if later else None

    def reconcile(self, cluster: Any) -> bool:
        changed = False
        for rayjob in u.list_objects(cluster, RAY, "RayJob"):
            if not u.is_deleting(rayjob):
                changed |= self._sync_rayjob(cluster, rayjob)
        for service in u.list_objects(cluster, RAY, "RayService"):
            if not u.is_deleting(service):
                changed |= self._sync_rayservice(cluster, service)
        pods_by_owner: dict[str, list[dict[str, Any]]] = {}
        for pod in u.list_objects(cluster, "v1", "Pod", label_selector="ray.io/cluster"):
            ref = u.controller_of(pod)
            if ref and ref.get("kind") == "RayCluster":
                pods_by_owner.setdefault(ref["uid"], []).append(pod)
        for rc in u.list_objects(cluster, RAY, "RayCluster"):
            if not u.is_deleting(rc):
                changed |= self._sync_raycluster(cluster, rc, pods_by_owner.get(rc["metadata"]["uid"], []))
        return changed

    # ------------------------------------------------------------------------------------------ RayCluster

    def _sync_raycluster(self, cluster: Any, rc: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
        spec = rc.get("spec") or {}
        ns, name = u.key(rc)
        current = u.now(cluster)
        changed = False
        live = [p for p in pods if not u.is_deleting(p)]
        status = copy.deepcopy(rc.get("status") or {})
        conditions = status.setdefault("conditions", [])
        if spec.get("suspend"):
            for pod in live:
                changed |= kill_pod(cluster, pod)
            _suspended_status(status, current)
            return self._write_rc_status(cluster, rc, status, current) | changed
        u.remove_condition(conditions, "RayClusterSuspended")

        changed |= self._ensure_head_service(cluster, rc)
        head_template = (spec.get("headGroupSpec") or {}).get("template") or {}
        heads = [p for p in live if u.labels(p).get("ray.io/node-type") == "head"]
        for pod in heads:
            if u.pod_is_terminal(pod):
                changed |= kill_pod(cluster, pod)
        heads = [p for p in heads if not u.pod_is_terminal(p)]
        taken = {p["metadata"]["name"] for p in pods}
        if not heads:
            self._create_ray_pod(cluster, rc, head_template, "head", "headgroup", f"{name}-head", taken)
            changed = True
        workers_ready = 0
        desired_workers = 0
        min_workers = max_workers = 0
        for group in spec.get("workerGroupSpecs") or []:
            want = 0 if group.get("suspend") else _group_replicas(group)
            desired_workers += want
            min_workers += int(group.get("minReplicas", 0) or 0) * int(group.get("numOfHosts", 1) or 1)
            max_workers += int(group.get("maxReplicas", want) or want) * int(group.get("numOfHosts", 1) or 1)
            group_changed, ready = self._sync_worker_group(cluster, rc, group, want, live, taken)
            changed |= group_changed
            workers_ready += ready

        head = heads[0] if heads else None
        head_ready = head is not None and u.pod_is_ready(head)
        svc = u.get(cluster, "v1", "Service", ns, f"{name}-head-svc")
        if head is not None:
            status["head"] = {"podName": head["metadata"]["name"],
                              "podIP": (head.get("status") or {}).get("podIP", ""),
                              "serviceName": f"{name}-head-svc",
                              "serviceIP": ((svc or {}).get("spec") or {}).get("clusterIP", "")}
        status["endpoints"] = {k: str(v) for k, v in sorted(_head_ports(head_template).items())}
        status["desiredWorkerReplicas"] = desired_workers
        status["minWorkerReplicas"] = min_workers
        status["maxWorkerReplicas"] = max_workers
        status["readyWorkerReplicas"] = workers_ready
        status["availableWorkerReplicas"] = workers_ready
        _desired_resources(status, spec, head_template)
        if head_ready:
            u.set_condition(conditions, "HeadPodReady", "True", "HeadPodRunningAndReady", "", current)
        else:
            u.set_condition(conditions, "HeadPodReady", "False", "HeadPodNotFound" if head is None else
                            "HeadPodNotReady", "Head Pod not found" if head is None else "Head Pod is not ready",
                            current)
        all_ready = head_ready and workers_ready >= desired_workers
        provisioned = u.find_condition({"status": status}, "RayClusterProvisioned")
        if all_ready:
            if status.get("state") != "ready":
                status["state"] = "ready"
                status.setdefault("stateTransitionTimes", {})["ready"] = u.ts(current)
            u.set_condition(conditions, "RayClusterProvisioned", "True", "AllPodRunningAndReadyFirstTime",
                            "All Ray Pods are ready for the first time", current)
        elif not (provisioned and provisioned.get("status") == "True"):
            u.set_condition(conditions, "RayClusterProvisioned", "False", "RayClusterPodsProvisioning",
                            "RayCluster Pods are being provisioned for first time", current)
            if status.get("state") == "suspended":
                status.pop("state")
        status["observedGeneration"] = rc["metadata"].get("generation", 1)
        return self._write_rc_status(cluster, rc, status, current) | changed

    def _sync_worker_group(self, cluster: Any, rc: dict[str, Any], group: dict[str, Any], want: int,
                           live: list[dict[str, Any]], taken: set[str]) -> tuple[bool, int]:
        """Bring one worker group to ``want`` running pods: (changed, how many of them are ready)."""
        changed = False
        name = rc["metadata"]["name"]
        gname = group.get("groupName", "workers")
        mine = [p for p in live if u.labels(p).get("ray.io/node-type") == "worker"
                and u.labels(p).get("ray.io/group") == gname]
        for pod in mine:
            if u.pod_is_terminal(pod):
                changed |= kill_pod(cluster, pod)
        running = [p for p in mine if not u.pod_is_terminal(p)]
        for pod in sorted(running, key=lambda p: p["metadata"].get("creationTimestamp") or "")[want:]:
            changed |= kill_pod(cluster, pod)
        running = running[:want]
        for _ in range(want - len(running)):
            self._create_ray_pod(cluster, rc, group.get("template") or {}, "worker", gname,
                                 f"{name}-{gname}-worker", taken)
            changed = True
        return changed, sum(1 for p in running if u.pod_is_ready(p))

    def _write_rc_status(self, cluster: Any, rc: dict[str, Any], status: dict[str, Any], current: datetime) -> bool:
        old = copy.deepcopy(rc.get("status") or {})
        old.pop("lastUpdateTime", None)
        new = copy.deepcopy(status)
        new.pop("lastUpdateTime", None)
        if old == new:
            return False
        status["lastUpdateTime"] = u.ts(current)
        return u.write_status_if_changed(cluster, rc, status)

    def _ensure_head_service(self, cluster: Any, rc: dict[str, Any], name: str | None = None,
                             selector_extra: dict[str, str] | None = None, ports: dict[str, int] | None = None,
                             owner: dict[str, Any] | None = None) -> bool:
        ns, rc_name = u.key(rc)
        svc_name = name or f"{rc_name}-head-svc"
        if u.get(cluster, "v1", "Service", ns, svc_name) is not None:
            return False
        head_template = ((rc.get("spec") or {}).get("headGroupSpec") or {}).get("template") or {}
        selector = {"ray.io/cluster": rc_name, "ray.io/node-type": "head"}
        selector.update(selector_extra or {})
        port_map = ports or _head_ports(head_template)
        svc = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": svc_name, "namespace": ns,
                         "labels": {"ray.io/cluster": rc_name, "ray.io/node-type": "head",
                                    "ray.io/identifier": f"{rc_name}-head", "app.kubernetes.io/name": "kuberay",
                                    "app.kubernetes.io/created-by": "kuberay-operator"},
                         "ownerReferences": [u.owner_ref(owner or rc)]},
            "spec": {"selector": selector, "type": "ClusterIP",
                     "ports": [{"name": k, "port": v, "targetPort": v, "protocol": "TCP"}
                               for k, v in sorted(port_map.items())]},
        }
        return u.create(cluster, svc) is not None

    def _create_ray_pod(self, cluster: Any, rc: dict[str, Any], template: dict[str, Any], node_type: str,
                        group: str, prefix: str, taken: set[str]) -> None:
        ns, rc_name = u.key(rc)
        template = copy.deepcopy(template)
        tmeta = template.get("metadata") or {}
        pod_labels = dict(tmeta.get("labels") or {})
        pod_labels.update({
            "ray.io/cluster": rc_name,
            "ray.io/node-type": node_type,
            "ray.io/group": group,
            "ray.io/identifier": f"{rc_name}-{node_type}",
            "ray.io/is-ray-node": "yes",
            "app.kubernetes.io/name": "kuberay",
            "app.kubernetes.io/created-by": "kuberay-operator",
        })
        spec = template.get("spec") or {}
        spec.setdefault("restartPolicy", "Always")
        for c in (spec.get("containers") or [])[:1]:
            env = c.setdefault("env", [])
            names = {e.get("name") for e in env}
            if "RAY_CLUSTER_NAME" not in names:
                env.append({"name": "RAY_CLUSTER_NAME",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['ray.io/cluster']"}}})
            if node_type == "worker" and "FQ_RAY_IP" not in names:
                env.append({"name": "FQ_RAY_IP", "value": f"{rc_name}-head-svc.{ns}.svc.cluster.local"})
        n = self._made.get(rc['metadata']['uid'], 0)
        while True:
            pod_name = f"{prefix}-{u.suffix(rc['metadata']['uid'], prefix, n)}"
            if pod_name not in taken:
                break
            n += 1
        taken.add(pod_name)
        self._made[rc['metadata']['uid']] = n + 1
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": pod_name, "namespace": ns, "labels": pod_labels,
                            "annotations": dict(tmeta.get("annotations") or {}),
                            "ownerReferences": [u.owner_ref(rc)]},
               "spec": spec}
        if u.create(cluster, pod) is not None:
            events.record(cluster, rc, "CreatedWorkerPod" if node_type == "worker" else "CreatedHeadPod",
                          f"Created {node_type} Pod {ns}/{pod_name}", component=COMPONENT)

    def _new_cluster(self, cluster: Any, owner: dict[str, Any], name: str, cluster_spec: dict[str, Any],
                     crd: str, extra_labels: dict[str, str] | None = None) -> bool:
        ns = owner["metadata"]["namespace"]
        labels = {"ray.io/originated-from-crd": crd, "ray.io/originated-from-cr-name": owner["metadata"]["name"]}
        labels.update(extra_labels or {})
        rc = {"apiVersion": RAY, "kind": "RayCluster",
              "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [u.owner_ref(owner)]},
              "spec": copy.deepcopy(cluster_spec)}
        if u.create(cluster, rc) is None:
            return False
        events.record(cluster, owner, "CreatedRayCluster", f"Created RayCluster {ns}/{name}", component=COMPONENT)
        return True

    # ------------------------------------------------------------------------------------------ RayJob

    def _sync_rayjob(self, cluster: Any, rayjob: dict[str, Any]) -> bool:
        spec = rayjob.get("spec") or {}
        ns, name = u.key(rayjob)
        uid = rayjob["metadata"]["uid"]
        current = u.now(cluster)
        status = copy.deepcopy(rayjob.get("status") or {})
        deployment = status.get("jobDeploymentStatus") or ""
        changed = False
        rc_name = status.get("rayClusterName") or ""
        rc = u.get(cluster, RAY, "RayCluster", ns, rc_name) if rc_name else None

        if deployment in ("Complete", "Failed"):
            return self._finished_rayjob(cluster, rayjob, status, rc, current)

        if spec.get("suspend"):
            return self._suspend_rayjob(cluster, rayjob, status, rc)

        if deployment == "Retrying":
            return self._retry_rayjob(cluster, rayjob, status, rc)

        if deployment in ("", "New", "Suspended"):
            rc_name = f"{name}-{u.suffix(uid, 'raycluster', rayjob['metadata'].get('generation', 1), current)}"
            status["jobDeploymentStatus"] = "Initializing"
            status["jobStatus"] = status.get("jobStatus") or ""
            status["jobId"] = spec.get("jobId") or f"{name}-{u.suffix(uid, 'jobid', current)}"
            status["rayClusterName"] = rc_name
            status["dashboardURL"] = f"{rc_name}-head-svc.{ns}.svc.cluster.local:8265"
            status["startTime"] = u.ts(current)
            status.setdefault("failed", 0)
            status.setdefault("succeeded", 0)
            status["observedGeneration"] = rayjob["metadata"].get("generation", 1)
            changed |= self._new_cluster(cluster, rayjob, rc_name, spec.get("rayClusterSpec") or {}, "RayJob")
            return u.write_status_if_changed(cluster, rayjob, status) | changed

        started = u.parse_ts(status.get("startTime")) or current
        deadline = spec.get("activeDeadlineSeconds")
        if deadline is not None and u.seconds_between(started, current) >= float(deadline):
            status["jobDeploymentStatus"] = "Failed"
            status["reason"] = "DeadlineExceeded"
            status["message"] = (f"The RayJob has passed the activeDeadlineSeconds. StartTime: {u.ts(started)}. "
                                 f"ActiveDeadlineSeconds: {deadline}")
            status["endTime"] = u.ts(current)
            status["failed"] = int(status.get("failed") or 0) + 1
            events.record(cluster, rayjob, "DeadlineExceeded", status["message"], type="Warning",
                          component=COMPONENT)
            return u.write_status_if_changed(cluster, rayjob, status)

        if rc is None:
            if deployment == "Initializing":
                changed |= self._new_cluster(cluster, rayjob, rc_name, spec.get("rayClusterSpec") or {}, "RayJob")
            return u.write_status_if_changed(cluster, rayjob, status) | changed
        status["rayClusterStatus"] = copy.deepcopy(rc.get("status") or {})

        if deployment == "Initializing":
            if (rc.get("status") or {}).get("state") != "ready":
                return u.write_status_if_changed(cluster, rayjob, status)
            status["jobDeploymentStatus"] = "Running"
            status["jobStatus"] = "PENDING"
            self._driver_start[uid] = current
            events.record(cluster, rayjob, "Running", f"RayJob {ns}/{name} submitted to RayCluster {rc_name}",
                          component=COMPONENT)

        # Running: the driver follows its script
        changed |= self._follow_driver(cluster, rayjob, status, rc, current)
        return u.write_status_if_changed(cluster, rayjob, status) | changed

    def _finished_rayjob(self, cluster: Any, rayjob: dict[str, Any], status: dict[str, Any],
                         rc: dict[str, Any] | None, current: datetime) -> bool:
        """A finished RayJob: its cluster deleted after ``ttlSecondsAfterFinished`` (with
        ``shutdownAfterJobFinishes``), else its cluster's status mirrored."""
        spec = rayjob.get("spec") or {}
        ns = u.key(rayjob)[0]
        rc_name = status.get("rayClusterName") or ""
        if spec.get("shutdownAfterJobFinishes") and rc is not None and not u.is_deleting(rc):
            end = u.parse_ts(status.get("endTime")) or current
            if u.seconds_between(end, current) >= float(spec.get("ttlSecondsAfterFinished") or 0):
                u.delete(cluster, RAY, "RayCluster", ns, rc_name)
                events.record(cluster, rayjob, "DeletedRayCluster", f"Deleted RayCluster {ns}/{rc_name}",
                              component=COMPONENT)
                return True
        if rc is not None:
            status["rayClusterStatus"] = copy.deepcopy(rc.get("status") or {})
        return u.write_status_if_changed(cluster, rayjob, status)

    def _suspend_rayjob(self, cluster: Any, rayjob: dict[str, Any], status: dict[str, Any],
                        rc: dict[str, Any] | None) -> bool:
        """A suspended RayJob: its cluster deleted and its run forgotten."""
        ns, uid = u.key(rayjob)[0], rayjob["metadata"]["uid"]
        rc_name = status.get("rayClusterName") or ""
        deployment = status.get("jobDeploymentStatus") or ""
        changed = False
        if deployment in ("", "New"):
            status["jobDeploymentStatus"] = "Suspended"
        elif deployment != "Suspended":
            if rc is not None:
                u.delete(cluster, RAY, "RayCluster", ns, rc_name)
                events.record(cluster, rayjob, "DeletedRayCluster", f"Deleted RayCluster {ns}/{rc_name}",
                              component=COMPONENT)
                changed = True
            for field in ("rayClusterName", "dashboardURL", "jobId", "message", "rayClusterStatus",
                          "startTime", "rayJobInfo", "reason"):
                status.pop(field, None)
            status["jobStatus"] = ""
            status["jobDeploymentStatus"] = "Suspended"
            self._driver_start.pop(uid, None)
            self._driver_lines.pop(uid, None)
        status["observedGeneration"] = rayjob["metadata"].get("generation", 1)
        return u.write_status_if_changed(cluster, rayjob, status) | changed

    def _retry_rayjob(self, cluster: Any, rayjob: dict[str, Any], status: dict[str, Any],
                      rc: dict[str, Any] | None) -> bool:
        """Another attempt: the cluster goes away and the job starts over (``New``) on a new one."""
        ns, uid = u.key(rayjob)[0], rayjob["metadata"]["uid"]
        rc_name = status.get("rayClusterName") or ""
        if rc is not None:
            u.delete(cluster, RAY, "RayCluster", ns, rc_name)
            events.record(cluster, rayjob, "DeletedRayCluster", f"Deleted RayCluster {ns}/{rc_name}",
                          component=COMPONENT)
        for field in ("rayClusterName", "dashboardURL", "jobId", "message", "rayClusterStatus", "startTime",
                      "endTime", "rayJobInfo", "reason"):
            status.pop(field, None)
        status["jobStatus"] = ""
        status["jobDeploymentStatus"] = "New"
        self._driver_start.pop(uid, None)
        self._driver_lines.pop(uid, None)
        return u.write_status_if_changed(cluster, rayjob, status) | True

    def _follow_driver(self, cluster: Any, rayjob: dict[str, Any], status: dict[str, Any], rc: dict[str, Any],
                       current: datetime) -> bool:
        """The running driver follows its script: RUNNING, its log lines, then SUCCEEDED or FAILED."""
        spec = rayjob.get("spec") or {}
        ns, name = u.key(rayjob)
        uid = rayjob["metadata"]["uid"]
        changed = False
        script = scripts_of(cluster).for_rayjob(rayjob)
        submit = self._driver_start.setdefault(uid, u.parse_ts((status.get("rayJobInfo") or {}).get("startTime"))
                                               or current)
        run_start = u.plus(submit, script.pull_seconds)
        run_end = None if script.run_seconds is None else u.plus(run_start, script.run_seconds)
        if current >= run_start:
            if status.get("jobStatus") == "PENDING":
                status["jobStatus"] = "RUNNING"
            status.setdefault("rayJobInfo", {})["startTime"] = u.ts(run_start)
            changed |= self._driver_logs(cluster, rayjob, rc, script, run_start, run_end, current)
        if run_end is not None and current >= run_end:
            ok = script.exit_code == 0 and not script.oom
            status["jobStatus"] = "SUCCEEDED" if ok else "FAILED"
            status["jobDeploymentStatus"] = "Complete" if ok else "Failed"
            status["endTime"] = u.ts(run_end)
            status["rayJobInfo"]["endTime"] = u.ts(run_end)
            if ok:
                status["succeeded"] = int(status.get("succeeded") or 0) + 1
                status.pop("message", None)
                events.record(cluster, rayjob, "Completed", f"RayJob {ns}/{name} has completed",
                              component=COMPONENT)
            else:
                code = 137 if script.oom else script.exit_code
                status["failed"] = int(status.get("failed") or 0) + 1
                status["reason"] = "AppFailed"
                status["message"] = f"Job entrypoint command failed with exit code {code}"
                events.record(cluster, rayjob, "Failed", status["message"], type="Warning", component=COMPONENT)
                if status["failed"] <= int(spec.get("backoffLimit") or 0):
                    # another attempt: the cluster goes away and the job starts over on a new one
                    status["jobDeploymentStatus"] = "Retrying"
        return changed

    def _driver_logs(self, cluster: Any, rayjob: dict[str, Any], rc: dict[str, Any], script: Any,
                     start: datetime, end: datetime | None, current: datetime) -> bool:
        logs = getattr(cluster, "logs", None)
        head_name = ((rc.get("status") or {}).get("head") or {}).get("podName")
        if logs is None or not head_name:
            return False
        ns = rc["metadata"]["namespace"]
        head = u.get(cluster, "v1", "Pod", ns, head_name)
        if head is None:
            return False
        names = [c["name"] for c in (head["spec"].get("containers") or [])]
        names += [c["name"] for c in (head["spec"].get("initContainers") or [])
                  if c.get("restartPolicy") == "Always"]
        container = DRIVER_LOG_CONTAINER if DRIVER_LOG_CONTAINER in names else (names[0] if names else "")
        lines = script.log_lines(rayjob, container, container)
        uid = rayjob["metadata"]["uid"]
        done = self._driver_lines.get(uid, 0)
        step = script.log_every
        if step is None:
            step = (u.seconds_between(start, end) / len(lines)) if (end is not None and lines) else 0
        wrote = False
        for i, line in enumerate(lines):
            if i < done:
                continue
            when = u.plus(start, i * step)
            if end is not None and when > end:
                when = end
            if when > current:
                break
            logs.append(ns, head_name, container, line, ts=when)
            done = i + 1
            wrote = True
        self._driver_lines[uid] = done
        if end is not None and current >= end and container == DRIVER_LOG_CONTAINER and done >= len(lines):
            # the offload sidecar stops tailing once the driver ends, so `logs -f` on it returns
            logs.mark_terminated(ns, head_name, container)
        return wrote

    # ------------------------------------------------------------------------------------------ RayService

    def _sync_rayservice(self, cluster: Any, service: dict[str, Any]) -> bool:
        spec = service.get("spec") or {}
        ns, name = u.key(service)
        uid = service["metadata"]["uid"]
        current = u.now(cluster)
        status = copy.deepcopy(service.get("status") or {})
        changed = False
        active = status.get("activeServiceStatus") or {}
        pending = status.get("pendingServiceStatus") or {}
        rc_name = active.get("rayClusterName") or pending.get("rayClusterName")
        rc = u.get(cluster, RAY, "RayCluster", ns, rc_name) if rc_name else None
        if rc is None:
            rc_name = f"{name}-raycluster-{u.suffix(uid, 'raycluster', current)}"
            extra = {}
            if u.labels(service).get(QUEUE_LABEL):
                extra[QUEUE_LABEL] = u.labels(service)[QUEUE_LABEL]
            changed |= self._new_cluster(cluster, service, rc_name, spec.get("rayClusterConfig") or {}, "RayService",
                                         extra)
            status["pendingServiceStatus"] = {"rayClusterName": rc_name}
            status.pop("activeServiceStatus", None)
            status["serviceStatus"] = ""
            conditions = status.setdefault("conditions", [])
            u.set_condition(conditions, "Ready", "False", "Initializing", "RayService is initializing", current)
            u.set_condition(conditions, "UpgradeInProgress", "False", "NoActiveCluster",
                            "No active Ray cluster exists, and the RayService is preparing a new Ray cluster",
                            current)
            status["observedGeneration"] = service["metadata"].get("generation", 1)
            return u.write_status_if_changed(cluster, service, status) | changed
        head_template = ((spec.get("rayClusterConfig") or {}).get("headGroupSpec") or {}).get("template") or {}
        changed |= self._ensure_head_service(cluster, rc, name=f"{name}-head-svc", owner=service)
        serve_port = _head_ports(head_template).get("serve", 8000)
        changed |= self._ensure_head_service(cluster, rc, name=f"{name}-serve-svc", owner=service,
                                             selector_extra={}, ports={"serve": serve_port})
        conditions = status.setdefault("conditions", [])
        rc_status = copy.deepcopy(rc.get("status") or {})
        if rc_status.get("state") == "ready":
            apps = _serve_apps(spec.get("serveConfigV2"))
            pods = [p for p in u.list_objects(cluster, "v1", "Pod", ns)
                    if u.labels(p).get("ray.io/cluster") == rc_name and u.pod_is_ready(p)]
            if spec.get("excludeHeadPodFromServeSvc"):
                pods = [p for p in pods if u.labels(p).get("ray.io/node-type") != "head"]
            status.pop("pendingServiceStatus", None)
            status["activeServiceStatus"] = {
                "rayClusterName": rc_name,
                "rayClusterStatus": rc_status,
                "applicationStatuses": {
                    app: {"status": "RUNNING", "health_last_update_time": None,
                          "serveDeploymentStatuses": {d: {"status": "HEALTHY"} for d in deployments}}
                    for app, deployments in apps.items()
                },
            }
            for app_status in status["activeServiceStatus"]["applicationStatuses"].values():
                app_status.pop("health_last_update_time")
            status["serviceStatus"] = "Running"
            status["numServeEndpoints"] = len(pods)
            u.set_condition(conditions, "Ready", "True", "NonZeroServeEndpoints",
                            "Number of serve endpoints is greater than 0", current)
            u.set_condition(conditions, "UpgradeInProgress", "False", "NoPendingCluster",
                            "Active Ray cluster exists and no pending Ray cluster", current)
        else:
            status["pendingServiceStatus"] = {"rayClusterName": rc_name, "rayClusterStatus": rc_status}
        status["observedGeneration"] = service["metadata"].get("generation", 1)
        return u.write_status_if_changed(cluster, service, status) | changed
