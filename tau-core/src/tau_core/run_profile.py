"""``tau run status --run-profile``: queue, runtime, artifact and GPU runtime evidence for one run.

Read-only and bounded: at most two discovery requests for NVIDIA dcgm-exporter pods (the official
``app.kubernetes.io/name=dcgm-exporter`` label and TauGrid's GPU-monitoring label), then at most one
metrics request per distinct node of the run, through the API server's pod proxy.  Missing exporters,
permissions or samples are reported as *unavailable*, never as a zero.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tau_core import keys
from tau_core.kube import KubeApiError, KubeSession, api_path
from tau_core.status_tree import Snapshot

EXPORTER_SELECTORS = ("app.kubernetes.io/name=dcgm-exporter", "app.kubernetes.io/component=tau-gpu-monitoring")
EXPORTER_PORT = 9400
UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+([-+0-9.eE]+|NaN)')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Samples of a Prometheus text exposition: ``(name, labels, value)``."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line.strip())
        if not m:
            continue
        labels = {k: v for k, v in _LABEL.findall(m.group(3) or "")}
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        out.append((m.group(1), labels, value))
    return out


def _queue(snap: Snapshot) -> dict[str, Any]:
    workload = snap.workload or {}
    labels = (workload.get("metadata") or {}).get("labels") or {}
    out: dict[str, Any] = {"localQueue": labels.get(keys.KUEUE_QUEUE_NAME), "clusterQueue": None, "flavors": {}}
    for wl in snap.workloads:
        admission = (wl.get("status") or {}).get("admission") or {}
        out["clusterQueue"] = admission.get("clusterQueue") or out["clusterQueue"]
        for assignment in admission.get("podSetAssignments") or []:
            for resource, flavor in (assignment.get("flavors") or {}).items():
                out["flavors"][resource] = flavor
    return out


def _runtime(snap: Snapshot) -> list[dict[str, Any]]:
    pods = []
    for pod in snap.pods:
        status = pod.get("status") or {}
        started = [((cs.get("state") or {}).get("running") or {}).get("startedAt")
                   for cs in status.get("containerStatuses") or []]
        pods.append({"pod": (pod.get("metadata") or {}).get("name"), "node": (pod.get("spec") or {}).get("nodeName"),
                     "phase": status.get("phase"), "startedAt": next((s for s in started if s), None),
                     "restarts": sum(int(cs.get("restartCount") or 0) for cs in status.get("containerStatuses") or [])})
    return pods


def _artifacts(snap: Snapshot) -> dict[str, Any]:
    ann = ((snap.workload or {}).get("metadata") or {}).get("annotations") or {}
    return {"resultPath": ann.get(keys.RESULT_PATH), "resultPvc": ann.get(keys.RESULT_PVC),
            "publication": ann.get(keys.ARTIFACT_PUBLICATION), "checkpoint": ann.get(keys.CHECKPOINT_ARTIFACT)}


def _allocation(snap: Snapshot) -> dict[str, Any]:
    requested = 0
    for pod in snap.pods:
        for c in (pod.get("spec") or {}).get("containers") or []:
            limits = (c.get("resources") or {}).get("limits") or {}
            try:
                requested += int(str(limits.get(keys.NVIDIA_GPU, 0)))
            except ValueError:
                continue
    claims = [{"claim": (c.get("metadata") or {}).get("name"),
               "allocated": bool((c.get("status") or {}).get("allocation"))} for c in snap.claims]
    return {"devicePluginGpus": requested, "resourceClaims": claims}


async def _telemetry(session: KubeSession, snap: Snapshot) -> dict[str, Any]:
    nodes = sorted({str((p.get("spec") or {}).get("nodeName")) for p in snap.pods
                    if (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get("phase") == "Running"})
    if not nodes:
        return {"state": "unavailable", "reason": "the run has no running pods"}
    exporters: list[Mapping[str, Any]] = []
    denied = False
    for selector in EXPORTER_SELECTORS:
        try:
            exporters.extend(await session.list_items(api_path("v1", "pods"), label_selector=selector))
        except KubeApiError as exc:
            denied = denied or exc.status == 403
    if not exporters:
        reason = ("listing exporter pods requires cluster-wide pod read access" if denied
                  else "no NVIDIA dcgm-exporter pods were found")
        return {"state": "unavailable", "reason": reason}
    names = {str((p.get("metadata") or {}).get("name")) for p in snap.pods}
    util: list[float] = []
    fb: list[float] = []
    devices: list[dict[str, Any]] = []
    errors: list[str] = []
    for node in nodes:
        exporter = next((e for e in exporters if (e.get("spec") or {}).get("nodeName") == node), None)
        if exporter is None:
            errors.append(f"no exporter on node {node}")
            continue
        meta = exporter.get("metadata") or {}
        path = api_path("v1", "pods", namespace=meta.get("namespace"),
                        name=f"{meta.get('name')}:{EXPORTER_PORT}", subresource="proxy/metrics")
        try:
            text = await session.text(path)
        except KubeApiError as exc:
            errors.append("reading metrics requires the pods/proxy subresource" if exc.status == 403 else exc.message)
            continue
        for name, labels, value in parse_metrics(text):
            if labels.get("namespace") != snap.namespace or labels.get("pod") not in names:
                continue
            if name == UTIL:
                util.append(value)
                devices.append({"pod": labels.get("pod"), "container": labels.get("container"),
                                "gpu": labels.get("gpu"), "uuid": labels.get("UUID")})
            elif name == FB_USED:
                fb.append(value / 1024.0)
    if not util:
        return {"state": "unavailable", "reason": "; ".join(errors) or "no samples matched this run's pods"}
    activity = "active" if max(util) > 0 else ("idle now" if fb and max(fb) > 0 else "idle")
    return {"state": "observed", "gpu_devices": devices,
            "gpu_utilization": {"avg": sum(util) / len(util), "max": max(util)},
            "gpu_memory_gib": {"avg": sum(fb) / len(fb), "max": max(fb)} if fb else "unavailable",
            "gpu_activity": activity,
            "cuda_compute_process": "unavailable (dcgm-exporter exposes aggregate utilization only)"}


async def run_profile(session: KubeSession, snap: Snapshot) -> dict[str, Any]:
    return {"queue": _queue(snap), "runtime": _runtime(snap), "artifacts": _artifacts(snap),
            "gpu_allocation": _allocation(snap), "gpu_runtime": await _telemetry(session, snap)}


def render(profile: Mapping[str, Any]) -> list[str]:
    q = profile["queue"]
    lines = ["Run profile:",
             f"  queue: local={q.get('localQueue') or '-'} cluster={q.get('clusterQueue') or '-'} flavors="
             + (",".join(f"{k}:{v}" for k, v in sorted(q.get("flavors", {}).items())) or "-")]
    for pod in profile["runtime"]:
        lines.append(f"  runtime: pod {pod['pod']} on {pod['node'] or '-'} phase={pod['phase']} "
                     f"started={pod['startedAt'] or '-'} restarts={pod['restarts']}")
    art = profile["artifacts"]
    lines.append(f"  artifacts: path={art.get('resultPath') or '-'} pvc={art.get('resultPvc') or '-'}"
                 + (f" publication={art['publication']}" if art.get("publication") else ""))
    alloc = profile["gpu_allocation"]
    lines.append(f"  gpu_allocation: device-plugin GPUs={alloc['devicePluginGpus']} resource claims="
                 + (",".join(f"{c['claim']}({'allocated' if c['allocated'] else 'pending'})"
                             for c in alloc["resourceClaims"]) or "none"))
    gpu = profile["gpu_runtime"]
    if gpu.get("state") != "observed":
        lines.append(f"  gpu_runtime: unavailable ({gpu.get('reason')})")
    else:
        u = gpu["gpu_utilization"]
        lines.append(f"  gpu_utilization: avg {u['avg']:.0f}% max {u['max']:.0f}%")
        mem = gpu["gpu_memory_gib"]
        lines.append("  gpu_memory: " + (f"avg {mem['avg']:.1f} GiB max {mem['max']:.1f} GiB"
                                          if isinstance(mem, dict) else "unavailable"))
        lines.append(f"  gpu_activity: {gpu['gpu_activity']}")
        lines.append(f"  cuda_compute_process: {gpu['cuda_compute_process']}")
    return lines
