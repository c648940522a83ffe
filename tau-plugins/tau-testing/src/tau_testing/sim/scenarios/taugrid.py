"""The "TauGrid cluster" scenario: a simulated cluster with TauGrid installed and one Ready workspace.

``TauGridScenario.install(cluster)`` loads the product's own CRDs (``deploy/crds``) and creates:

* the baseline queue as TauGrid installs it: a ClusterQueue ``tau-cq`` with one resource group covering
  ``cpu``, ``memory`` and ``nvidia.com/gpu`` over two ResourceFlavors, ``taugrid-default-cpu`` (CPU nodes,
  GPU quota ``"0"``) and the generic GPU flavor ``taugrid-default-gpu`` (the GPU nodes' ``agentpool`` label,
  no hardware class, and the admission ``nodeTaints`` ``sku=gpu:NoSchedule`` that the GPU nodes carry too,
  so only pods with the GPU tolerations ``tau run`` renders are admitted to it or scheduled there);
* the WorkloadPriorityClasses and PriorityClasses ``taugrid-default`` and ``taugrid-priority``;
* CPU nodes ``cpu-node-<n>`` (``agentpool: cpu``) and GPU nodes ``gpu-node-<n>`` (``agentpool: gpu``,
  the GPU class label, 8 GPUs, tainted ``sku=gpu:NoSchedule``);
* the workspace namespace ``aurora`` with LocalQueue ``jobqueue``, the workload ServiceAccount and
  the result PVC ``blob-training``;
* a Ready, primary TauWorkspace ``aurora`` in ``tau-system`` whose researcher RBAC (ClusterRole
  ``tau-researcher-v1`` bound in the namespace) lets the user ``researcher`` (group
  ``aurora-researchers``) run workloads, and nothing more;
* the TauCluster ``cluster`` whose status carries Ready workload profiles.

The result PVC is backed by a local directory (:attr:`TauGridScenario.volume`, mounted at ``/data``):
the helper pods of ``tau run get`` are scripted to read it the way their shell script reads a real
volume (symbolic links and paths outside the result root are refused).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tau_core import keys
from tau_core.config.profiles import profile_set_hash
from tau_testing.paths import repo_root

SYSTEM_NAMESPACE = keys.SYSTEM_NAMESPACE_DEFAULT
WORKSPACE = "aurora"
NAMESPACE = "aurora"
QUEUE = "jobqueue"
CLUSTER_QUEUE = "tau-cq"
CPU_FLAVOR = "taugrid-default-cpu"
GPU_FLAVOR = "taugrid-default-gpu"
GPU_CLASS = "a100-80gb"
RESULT_PVC = "blob-training"
SERVICE_ACCOUNT = "tau-workload"
RESEARCHER = "researcher"
RESEARCHER_GROUP = "aurora-researchers"
OUTSIDER = "outsider"
ROLE = "tau-researcher-v1"
OUTPUT_ROOT = "/data/projects/aurora/runs"
TAU_CLUSTER_GENERATION = 1
RBAC = "rbac.authorization.k8s.io/v1"
KUEUE = "kueue.x-k8s.io/v1beta2"
TAU = keys.API_VERSION
CPU_NODE_LABELS = {"agentpool": "cpu"}
GPU_NODE_LABELS = {"agentpool": "gpu"}
#: The AKS GPU node pools' taint, also the GPU flavor's admission taint (chart default ``sku=gpu:NoSchedule``).
GPU_TAINT = {"key": "sku", "value": "gpu", "effect": "NoSchedule"}


def tau_crds_dir() -> Path:
    """The product's own CRDs: ``$TAU_DEPLOY_CRDS_DIR``, else ``<repo>/deploy/crds``."""
    env = os.environ.get("TAU_DEPLOY_CRDS_DIR")
    return Path(env).expanduser() if env else repo_root() / "deploy" / "crds"


