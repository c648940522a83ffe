"""The cluster boards computed from the watch cache: Nodes, Jobs / Queue, Ray and the Overview cards."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from tau_core import keys
from taugrid_portal.portal.cache import Obj, WatchCache
from taugrid_portal.portal.config import OperatorScope
from taugrid_portal.portal.directory import Scope
from taugrid_portal.portal.runs import _cond_true, _meta

NODE_KEYS = ("nodes", "pods", "daemonsets")
JOB_KEYS = ("workloads", "localqueues", "clusterqueues")
RAY_KEYS = ("services", "pods", "rayjobs")
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
AGENTPOOL = "agentpool"
_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3}


def quantity(text: Any) -> float:
    """A Kubernetes quantity as a number (``"500m"`` -> 0.5, ``"64Gi"`` -> bytes)."""
    s = str(text or "0").strip()
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if s.endswith(suffix):
            try:
                return float(s[: -len(suffix)]) * _SUFFIX[suffix]
            except ValueError:
                return 0.0
    try:
        return float(s)
    except ValueError:
        return 0.0


def _pod_requests(pod: Obj) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    for c in (pod.get("spec") or {}).get("containers") or []:
        for name, value in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] += quantity(value)
    return total


def nodes_board(cache: WatchCache, scope: Scope) -> dict[str, Any]:
    requested: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for pod in cache.items("pods"):
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            for name, value in _pod_requests(pod).items():
                requested[node][name] += value
    rows = []
    for node in sorted(cache.items("nodes"), key=lambda n: _meta(n).get("name", "")):
        meta, status = _meta(node), node.get("status") or {}
        labels = meta.get("labels") or {}
        cap, alloc = status.get("capacity") or {}, status.get("allocatable") or {}
        name = meta.get("name", "")
        rows.append({
            "name": name, "sku": labels.get(INSTANCE_TYPE, ""), "agentpool": labels.get(AGENTPOOL, ""),
            "gpuClass": labels.get(keys.GPU_CLASS, ""), "ready": _cond_true(node, "Ready"),
            "cpu": {"capacity": quantity(cap.get("cpu")), "allocatable": quantity(alloc.get("cpu")),
                    "requested": round(requested[name]["cpu"], 3)},
            "memoryGiB": {"capacity": round(quantity(cap.get("memory")) / 2**30, 1),
                          "allocatable": round(quantity(alloc.get("memory")) / 2**30, 1),
                          "requested": round(requested[name]["memory"] / 2**30, 1)},
            "gpu": {"capacity": quantity(cap.get(keys.NVIDIA_GPU)), "allocatable": quantity(alloc.get(keys.NVIDIA_GPU)),
                    "requested": requested[name][keys.NVIDIA_GPU]},
        })
    classes: dict[str, dict[str, float]] = defaultdict(lambda: {"nodes": 0, "gpus": 0, "requested": 0})
    for r in rows:
        if r["gpu"]["capacity"]:
            c = classes[r["gpuClass"] or "unclassified"]
            c["nodes"] += 1
            c["gpus"] += r["gpu"]["allocatable"]
            c["requested"] += r["gpu"]["requested"]
    doc: dict[str, Any] = {"nodes": rows, "gpuClasses": [{"gpuClass": k, **v} for k, v in sorted(classes.items())]}
    if not (scope.managed and scope.authorization_mode == "workspace-rbac"):
        doc["daemonSets"] = [{"namespace": _meta(d).get("namespace", ""), "name": _meta(d).get("name", ""),
                              "desired": int((d.get("status") or {}).get("desiredNumberScheduled") or 0),
                              "ready": int((d.get("status") or {}).get("numberReady") or 0)}
                             for d in cache.items("daemonsets")]
    return doc


def _workload_state(w: Obj) -> str:
    if _cond_true(w, "Finished"):
        return "finished"
    if _cond_true(w, "Admitted"):
        return "admitted"
    if _cond_true(w, "QuotaReserved"):
        return "reserved"
    return "pending"


def _pending_reason(w: Obj) -> str:
    for c in (w.get("status") or {}).get("conditions") or []:
        if c.get("type") == "QuotaReserved" and c.get("status") == "False":
            return str(c.get("message") or c.get("reason") or "")
    return "waiting for admission"


def _gpus(w: Obj) -> float:
    total = 0.0
    for ps in (w.get("spec") or {}).get("podSets") or []:
        count = int(ps.get("count") or 1)
        for c in ((ps.get("template") or {}).get("spec") or {}).get("containers") or []:
            total += count * quantity(((c.get("resources") or {}).get("requests") or {}).get(keys.NVIDIA_GPU))
    return total


def _queue_timestamp(w: Obj) -> str:
    """Kueue's queue-order timestamp: the eviction time of a workload evicted for not getting its pods ready
    (``requeuingStrategy.timestamp: Eviction``, the default), else its creation time."""
    for c in (w.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Evicted" and c.get("status") == "True" and c.get("reason") == "PodsReadyTimeout":
            return str(c.get("lastTransitionTime") or "")
    return str(_meta(w).get("creationTimestamp") or "")


def queue_positions(cache: WatchCache, lq_to_cq: dict[tuple[Any, Any], str]) -> dict[tuple[str, str], tuple[int, int]]:
    """``(namespace, name) -> (position in ClusterQueue, position in LocalQueue)`` of every queued workload.

    Computed from the watch cache the way Kueue orders its queues (priority first, then the queue-order
    timestamp, then the name), across every namespace of a ClusterQueue -- so the Portal needs neither
    Kueue's visibility API nor any request of its own.  Deactivated (``spec.active: false``), reserved,
    admitted and finished workloads are not in the queue."""
    queued: dict[str, list[tuple[int, str, str, str, str]]] = defaultdict(list)
    for w in cache.items("workloads"):
        meta, spec = _meta(w), w.get("spec") or {}
        if spec.get("active") is False or _workload_state(w) != "pending":
            continue
        ns, queue = meta.get("namespace", ""), spec.get("queueName", "")
        cq = lq_to_cq.get((ns, queue)) or f"<no ClusterQueue for {ns}/{queue}>"
        queued[cq].append((-int(spec.get("priority") or 0), _queue_timestamp(w), ns, meta.get("name", ""), queue))
    positions: dict[tuple[str, str], tuple[int, int]] = {}
    for entries in queued.values():
        per_lq: dict[tuple[str, str], int] = defaultdict(int)
        for i, (_, _, ns, name, queue) in enumerate(sorted(entries)):
            positions[(ns, name)] = (i, per_lq[(ns, queue)])
            per_lq[(ns, queue)] += 1
    return positions


def jobs_board(cache: WatchCache, allowed: list[tuple[str, str, str]], filters: dict[str, str]) -> dict[str, Any]:
    """Workloads of the allowed ``(team, namespace, localQueue)`` triples with states, reasons and positions."""
    lq_to_cq = {(_meta(q).get("namespace"), _meta(q).get("name")): (q.get("spec") or {}).get("clusterQueue", "")
                for q in cache.items("localqueues")}
    positions = queue_positions(cache, lq_to_cq)
    teams = {(ns, q): team for team, ns, q in allowed}
    rows = []
    for w in cache.items("workloads"):
        meta = _meta(w)
        ns, queue = meta.get("namespace", ""), (w.get("spec") or {}).get("queueName", "")
        if (ns, queue) not in teams:
            continue
        labels, state = meta.get("labels") or {}, _workload_state(w)
        in_cq, in_lq = positions.get((ns, meta.get("name", "")), (None, None))
        rows.append({"name": meta.get("name", ""), "namespace": ns, "queue": queue,
                     "clusterQueue": lq_to_cq.get((ns, queue), ""), "team": teams[(ns, queue)],
                     "lane": labels.get("tau.azure.com/lane", ""), "gpuClass": labels.get(keys.GPU_CLASS, ""),
                     "state": state, "gpus": _gpus(w), "priority": int((w.get("spec") or {}).get("priority") or 0),
                     "created": meta.get("creationTimestamp", ""), "position": in_lq,
                     "positionInLocalQueue": in_lq, "positionInClusterQueue": in_cq,
                     "active": (w.get("spec") or {}).get("active") is not False,
                     "pendingReason": _pending_reason(w) if state == "pending" else ""})
    for key in ("team", "lane", "gpuClass"):
        if filters.get(key):
            rows = [r for r in rows if r[key] == filters[key]]
    rows.sort(key=lambda r: (r["state"] != "pending", r["positionInClusterQueue"] is None,
                             r["positionInClusterQueue"] or 0, r["namespace"], r["name"]))
    counts = {s: sum(r["state"] == s for r in rows) for s in ("pending", "reserved", "admitted", "finished")}
    return {"workloads": rows, "counts": counts, "positionSource": "watch-cache",
            "queues": [{"team": t, "namespace": n, "localQueue": q, "clusterQueue": lq_to_cq.get((n, q), "")}
                       for t, n, q in allowed]}


def operator_triples(scopes: tuple[OperatorScope, ...]) -> list[tuple[str, str, str]]:
    return [(s.team, s.namespace, s.local_queue) for s in scopes]


def ray_clusters(cache: WatchCache, namespace: str) -> list[dict[str, Any]]:
    """Head Services ``<cluster>-head-svc`` in ``namespace``; "open" only once the head pod is ready."""
    ready_heads = {(_meta(p).get("namespace"), (_meta(p).get("labels") or {}).get(keys.RAY_CLUSTER))
                   for p in cache.items("pods")
                   if (_meta(p).get("labels") or {}).get(keys.RAY_NODE_TYPE) == "head" and _cond_true(p, "Ready")}
    out = []
    for svc in cache.items("services"):
        meta = _meta(svc)
        name, ns = meta.get("name", ""), meta.get("namespace", "")
        if not name.endswith("-head-svc") or (namespace and ns != namespace):
            continue
        cluster = (meta.get("labels") or {}).get(keys.RAY_CLUSTER) or name[: -len("-head-svc")]
        ports = {p.get("name"): p.get("port") for p in (svc.get("spec") or {}).get("ports") or []}
        ready = (ns, cluster) in ready_heads
        out.append({"namespace": ns, "cluster": cluster, "service": name, "dashboardPort": ports.get("dashboard", 8265),
                    "ready": ready, "proxyPath": f"/api/portal/ray/proxy/{ns}/{cluster}/" if ready else ""})
    out.sort(key=lambda c: (c["namespace"], c["cluster"]))
    return out


def overview_cards(cache: WatchCache, scope: Scope, runs: list[dict[str, Any]]) -> dict[str, Any]:
    nodes = nodes_board(cache, scope)["nodes"]
    gpus = sum(n["gpu"]["allocatable"] for n in nodes)
    workloads = [w for w in cache.items("workloads") if not scope.namespace
                 or _meta(w).get("namespace") == scope.namespace]
    states = [_workload_state(w) for w in workloads]
    skus: defaultdict[str, int] = defaultdict(int)
    for n in nodes:
        skus[n["sku"]] += 1
    return {
        "fleet": {"totalNodes": len(nodes), "readyNodes": sum(n["ready"] for n in nodes),
                  "gpuNodes": sum(1 for n in nodes if n["gpu"]["capacity"]), "totalGPUs": gpus,
                  "totalCPUCores": sum(n["cpu"]["allocatable"] for n in nodes),
                  "totalMemoryGiB": round(sum(n["memoryGiB"]["allocatable"] for n in nodes), 1),
                  "topSKU": max(skus, key=lambda k: skus[k]) if skus else ""},
        "queue": {"pending": states.count("pending"), "admitted": states.count("admitted"),
                  "gpuUsed": sum(n["gpu"]["requested"] for n in nodes),
                  "gpuHeadroom": gpus - sum(n["gpu"]["requested"] for n in nodes)},
        "ray": {"clusters": len(ray_clusters(cache, scope.namespace))},
        "runs": {s: sum(r["status"] == s for r in runs) for s in sorted({r["status"] for r in runs})},
    }


def running_entries(cache: WatchCache, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Overview's ``running`` list (reference §4.2): each running run with its queues and experiment."""
    lq_to_cq = {(_meta(q).get("namespace"), _meta(q).get("name")): (q.get("spec") or {}).get("clusterQueue", "")
                for q in cache.items("localqueues")}
    out = []
    for r in runs:
        if r["status"] != "Running":
            continue
        obj = cache.get("jobs" if r["kind"] == "Job" else "rayjobs", r["namespace"], r["name"]) or {}
        meta = _meta(obj)
        labels, ann = meta.get("labels") or {}, meta.get("annotations") or {}
        out.append({"job": r["name"], "name": r["name"], "namespace": r["namespace"], "runId": r["runId"],
                    "queue": r["queue"], "clusterQueue": lq_to_cq.get((r["namespace"], r["queue"]), ""),
                    "project": ann.get(keys.STELLAR_PROJECT_VALUE) or labels.get(keys.STELLAR_PROJECT, ""),
                    "experiment": ann.get(keys.STELLAR_EXPERIMENT_ID) or labels.get(keys.STELLAR_EXPERIMENT, ""),
                    "group": ann.get(keys.STELLAR_GROUP_VALUE) or labels.get(keys.STELLAR_GROUP, ""),
                    "experimentPath": r["experimentPath"], "experimentTracking": r["experimentTracking"]})
    return out
