"""The Kusto-backed boards' payloads, computed from typed fleet records (:mod:`tau_core.fleet`): Cluster Health
(``GpuHealth()``), Node utilisation (``NodeHealth()``), Cost (``CostTracking.GpuCostHourly`` with the
``GpuHealth()`` utilisation), and the durable RayJob timeline (``TauExpRunLifecycle``).

Pure functions: no I/O, no Kusto; :mod:`.kusto_api` reads the records through the hooks and serves these.  A
measurement no sample carried is ``None`` (JSON ``null``), never a made-up zero.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from tau_core.fleet import (
    NODE_CPU_IDLE,
    NODE_MEM_AVAILABLE,
    NODE_MEM_TOTAL,
    GpuCost,
    GpuSample,
    GpuUtilisation,
    NodeSample,
)
from tau_core.history import LifecycleRow

#: GpuHealth() metric -> the Cluster Health board's field
GPU_FIELDS = {"gpu_utilization": "utilizationPct", "gpu_temperature_celsius": "temperatureCelsius",
              "gpu_power_watts": "powerWatts", "fb_memory_used_mb": "memoryUsedMB", "fb_memory_free_mb": "memoryFreeMB",
              "correctable_remapped_rows": "correctableRemappedRows",
              "uncorrectable_remapped_rows": "uncorrectableRemappedRows", "row_remap_failure": "rowRemapFailure"}
IDLE_MIN_SAMPLES = 10
DEFAULT_IDLE_THRESHOLD = 20.0
EPOCH = datetime.min.replace(tzinfo=UTC)


def iso(value: datetime | None) -> str:
    return value.isoformat().replace("+00:00", "Z") if value is not None else ""


def cluster_board(samples: list[GpuSample], window: str) -> dict[str, Any]:
    """One row per GPU (its latest sample of each health metric), with error and per-model counts.  A GPU is
    unhealthy when it reports uncorrectable remapped rows or a row-remap failure."""
    gpus: dict[tuple[str, str, str], dict[str, Any]] = {}
    latest: dict[tuple[str, str, str], datetime] = {}
    for s in samples:
        key = (s.cluster, s.instance, s.gpu)
        row = gpus.setdefault(key, {"cluster": s.cluster, "instance": s.instance, "gpu": s.gpu, "modelName": "",
                                    "namespace": "", "pod": "", **{f: None for f in GPU_FIELDS.values()}})
        if s.metric in GPU_FIELDS:
            row[GPU_FIELDS[s.metric]] = s.value
        when = s.timestamp or EPOCH
        if key not in latest or when >= latest[key]:  # the newest sample says who uses the GPU now
            latest[key] = when
            row.update(modelName=s.model_name or row["modelName"], namespace=s.namespace, pod=s.pod)
    rows = [gpus[k] for k in sorted(gpus)]
    models: dict[str, int] = defaultdict(int)
    for row in rows:
        row["healthy"] = not (row["uncorrectableRemappedRows"] or row["rowRemapFailure"])
        models[row["modelName"] or "unknown"] += 1
    return {"window": window, "totalGPUs": len(rows), "errorGPUs": sum(not r["healthy"] for r in rows),
            "models": [{"modelName": m, "gpus": n} for m, n in sorted(models.items(), key=lambda i: (-i[1], i[0]))],
            "gpus": rows}


def _core_rate(samples: list[tuple[datetime, float]]) -> tuple[float, float]:
    """(idle seconds, observed seconds) of one core's idle counter; a reset interval is skipped, not counted."""
    idle = observed = 0.0
    ordered = sorted(samples)
    for (t0, v0), (t1, v1) in pairwise(ordered):
        seconds, delta = (t1 - t0).total_seconds(), v1 - v0
        if seconds <= 0 or delta < 0 or delta > seconds:
            continue
        idle += delta
        observed += seconds
    return idle, observed