def _rule(verbs: list[str], groups: list[str], resources: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


READ = ["get", "list", "watch"]


def researcher_rules() -> list[dict[str, Any]]:
    """What ``tau-researcher-v1`` grants inside the workspace namespace."""
    return [
        _rule(["create", "delete", "patch", *READ], ["batch"], ["jobs"]),  # patch: the SDK's queue gate
        _rule(READ, ["batch"], ["jobs/status"]),
        _rule(["create", "delete", "patch", *READ], ["ray.io"], ["rayjobs"]),
        _rule(READ, ["ray.io"], ["rayclusters", "rayjobs/status"]),
        _rule(["create", "delete", *READ], [""], ["pods"]),
        _rule(["get"], [""], ["pods/log"]),
        _rule(["create", "delete", *READ], [""], ["services"]),
        _rule(["create", *READ], [""], ["events"]),
        _rule(["get"], [""], ["secrets"]),
        _rule(READ, [""], ["persistentvolumeclaims", "configmaps"]),
        _rule(READ, ["kueue.x-k8s.io"], ["workloads", "localqueues"]),
        _rule(READ, ["resource.k8s.io"], ["resourceclaims"]),
        # serving (tau serve): server-side apply is a patch; scale goes through the subresource
        _rule(["create", "delete", "patch", *READ], ["ray.io"], ["rayservices"]),
        _rule(["create", "delete", "patch", *READ], ["apps"], ["deployments"]),
        _rule(["get", "patch", "update"], ["apps"], ["deployments/scale"]),
        _rule(["create", "delete", "patch", *READ], ["autoscaling"], ["horizontalpodautoscalers"]),
        _rule(["patch"], [""], ["services"]),
    ]


@dataclass
class TauGridScenario:
    """Handles to what :meth:`install` created, plus the directory behind the result PVC."""

    volume: Path
    cluster: Any = None
    researcher_context: str = ""
    outsider_context: str = ""
    objects: list[dict[str, Any]] = field(default_factory=list)

    namespace = NAMESPACE
    workspace = WORKSPACE
    queue = QUEUE
    system_namespace = SYSTEM_NAMESPACE
    result_pvc = RESULT_PVC

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def install(cls, cluster: Any, volume: str | Path, *, gpu_nodes: int = 1, cpu_nodes: int = 2,
                cpu_quota: str = "32", memory_quota: str = "128Gi", gpu_quota: int = 8,
                process_kubelet: bool = False) -> TauGridScenario:
        """``process_kubelet``: pods that name their command run as local processes
        (:mod:`tau_testing.sim.kubelet_process`), the result PVC backed by :attr:`volume`."""
        volume = Path(volume)
        volume.mkdir(parents=True, exist_ok=True)
        scenario = cls(volume=volume, cluster=cluster)
        cluster.preload_crds(tau_crds_dir())
        _ensure_controllers(cluster)
        if RESEARCHER not in cluster.users:
            cluster.add_user(RESEARCHER, [RESEARCHER_GROUP])
        if OUTSIDER not in cluster.users:
            cluster.add_user(OUTSIDER, [])
        from tau_testing.sim.controllers.scheduler import add_node

        for i in range(1, cpu_nodes + 1):
            add_node(cluster, f"cpu-node-{i}", cpu="16", memory="64Gi", labels=dict(CPU_NODE_LABELS),
                     instance_type="Standard_D16s_v5")
        for i in range(1, gpu_nodes + 1):
            add_node(cluster, f"gpu-node-{i}", cpu="96", memory="880Gi", gpu=8, instance_type="Standard_ND96asr_v4",
                     labels={**GPU_NODE_LABELS, keys.GPU_CLASS: GPU_CLASS}, taints=[dict(GPU_TAINT)])
        scenario.objects = cluster.load_scenario(
            objects(cpu_quota=cpu_quota, memory_quota=memory_quota, gpu_quota=gpu_quota))
        cluster.settle()
        scenario.researcher_context = cluster.context_for(RESEARCHER)
        scenario.outsider_context = cluster.context_for(OUTSIDER)
        scenario._script_helper_pods()
        if process_kubelet:
            from tau_testing.sim.kubelet_process import enable_process_kubelet

            enable_process_kubelet(cluster, claims={f"{NAMESPACE}/{RESULT_PVC}": volume})
        return scenario

    # -- the result volume ------------------------------------------------------------------
    def write(self, rel: str, content: bytes | str) -> Path:
        """Put a file on the result PVC (``rel`` is relative to the volume root, i.e. to ``/data``)."""
        path = self.volume / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return path

    def _helper_output(self, pod: dict[str, Any], container: str) -> list[str]:
        """What the ``tau run get`` helper pod's shell script prints, computed against :attr:`volume`."""
        from tau_testing.sim.volumes import helper_output

        return helper_output(pod, self.volume)

    def _script_helper_pods(self) -> None:
        from tau_testing.sim.scripts import PodScript, scripts_of

        book = scripts_of(self.cluster)
        for app in ("tau-pvc-get", "tau-pvc-list"):
            book.add({"app": app}, PodScript(run_seconds=0, logs=self._helper_output))


def _ensure_controllers(cluster: Any) -> None:
    """The controllers a TauGrid cluster needs, unless the test already installed them."""
    if cluster.controllers:
        return
    installer = None
    try:
        from tau_testing.sim import controllers as pkg

        installer = getattr(pkg, "install_defaults", None) or getattr(pkg, "install_default_controllers", None)
    except ImportError:
        installer = None
    if installer is not None:
        installer(cluster)
        return
    from tau_testing.sim.controllers.jobs import JobController
    from tau_testing.sim.controllers.kueue import KueueController
    from tau_testing.sim.controllers.pods import Kubelet
    from tau_testing.sim.controllers.scheduler import Scheduler

    cluster.add_controller("kueue", KueueController())
    cluster.add_controller("jobs", JobController())
    try:
        from tau_testing.sim.controllers import kuberay

        controller_cls = getattr(kuberay, "KubeRayController", None)
        if controller_cls is not None:
            cluster.add_controller("kuberay", controller_cls())
    except ImportError:
        pass
    cluster.add_controller("scheduler", Scheduler())
    cluster.add_controller("kubelet", Kubelet())


def objects(*, cpu_quota: str = "32", memory_quota: str = "128Gi", gpu_quota: int = 8) -> list[dict[str, Any]]:
    """The scenario's objects (namespaces first; statuses included where a controller would write them)."""
    priorities = {"workloadPriorityClassName": "taugrid-default", "podPriorityClassName": "taugrid-default",
                  "disableDefaultPriorities": False}
    profiles = [
        {"name": "cpu-small", "description": "one CPU pod", "applicability": {"teams": [], "lanes": [],
                                                                               "namespaces": []},
         "gpusPerWorker": 0, "workerCount": 1, "mode": "fixed", "placement": "independent",
         "defaultLocalQueue": QUEUE, "executionTarget": "singleCluster", "priorities": priorities},
        {"name": "gpu-1x", "description": "one GPU on one node", "applicability": {"teams": [], "lanes": [],
                                                                                   "namespaces": []},
         "gpusPerWorker": 1, "workerCount": 1, "mode": "fixed", "placement": "single-node-nvlink",
         "defaultLocalQueue": QUEUE, "executionTarget": "singleCluster", "priorities": priorities},
    ]
    resolved: list[Mapping[str, Any]] = [
        {**p, "localQueues": [{"namespace": NAMESPACE, "name": QUEUE, "clusterQueue": CLUSTER_QUEUE}],
         "clusterQueues": [CLUSTER_QUEUE], "resourceFlavors": [CPU_FLAVOR, GPU_FLAVOR], "topologies": [],
         "workloadPriorityClasses": ["taugrid-default"], "podPriorityClasses": ["taugrid-default"],
         "conditions": [_cond("Ready", "ProfileReady")]}
        for p in profiles
    ]
    return [
        *_namespaces(), *_queue_objects(cpu_quota, memory_quota, gpu_quota), *_access_objects(),
        *_tau_objects(profiles, resolved),
    ]


def _cond(ctype: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": ctype, "status": "True", "reason": reason, "message": message or reason,
            "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}


def _namespaces() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}},
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": NAMESPACE, "labels": {keys.WORKSPACE: WORKSPACE,
                                                    keys.LOCAL_QUEUE: QUEUE,
                                                    keys.KUEUE_DEFAULT_LOCAL_QUEUE: QUEUE},
                      "annotations": {keys.RESULT_SCOPE: OUTPUT_ROOT}}},
    ]


