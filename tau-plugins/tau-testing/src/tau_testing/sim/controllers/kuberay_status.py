"""KubeRay stand-in, the status arithmetic: head ports, worker replicas, a suspended RayCluster's status,
desired resources, and the Serve applications of a RayService."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from tau_testing.sim.controllers import _util as u

DEFAULT_PORTS = {"gcs-server": 6379, "dashboard": 8265, "client": 10001, "metrics": 8080}


def _head_ports(head_template: dict[str, Any]) -> dict[str, int]:
    ports = dict(DEFAULT_PORTS)
    for c in ((head_template.get("spec") or {}).get("containers") or [])[:1]:
        for p in c.get("ports") or []:
            if p.get("name") and p.get("containerPort"):
                ports[p["name"]] = int(p["containerPort"])
    return ports


def _group_replicas(group: dict[str, Any]) -> int:
    replicas = group.get("replicas")
    if replicas is None:
        replicas = group.get("minReplicas", 0)
    replicas = int(replicas or 0)
    low, high = group.get("minReplicas"), group.get("maxReplicas")
    if low is not None:
        replicas = max(replicas, int(low))
    if high is not None:
        replicas = min(replicas, int(high))
    return replicas * int(group.get("numOfHosts", 1) or 1)


def _suspended_status(status: dict[str, Any], current: datetime) -> None:
    """A suspended RayCluster's status: state ``suspended``, no head, no ready workers."""
    conditions = status.setdefault("conditions", [])
    if status.get("state") != "suspended":
        status["state"] = "suspended"
        status.setdefault("stateTransitionTimes", {})["suspended"] = u.ts(current)
    u.set_condition(conditions, "RayClusterSuspended", "True", "RayClusterSuspended",
                    "RayCluster is suspended", current)
    u.set_condition(conditions, "HeadPodReady", "False", "HeadPodNotFound", "Head Pod not found", current)
    u.set_condition(conditions, "RayClusterProvisioned", "False", "RayClusterPodsProvisioning",
                    "RayCluster Pods are being provisioned for first time", current)
    for key in ("readyWorkerReplicas", "availableWorkerReplicas"):
        status[key] = 0
    status.pop("head", None)


def _desired_resources(status: dict[str, Any], spec: dict[str, Any], head_template: dict[str, Any]) -> None:
    """``desiredCPU``/``Memory``/``GPU``/``TPU``: the head's and every worker's requests added up."""
    totals: dict[str, int] = {}
    for template, count in [(head_template, 1)] + [
        ((g.get("template") or {}), _group_replicas(g)) for g in spec.get("workerGroupSpecs") or []
    ]:
        for res, amount in u.pod_requests(copy.deepcopy(template.get("spec") or {})).items():
            totals[res] = totals.get(res, 0) + amount * count
    status["desiredCPU"] = u.format_quantity("cpu", totals.get("cpu", 0))
    status["desiredMemory"] = u.format_quantity("memory", totals.get("memory", 0))
    status["desiredGPU"] = u.format_quantity("nvidia.com/gpu", totals.get("nvidia.com/gpu", 0))
    status["desiredTPU"] = u.format_quantity("google.com/tpu", totals.get("google.com/tpu", 0))


def _serve_apps(config: str | None) -> dict[str, list[str]]:
    """Application name → deployment names from ``serveConfigV2``."""
    if not config:
        return {"default": []}
    try:
        import yaml

        data = yaml.safe_load(config) or {}
    except Exception:  # a malformed config still gets a default app, as the operator reports one
        return {"default": []}
    apps: dict[str, list[str]] = {}
    for app in data.get("applications") or []:
        if isinstance(app, dict):
            apps[str(app.get("name") or "default")] = [str(d.get("name")) for d in app.get("deployments") or []
                                                       if isinstance(d, dict) and d.get("name")]
    return apps or {"default": []}
