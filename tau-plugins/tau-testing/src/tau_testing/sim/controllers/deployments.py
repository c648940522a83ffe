"""The apps/v1 Deployment controller, without ReplicaSets.

A simplification, said plainly: pods are owned by the Deployment itself (no ReplicaSet objects), named
``<deployment>-<pod-template-hash>-<rand>`` and labelled ``pod-template-hash`` as if a ReplicaSet made them.
A template change replaces every pod at once (``Recreate`` semantics for both strategies). ``spec.replicas``
(also through the ``scale`` subresource) scales; failed or finished pods are replaced. Status carries
``replicas``, ``updatedReplicas``, ``readyReplicas``, ``availableReplicas`` (ready counts as available;
``minReadySeconds`` is ignored), ``unavailableReplicas`` and the ``Available``/``Progressing`` conditions.

A Deployment carrying ``kueue.x-k8s.io/queue-name`` gets that label on its pods, plus the
``kueue.x-k8s.io/managed`` label and the ``kueue.x-k8s.io/admission`` scheduling gate (what Kueue's pod
webhook adds), so each pod waits for its own Workload to be admitted.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tau_testing.sim.controllers import _util as u
from tau_testing.sim.controllers import events
from tau_testing.sim.controllers.kueue import ADMISSION_GATE, MANAGED_LABEL, QUEUE_LABEL
from tau_testing.sim.controllers.pods import kill_pod

COMPONENT = "deployment-controller"


def template_hash(template: dict[str, Any]) -> str:
    return u.hex_hash(json.dumps(template, sort_keys=True), length=10)


class DeploymentController:
    """Reconciles apps/v1 Deployments; toggle with ``.enabled``."""

    def __init__(self) -> None:
        self.enabled = True
        self._made: dict[str, int] = {}  # pods made per owner: fresh names even after deletions

    def reconcile(self, cluster: Any) -> bool:
        pods_by_owner: dict[str, list[dict[str, Any]]] = {}
        for pod in u.list_objects(cluster, "v1", "Pod", label_selector="pod-template-hash"):
            ref = u.controller_of(pod)
            if ref and ref.get("kind") == "Deployment":
                pods_by_owner.setdefault(ref["uid"], []).append(pod)
        changed = False
        for deployment in u.list_objects(cluster, "apps/v1", "Deployment"):
            if not u.is_deleting(deployment):
                changed |= self._sync(cluster, deployment, pods_by_owner.get(deployment["metadata"]["uid"], []))
        return changed

    def _sync(self, cluster: Any, deployment: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
        spec = deployment.get("spec") or {}
        _ns, name = u.key(deployment)
        current = u.now(cluster)
        template = spec.get("template") or {}
        pth = template_hash(template)
        rs_name = f"{name}-{pth}"
        changed = False
        live = [p for p in pods if not u.is_deleting(p)]
        for pod in live:
            if u.labels(pod).get("pod-template-hash") != pth or u.pod_is_terminal(pod):
                changed |= kill_pod(cluster, pod)
        live = [p for p in live if u.labels(p).get("pod-template-hash") == pth and not u.pod_is_terminal(p)]
        want = 0 if spec.get("paused") else int(spec.get("replicas", 1))
        if len(live) > want:
            # scale down: unready pods first, then the newest
            victims = sorted(live, key=lambda p: (u.pod_is_ready(p), p["metadata"].get("creationTimestamp") or "",
                                                  p["metadata"]["name"]))
            for pod in victims[: len(live) - want]:
                kill_pod(cluster, pod)
                changed = True
            keep = {p["metadata"]["name"] for p in victims[len(live) - want:]}
            live = [p for p in live if p["metadata"]["name"] in keep]
        taken = {p["metadata"]["name"] for p in pods}
        created = 0
        for _ in range(want - len(live)):
            self._create_pod(cluster, deployment, template, pth, taken)
            created += 1
        if created:
            changed = True
            events.record(cluster, deployment, "ScalingReplicaSet",
                          f"Scaled up replica set {rs_name} from {len(live)} to {want}", component=COMPONENT)

        replicas = len(live) + created
        ready = sum(1 for p in live if u.pod_is_ready(p))
        status = copy.deepcopy(deployment.get("status") or {})
        status["observedGeneration"] = deployment["metadata"].get("generation", 1)
        for key_, value in (("replicas", replicas), ("updatedReplicas", replicas), ("readyReplicas", ready),
                            ("availableReplicas", ready), ("unavailableReplicas", max(replicas - ready, 0))):
            if value:
                status[key_] = value
            else:
                status.pop(key_, None)
        conditions = status.setdefault("conditions", [])
        max_unavailable = 0 if want <= 1 else int(want * 0.25)
        if ready >= want - max_unavailable:
            self._condition(conditions, "Available", "True", "MinimumReplicasAvailable",
                            "Deployment has minimum availability.", current)
        else:
            self._condition(conditions, "Available", "False", "MinimumReplicasUnavailable",
                            "Deployment does not have minimum availability.", current)
        if ready >= want:
            self._condition(conditions, "Progressing", "True", "NewReplicaSetAvailable",
                            f'ReplicaSet "{rs_name}" has successfully progressed.', current)
        else:
            self._condition(conditions, "Progressing", "True", "ReplicaSetUpdated",
                            f'ReplicaSet "{rs_name}" is progressing.', current)
        return u.write_status_if_changed(cluster, deployment, status) | changed

    @staticmethod
    def _condition(conditions: list[dict[str, Any]], ctype: str, status: str, reason: str, message: str,
                   current: Any) -> None:
        existing = next((c for c in conditions if c.get("type") == ctype), None)
        if existing and (existing.get("status"), existing.get("reason"), existing.get("message")) == (
                status, reason, message):
            return
        u.set_condition(conditions, ctype, status, reason, message, current)
        for cond in conditions:
            if cond["type"] == ctype:
                cond["lastUpdateTime"] = u.ts(current)

    def _create_pod(self, cluster: Any, deployment: dict[str, Any], template: dict[str, Any], pth: str,
                    taken: set[str]) -> None:
        ns, name = u.key(deployment)
        template = copy.deepcopy(template)
        tmeta = template.get("metadata") or {}
        pod_labels = dict(tmeta.get("labels") or {})
        pod_labels["pod-template-hash"] = pth
        spec = template.get("spec") or {}
        queue = u.labels(deployment).get(QUEUE_LABEL) or pod_labels.get(QUEUE_LABEL)
        if queue:
            pod_labels[QUEUE_LABEL] = queue
            pod_labels[MANAGED_LABEL] = "true"
            gates = spec.setdefault("schedulingGates", [])
            if not any(g.get("name") == ADMISSION_GATE for g in gates):
                gates.append({"name": ADMISSION_GATE})
        n = self._made.get(deployment['metadata']['uid'], 0)
        while True:
            pod_name = f"{name}-{pth}-{u.suffix(deployment['metadata']['uid'], pth, n)}"
            if pod_name not in taken:
                break
            n += 1
        taken.add(pod_name)
        self._made[deployment['metadata']['uid']] = n + 1
        pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": pod_name, "namespace": ns, "labels": pod_labels,
                            "generateName": f"{name}-{pth}-",
                            "ownerReferences": [u.owner_ref(deployment)]},
               "spec": spec}
        annotations = dict(tmeta.get("annotations") or {})
        if annotations:
            pod["metadata"]["annotations"] = annotations
        u.create(cluster, pod)