def _queue_objects(cpu_quota: str, memory_quota: str, gpu_quota: int) -> list[dict[str, Any]]:
    """Kueue's flavors, queues and priority classes, and the pod priority classes."""
    return [
        # the baseline queue: the CPU flavor takes CPU work (zero GPU quota); the generic GPU flavor's admission
        # taint keeps CPU-only work off GPU quota, and GPU pods tolerate it with the tolerations they carry
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": CPU_FLAVOR},
         "spec": {"nodeLabels": dict(CPU_NODE_LABELS)}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": GPU_FLAVOR},
         "spec": {"nodeLabels": dict(GPU_NODE_LABELS), "nodeTaints": [dict(GPU_TAINT)]}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
         "spec": {"namespaceSelector": {"matchExpressions": [{"key": keys.WORKSPACE, "operator": "Exists"}]},
                  "queueingStrategy": "BestEffortFIFO",
                  "preemption": {"withinClusterQueue": "LowerPriority"},
                  "resourceGroups": [
                      {"coveredResources": ["cpu", "memory", keys.NVIDIA_GPU],
                       "flavors": [
                           {"name": CPU_FLAVOR, "resources": [
                               {"name": "cpu", "nominalQuota": cpu_quota},
                               {"name": "memory", "nominalQuota": memory_quota},
                               {"name": keys.NVIDIA_GPU, "nominalQuota": "0"}]},
                           {"name": GPU_FLAVOR, "resources": [
                               {"name": "cpu", "nominalQuota": cpu_quota},
                               {"name": "memory", "nominalQuota": memory_quota},
                               {"name": keys.NVIDIA_GPU, "nominalQuota": str(gpu_quota)}]}]},
                  ]}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": NAMESPACE},
         "spec": {"clusterQueue": CLUSTER_QUEUE}},
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "taugrid-default"},
         "value": 100, "description": "TauGrid default priority"},
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "taugrid-priority"},
         "value": 1000, "description": "TauGrid priority tier"},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "taugrid-default"},
         "value": 100, "globalDefault": False, "description": "TauGrid default pod priority"},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "taugrid-priority"},
         "value": 1000, "globalDefault": False, "description": "TauGrid priority tier"},
    ]


