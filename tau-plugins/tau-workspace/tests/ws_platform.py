"""A simulated cluster as `tau cluster install` leaves it before any workspace exists (for operator-verb tests)."""

from __future__ import annotations

from typing import Any

from tau_core import keys
from tau_testing.sim.scenarios.taugrid import (
    CPU_FLAVOR,
    CPU_NODE_LABELS,
    GPU_FLAVOR,
    GPU_NODE_LABELS,
    GPU_TAINT,
    KUEUE,
    SYSTEM_NAMESPACE,
    tau_crds_dir,
)

QUEUE = "jobqueue"


def cluster_queue(name: str = QUEUE) -> dict[str, Any]:
    def res(cpu: str, gpu: str) -> list[dict[str, str]]:
        return [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "128Gi"},
                {"name": keys.NVIDIA_GPU, "nominalQuota": gpu}]

    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {"matchExpressions": [{"key": keys.WORKSPACE, "operator": "Exists"}]},
                     "resourceGroups": [{"coveredResources": ["cpu", "memory", keys.NVIDIA_GPU],
                                         "flavors": [{"name": CPU_FLAVOR, "resources": res("32", "0")},
                                                     {"name": GPU_FLAVOR, "resources": res("32", "8")}]}]}}


def platform_objects() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": CPU_FLAVOR},
         "spec": {"nodeLabels": dict(CPU_NODE_LABELS)}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": GPU_FLAVOR},
         "spec": {"nodeLabels": dict(GPU_NODE_LABELS), "nodeTaints": [dict(GPU_TAINT)]}},
        cluster_queue(),
    ]


def install(cluster: Any) -> Any:
    cluster.preload_crds(tau_crds_dir())
    cluster.load_scenario(platform_objects())
    return cluster