def nodeutil_board(samples: list[NodeSample], window: str, queried_at: str) -> dict[str, Any]:
    """One row per node: CPU utilisation from the per-core idle counters, memory from the latest samples."""
    cores: dict[tuple[str, str], dict[str, list[tuple[datetime, float]]]] = defaultdict(lambda: defaultdict(list))
    memory: dict[tuple[str, str], dict[str, tuple[datetime, float]]] = defaultdict(dict)
    for s in samples:
        key = (s.cluster, s.instance)
        if s.value is None or s.timestamp is None or s.value < 0:
            cores[key]  # the node was seen, without a usable measurement
            continue
        if s.metric == NODE_CPU_IDLE and s.cpu:
            cores[key][s.cpu].append((s.timestamp, s.value))
        elif s.metric in (NODE_MEM_TOTAL, NODE_MEM_AVAILABLE):
            seen = memory[key].get(s.metric)
            if seen is None or s.timestamp >= seen[0]:
                memory[key][s.metric] = (s.timestamp, s.value)
    nodes: list[dict[str, Any]] = []
    for key in sorted(set(cores) | set(memory)):
        rates = [_core_rate(v) for v in cores[key].values()]
        usable = [100 * (1 - idle / observed) for idle, observed in rates if observed > 0]
        total, avail = memory[key].get(NODE_MEM_TOTAL), memory[key].get(NODE_MEM_AVAILABLE)
        used = (1 - avail[1] / total[1]) * 100 if total and avail and total[1] > 0 and avail[1] <= total[1] else None
        nodes.append({"cluster": key[0], "instance": key[1],
                      "cpuUtilPct": round(sum(usable) / len(usable), 1) if usable else None,
                      "cpuCores": len(cores[key]), "usableCores": len(usable),
                      "memTotalBytes": total[1] if total else None, "memAvailBytes": avail[1] if avail else None,
                      "memUsedPct": round(used, 1) if used is not None else None})
    nodes.sort(key=lambda n: (n["cpuUtilPct"] is None, -(n["cpuUtilPct"] or 0), n["cluster"], n["instance"]))
    return {"window": window, "queriedAt": queried_at, "availability": "ready" if nodes else "empty", "nodes": nodes}


def _avg_util(namespace: str, utils: list[GpuUtilisation]) -> float | None:
    mine = [u for u in utils if u.namespace == namespace and u.avg_util_pct is not None and u.samples]
    samples = sum(u.samples for u in mine)
    return round(sum((u.avg_util_pct or 0) * u.samples for u in mine) / samples, 1) if samples else None


def cost_board(costs: list[GpuCost], utils: list[GpuUtilisation], window: str, queried_at: str,
               threshold: float = DEFAULT_IDLE_THRESHOLD) -> dict[str, Any]:
    """Allocation GPU-hours and estimated cost per workspace, and the GPUs used less than ``threshold`` percent
    on average (only GPUs with more than :data:`IDLE_MIN_SAMPLES` valid samples are judged)."""
    workspaces: list[dict[str, Any]] = [{"workspace": c.workspace, "namespace": c.namespace, "peakGPUs": c.peak_gpus,
                   "gpuHours": round(c.gpu_hours, 1) if c.gpu_hours is not None else None,
                   "estimatedCostUSD": round(c.estimated_cost_usd, 2) if c.estimated_cost_usd is not None else None,
                   "avgUtilPct": _avg_util(c.namespace, utils), "costAvailable": c.estimated_cost_usd is not None,
                   "gpuHoursAvailable": c.gpu_hours is not None,
                   "coverage": {"observedSamples": c.samples, "gpuHoursSamples": c.gpu_hours_samples,
                                "costSamples": c.cost_samples}} for c in costs]
    workspaces.sort(key=lambda w: -(w["gpuHours"] or 0))
    hours = [w["gpuHours"] for w in workspaces if w["gpuHours"] is not None]
    dollars = [w["estimatedCostUSD"] for w in workspaces if w["estimatedCostUSD"] is not None]
    eligible = [u for u in utils if u.avg_util_pct is not None and u.samples > IDLE_MIN_SAMPLES]
    idle = sorted((u for u in eligible if (u.avg_util_pct or 0) < threshold), key=lambda u: u.avg_util_pct or 0)
    return {"window": window, "queriedAt": queried_at, "idleThresholdPct": threshold,
            "totalGPUHours": round(sum(hours), 1) if hours else None,
            "totalEstimatedCostUSD": round(sum(dollars), 2) if dollars else None,
            "costAvailable": bool(dollars), "gpuHoursAvailable": bool(hours), "idleAvailable": bool(eligible),
            "workspaces": workspaces,
            "idleGPUs": [{"cluster": u.cluster, "instance": u.instance, "gpu": u.gpu, "modelName": u.model_name,
                          "namespace": u.namespace, "pod": u.pod, "avgUtilPct": round(u.avg_util_pct or 0, 1),
                          "samples": u.samples} for u in idle]}


def lifecycle_event(row: LifecycleRow) -> dict[str, Any]:
    """One ``LifecycleEvent`` of the durable RayJob timeline (reference field names)."""
    return {"observedAt": iso(row.observed_at), "state": row.state, "reason": row.reason, "message": row.message,
            "completionTime": iso(row.completion_time), "submitTime": iso(row.submit_time),
            "admittedTime": iso(row.kueue_admitted_time), "podStartTime": iso(row.pod_start_time),
            "runId": row.run_id, "durableId": row.durable_id, "resourceUid": row.resource_uid,
            "name": row.owning_resource_name, "namespace": row.namespace, "cluster": row.cluster,
            "queue": row.local_queue, "image": row.image, "command": row.tau_command, "resultPath": row.result_path,
            "resultPvc": row.result_pvc, "artifactUri": row.artifact_uri, "checkpointUri": row.checkpoint_uri,
            "kind": row.owning_resource_kind}
