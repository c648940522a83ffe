"""A kube-scheduler stand-in: binds Pending pods to nodes where selector, affinity, taints and resources fit.

Filters run in kube-scheduler's order (NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit)
and a node is rejected by the first filter that fails. Unschedulable pods get ``PodScheduled=False`` with the
scheduler's message (``0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's
node affinity/selector. preemption: ...``) and one ``FailedScheduling`` event per distinct message. Among the
nodes that fit, the first by name wins (no scoring). Scheduler-driven preemption of running pods is not
simulated; use ``PodScript(preempt_after=...)`` to script a preempted pod.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any, cast

from tau_testing.sim.controllers import _util as u
from tau_testing.sim.controllers import events

COMPONENT = "default-scheduler"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
_UNRESOLVABLE = "Preemption is not helpful for scheduling"
_NO_VICTIMS = "No preemption victims found for incoming pod"


def add_node(cluster: Any, name: str, *, labels: dict[str, str] | None = None, cpu: str | int = "8",
             memory: str = "32Gi", gpu: int = 0, taints: list[dict[str, Any]] | None = None, pods: int = 110,
             unschedulable: bool = False, instance_type: str | None = None) -> dict[str, Any]:
    """Create a Ready node with the given allocatable resources (``nvidia.com/gpu`` when ``gpu`` > 0)."""
    node_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    }
    if instance_type:
        node_labels["node.kubernetes.io/instance-type"] = instance_type
    node_labels.update(labels or {})
    resources: dict[str, str] = {"cpu": str(cpu), "memory": str(memory), "pods": str(pods),
                                 "ephemeral-storage": "100Gi"}
    if gpu:
        resources["nvidia.com/gpu"] = str(gpu)
    existing = u.list_objects(cluster, "v1", "Node")
    index = len(existing) + 1
    spec: dict[str, Any] = {"podCIDR": f"10.244.{index}.0/24", "providerID": f"sim://{name}"}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}, "spec": spec}
    created = cluster.store.create(node)
    when = u.ts(u.now(cluster))
    created["status"] = {
        "capacity": dict(resources),
        "allocatable": dict(resources),
        "conditions": [
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
             "message": "kubelet has sufficient memory available", "lastHeartbeatTime": when,
             "lastTransitionTime": when},
            {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure",
             "message": "kubelet has no disk pressure", "lastHeartbeatTime": when, "lastTransitionTime": when},
            {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID",
             "message": "kubelet has sufficient PID available", "lastHeartbeatTime": when,
             "lastTransitionTime": when},
            {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "message": "kubelet is posting ready status", "lastHeartbeatTime": when, "lastTransitionTime": when},
        ],
        "addresses": [{"type": "InternalIP", "address": f"10.240.0.{index + 3}"},
                      {"type": "Hostname", "address": name}],
        "nodeInfo": {"kubeletVersion": "v1.31.0", "containerRuntimeVersion": "containerd://1.7.0",
                     "operatingSystem": "linux", "architecture": "amd64", "osImage": "Simulated Linux",
                     "kernelVersion": "6.1.0-sim", "machineID": u.hex_hash(name, length=32),
                     "systemUUID": u.hex_hash("uuid", name, length=32), "bootID": u.hex_hash("boot", name, length=32),
                     "kubeProxyVersion": "v1.31.0"},
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
    }
    return cast("dict[str, Any]", cluster.store.update_status(created))


def node_ip(node: dict[str, Any]) -> str:
    for addr in (node.get("status") or {}).get("addresses") or []:
        if addr.get("type") == "InternalIP":
            return str(addr["address"])
    return ""


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        op = tol.get("operator") or "Equal"
        if op == "Exists":
            if not tol.get("key") or tol.get("key") == taint.get("key"):
                return True
        elif tol.get("key") == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _expr_matches(expr: dict[str, Any], lbls: dict[str, str]) -> bool:
    k, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return k in lbls and lbls[k] in values
    if op == "NotIn":
        return k not in lbls or lbls[k] not in values
    if op == "Exists":
        return k in lbls
    if op == "DoesNotExist":
        return k not in lbls
    if op in ("Gt", "Lt"):
        try:
            have, want = int(lbls[str(k)]), int(values[0])
        except (KeyError, IndexError, ValueError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def node_selector_matches(pod_spec: dict[str, Any], node: dict[str, Any]) -> bool:
    """``nodeSelector`` plus required node affinity (``nodeSelectorTerms`` are ORed, expressions ANDed)."""
    lbls = u.labels(node)
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if lbls.get(k) != v:
            return False
    required = ((((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution")) or {})
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    fields = {"metadata.name": node["metadata"]["name"]}
    for term in terms:
        if all(_expr_matches(e, lbls) for e in term.get("matchExpressions") or []) and all(
            _expr_matches(e, fields) for e in term.get("matchFields") or []
        ):
            return True
    return False


def _taint_text(taint: dict[str, Any]) -> str:
    return f"{{{taint.get('key')}: {taint.get('value') or ''}}}"


class Scheduler:
    """Binds pods to nodes; toggle with ``.enabled``."""

    def __init__(self) -> None:
        self.enabled = True

    def reconcile(self, cluster: Any) -> bool:
        nodes = u.list_objects(cluster, "v1", "Node")
        pods = u.list_objects(cluster, "v1", "Pod", field_selector=u.NOT_TERMINAL)
        used: dict[str, dict[str, int]] = {n["metadata"]["name"]: {} for n in nodes}
        pending: list[dict[str, Any]] = []
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if u.pod_is_terminal(pod):
                continue
            if node_name:
                usage = used.setdefault(node_name, {})
                for res, amount in u.pod_requests(pod["spec"]).items():
                    usage[res] = usage.get(res, 0) + amount
                usage["pods"] = usage.get("pods", 0) + 1000
            elif not u.is_deleting(pod):
                pending.append(pod)
        pending.sort(key=lambda p: (-int((p.get("spec") or {}).get("priority") or 0),
                                    p["metadata"].get("creationTimestamp") or "", *u.key(p)))
        changed = False
        for pod in pending:
            changed |= self._schedule(cluster, pod, nodes, used)
        return changed

    def _schedule(self, cluster: Any, pod: dict[str, Any], nodes: list[dict[str, Any]],
                  used: dict[str, dict[str, int]]) -> bool:
        spec = pod.get("spec") or {}
        if spec.get("schedulingGates"):
            return self._set_unscheduled(cluster, pod, "SchedulingGated", GATED_MESSAGE, event=False)
        requests = u.pod_requests(spec)
        requests["pods"] = 1000
        failures: Counter[str] = Counter()
        unresolvable: Counter[str] = Counter()
        tolerations = spec.get("tolerations") or []
        for node in nodes:
            name = node["metadata"]["name"]
            node_spec = node.get("spec") or {}
            if node_spec.get("unschedulable") and not tolerates(
                tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
            ):
                unresolvable["node(s) were unschedulable"] += 1
                continue
            bad_taint = next((t for t in node_spec.get("taints") or []
                              if t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, t)),
                             None)
            if bad_taint is not None:
                unresolvable[f"node(s) had untolerated taint {_taint_text(bad_taint)}"] += 1
                continue
            if not node_selector_matches(spec, node):
                unresolvable["node(s) didn't match Pod's node affinity/selector"] += 1
                continue
            allocatable = {k: u.milli(v) for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()}
            usage = used.get(name, {})
            short = sorted(res for res, amount in requests.items()
                           if amount and usage.get(res, 0) + amount > allocatable.get(res, 0))
            if short:
                for res in short:
                    failures["Too many pods" if res == "pods" else f"Insufficient {res}"] += 1
                continue
            for res, amount in requests.items():
                usage[res] = usage.get(res, 0) + amount
            used[name] = usage
            return self._bind(cluster, pod, node)
        if not nodes:
            message = "no nodes available to schedule pods"
        else:
            total = len(nodes)
            parts = sorted(f"{n} {reason}" for reason, n in (failures + unresolvable).items())
            pre = []
            victims = sum(1 for _ in nodes) - sum(unresolvable.values())
            if victims:
                pre.append(f"{victims} {_NO_VICTIMS}")
            if unresolvable:
                pre.append(f"{sum(unresolvable.values())} {_UNRESOLVABLE}")
            message = (f"0/{total} nodes are available: {', '.join(parts)}. "
                       f"preemption: 0/{total} nodes are available: {', '.join(pre)}.")
        return self._set_unscheduled(cluster, pod, "Unschedulable", message, event=True)

    def _set_unscheduled(self, cluster: Any, pod: dict[str, Any], reason: str, message: str, *, event: bool) -> bool:
        status = copy.deepcopy(pod.get("status") or {})
        status.setdefault("phase", "Pending")
        conditions = status.setdefault("conditions", [])
        cond = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if cond and cond.get("status") == "False" and cond.get("reason") == reason and cond.get("message") == message:
            return False
        u.set_condition(conditions, "PodScheduled", "False", reason, message, u.now(cluster), probe_times=True)
        if reason == "Unschedulable":
            status["qosClass"] = status.get("qosClass") or _qos(pod)
        written = u.write_status_if_changed(cluster, pod, status)
        if written and event:
            events.record(cluster, pod, "FailedScheduling", message, type="Warning", component=COMPONENT)
        return written

    def _bind(self, cluster: Any, pod: dict[str, Any], node: dict[str, Any]) -> bool:
        node_name = node["metadata"]["name"]
        bound = copy.deepcopy(pod)
        bound["spec"]["nodeName"] = node_name
        stored = u.update(cluster, bound)
        if stored is None:
            return False
        status = copy.deepcopy(stored.get("status") or {})
        status["phase"] = "Pending"
        u.set_condition(status.setdefault("conditions", []), "PodScheduled", "True", "", "", u.now(cluster),
                        probe_times=True)
        for cond in status["conditions"]:
            if cond["type"] == "PodScheduled":
                cond.pop("reason", None)
                cond.pop("message", None)
        status["hostIP"] = node_ip(node)
        status["hostIPs"] = [{"ip": status["hostIP"]}]
        status["qosClass"] = _qos(stored)
        stored["status"] = status
        u.update_status(cluster, stored)
        ns, name = u.key(pod)
        events.record(cluster, stored, "Scheduled", f"Successfully assigned {ns}/{name} to {node_name}",
                      component=COMPONENT)
        return True


def _qos(pod: dict[str, Any]) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    any_set = False
    guaranteed = bool(containers)
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for name in ("cpu", "memory"):
            if name not in lim or u.milli(req.get(name, lim.get(name))) != u.milli(lim[name]):
                guaranteed = False
    if guaranteed:
        return "Guaranteed"
    return "Burstable" if any_set else "BestEffort"
