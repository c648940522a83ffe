"""What the TauGrid chart installs before any workspace exists (control-plane.md §3), for controller tests."""

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
    RBAC,
    RESEARCHER,
    RESEARCHER_GROUP,
    ROLE,
    SYSTEM_NAMESPACE,
    researcher_rules,
    tau_crds_dir,
)

QUEUE = "jobqueue"
WORKSPACE = "aurora"
OUTPUT_ROOT = "/data/projects/aurora/runs"


def platform_objects(queue: str = QUEUE) -> list[dict[str, Any]]:
    def res(cpu: str, gpu: str) -> list[dict[str, str]]:
        return [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "128Gi"},
                {"name": keys.NVIDIA_GPU, "nominalQuota": gpu}]

    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": CPU_FLAVOR},
         "spec": {"nodeLabels": dict(CPU_NODE_LABELS)}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": GPU_FLAVOR},
         "spec": {"nodeLabels": dict(GPU_NODE_LABELS), "nodeTaints": [dict(GPU_TAINT)]}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": queue},
         "spec": {"namespaceSelector": {"matchExpressions": [{"key": keys.WORKSPACE, "operator": "Exists"}]},
                  "queueingStrategy": "BestEffortFIFO", "preemption": {"withinClusterQueue": "LowerPriority"},
                  "resourceGroups": [{"coveredResources": ["cpu", "memory", keys.NVIDIA_GPU],
                                      "flavors": [{"name": CPU_FLAVOR, "resources": res("32", "0")},
                                                  {"name": GPU_FLAVOR, "resources": res("32", "8")}]}]}},
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "taugrid-default"},
         "value": 1000},
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "taugrid-priority"},
         "value": 1200},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "taugrid-default"},
         "value": 1000, "globalDefault": False},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "taugrid-priority"},
         "value": 1200, "globalDefault": False},
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": ROLE}, "rules": researcher_rules()},
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "tau-clusterqueue-reader-v1"},
         "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["get"]},
                   {"apiGroups": [keys.API_GROUP], "resources": ["clusters"], "resourceNames": ["cluster"],
                    "verbs": ["get"]}]},
        {"apiVersion": keys.API_VERSION, "kind": "TauCluster", "metadata": {"name": "cluster"},
         "spec": {"managementMode": "Reconcile", "workspaceDefaults": {"defaultQueue": queue}}},
    ]


def workspace(name: str = WORKSPACE, *, namespace: str | None = None, queue: str | None = QUEUE,
              create_namespace: bool = True, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "authorization": {"mode": "workspace-rbac"},
        "principalRef": {"provider": "entra", "name": RESEARCHER_GROUP},
        "kubernetesSubject": {"kind": "Group", "name": RESEARCHER_GROUP},
        "role": ROLE,
        "target": {"namespace": namespace or name, "createNamespace": create_namespace},
        "defaults": {"outputRoot": OUTPUT_ROOT, "priority": "default"},
        "workloadIdentity": {"serviceAccountName": "tau-workload",
                             "clientId": "00000000-0000-0000-0000-000000000000"},
    }
    if queue:
        body["queue"] = queue
    body.update(spec)
    return {"apiVersion": keys.API_VERSION, "kind": "TauWorkspace",
            "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE}, "spec": body}


def install_platform(cluster: Any, *, gpu_nodes: int = 1, cpu_nodes: int = 1) -> None:
    from tau_testing.sim.controllers.scheduler import add_node

    cluster.preload_crds(tau_crds_dir())
    if RESEARCHER not in cluster.users:
        cluster.add_user(RESEARCHER, [RESEARCHER_GROUP])
    for i in range(1, cpu_nodes + 1):
        add_node(cluster, f"cpu-node-{i}", cpu="16", memory="64Gi", labels=dict(CPU_NODE_LABELS),
                 instance_type="Standard_D16s_v5")
    for i in range(1, gpu_nodes + 1):
        add_node(cluster, f"gpu-node-{i}", cpu="96", memory="880Gi", gpu=8, instance_type="Standard_ND96asr_v4",
                 labels=dict(GPU_NODE_LABELS), taints=[dict(GPU_TAINT)])
    cluster.load_scenario(platform_objects())
    cluster.settle()