def _access_objects() -> list[dict[str, Any]]:
    """The workspace's service account, result volume and RBAC."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": RESULT_PVC, "namespace": NAMESPACE},
         "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Ti"}},
                  "storageClassName": "azureblob-fuse-premium"},
         "status": {"phase": "Bound", "accessModes": ["ReadWriteMany"], "capacity": {"storage": "1Ti"}}},
        # researcher RBAC: the role the workspace grants, bound in the workspace namespace
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": ROLE}, "rules": researcher_rules()},
        {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": f"{ROLE}-{WORKSPACE}", "namespace": NAMESPACE},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": RESEARCHER_GROUP}]},
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "tau-workspace-reader"},
         "rules": [_rule(READ, [keys.API_GROUP], ["workspaces", "clusters"]),
                   _rule(["get"], ["kueue.x-k8s.io"], ["workloadpriorityclasses"]),
                   _rule(["get"], ["scheduling.k8s.io"], ["priorityclasses"])]},
        {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "tau-workspace-reader"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "tau-workspace-reader"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]},
    ]


def _tau_objects(profiles: list[dict[str, Any]], resolved: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The TauWorkspace and TauCluster, with the statuses the controller would write."""
    cond = _cond
    return [
        {"apiVersion": TAU, "kind": "TauWorkspace",
         "metadata": {"name": WORKSPACE, "namespace": SYSTEM_NAMESPACE,
                      "annotations": {keys.V0_PRIMARY_WORKSPACE: "true"}},
         "spec": {"authorization": {"mode": "workspace-rbac"},
                  "principalRef": {"provider": "entra", "name": RESEARCHER_GROUP},
                  "kubernetesSubject": {"kind": "Group", "name": RESEARCHER_GROUP},
                  "role": ROLE, "target": {"namespace": NAMESPACE, "createNamespace": True}, "queue": QUEUE,
                  "defaults": {"outputRoot": OUTPUT_ROOT, "priority": "default"},
                  "workloadIdentity": {"serviceAccountName": SERVICE_ACCOUNT,
                                       "clientId": "00000000-0000-0000-0000-000000000000"}},
         "status": {"phase": "Ready", "observedGeneration": 1, "target": {"resolvedNamespace": NAMESPACE},
                    "queue": {"localQueue": QUEUE, "clusterQueue": CLUSTER_QUEUE},
                    "conditions": [cond("RBACReady", "RBACReconciled"), cond("QueueReady", "QueueReady"),
                                   cond("WorkloadIdentityReady", "ServiceAccountReady")]}},
        {"apiVersion": TAU, "kind": "TauCluster", "metadata": {"name": "cluster"},
         "spec": {"managementMode": "Reconcile", "workspaceDefaults": {"defaultQueue": QUEUE},
                  "workloadProfiles": profiles},
         "status": {"phase": "Ready", "observedGeneration": TAU_CLUSTER_GENERATION,
                    "desiredStateHash": "0" * 64,
                    "nodes": {"observed": 3, "ready": 3, "drifted": 0},
                    "workloadProfiles": {"observedGeneration": TAU_CLUSTER_GENERATION, "observed": len(profiles),
                                         "ready": len(profiles), "drifted": 0,
                                         "profileSetHash": profile_set_hash(resolved),
                                         "profiles": resolved},
                    "managedResources": [],
                    "conditions": [cond("NodesReady", "NodeReconciliationReady"),
                                   cond("WorkloadProfilesReady", "ProfilesReady"),
                                   cond("Ready", "NodeReconciliationReady")]}},
    ]
