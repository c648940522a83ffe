"""The TauGrid scenario's baseline queue places CPU and GPU work as the real queue does."""

from __future__ import annotations

from typing import Any

from tau_core import keys
from tau_testing.sim.controllers import kit, workloads_for
from tau_testing.sim.scenarios.taugrid import (
    CLUSTER_QUEUE,
    CPU_FLAVOR,
    GPU_FLAVOR,
    GPU_TAINT,
    KUEUE,
    NAMESPACE,
    QUEUE,
    TauGridScenario,
)

# what `tau run` renders for a GPU pod
GPU_TOLERATIONS = [{"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
                   {"key": keys.NVIDIA_GPU, "operator": "Exists", "effect": "NoSchedule"}]


def _job(name: str, *, gpu: int = 0, tolerate: bool = False) -> dict[str, Any]:
    obj = kit.job(name, NAMESPACE, queue=QUEUE, cpu="4", memory="16Gi", gpu=gpu)
    if tolerate:
        obj["spec"]["template"]["spec"]["tolerations"] = [dict(t) for t in GPU_TOLERATIONS]
    return obj


def _placement(scenario: TauGridScenario, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    job = scenario.cluster.store.get("batch/v1", "Job", NAMESPACE, name)
    (wl,) = workloads_for(scenario.cluster, job)
    pods = scenario.cluster.store.list("v1", "Pod", NAMESPACE, label_selector=f"job-name={name}")
    return wl, pods


def test_queue_has_the_baseline_shape(sim_cluster_factory, tmp_path) -> None:
    scenario = TauGridScenario.install(sim_cluster_factory(), tmp_path / "volume")
    cq = scenario.cluster.store.get(KUEUE, "ClusterQueue", None, CLUSTER_QUEUE)
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", keys.NVIDIA_GPU]
    quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert quotas[CPU_FLAVOR][keys.NVIDIA_GPU] == "0" and quotas[GPU_FLAVOR][keys.NVIDIA_GPU] == "8"
    gpu_flavor = scenario.cluster.store.get(KUEUE, "ResourceFlavor", None, GPU_FLAVOR)["spec"]
    assert gpu_flavor["nodeTaints"] == [GPU_TAINT] and not gpu_flavor.get("tolerations")
    assert keys.GPU_CLASS not in gpu_flavor["nodeLabels"]  # the generic flavor names no hardware class
    gpu_node = scenario.cluster.store.get("v1", "Node", None, "gpu-node-1")
    assert gpu_node["spec"]["taints"] == [GPU_TAINT]
    assert all(gpu_node["metadata"]["labels"][k] == v for k, v in gpu_flavor["nodeLabels"].items())


def test_gpu_job_lands_on_the_gpu_node_and_cpu_work_on_cpu_nodes(sim_cluster_factory, tmp_path) -> None:
    from tau_testing.sim.scripts import PodScript, scripts_of

    scenario = TauGridScenario.install(sim_cluster_factory(), tmp_path / "volume")
    scripts_of(scenario.cluster).add({"job-name": "gpu"}, PodScript(run_seconds=600))
    scenario.cluster.store.create(_job("gpu", gpu=1, tolerate=True))
    scenario.cluster.store.create(_job("cpu"))
    scenario.cluster.advance(5)
    wl, (pod,) = _placement(scenario, "gpu")
    assert set(wl["status"]["admission"]["podSetAssignments"][0]["flavors"].values()) == {GPU_FLAVOR}
    assert pod["spec"]["nodeName"] == "gpu-node-1" and pod["status"]["phase"] == "Running"
    wl, (pod,) = _placement(scenario, "cpu")
    assert set(wl["status"]["admission"]["podSetAssignments"][0]["flavors"].values()) == {CPU_FLAVOR}
    assert pod["spec"]["nodeName"].startswith("cpu-node-")


def test_gpu_quota_needs_the_gpu_tolerations(sim_cluster_factory, tmp_path) -> None:
    scenario = TauGridScenario.install(sim_cluster_factory(), tmp_path / "volume")
    scenario.cluster.store.create(_job("untolerated", gpu=1))
    scenario.cluster.advance(5)
    wl, pods = _placement(scenario, "untolerated")
    assert kit.condition(wl, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor "
        f"{CPU_FLAVOR}, request > maximum capacity (1 > 0), untolerated taint {{sku gpu NoSchedule <nil>}} in "
        f"flavor {GPU_FLAVOR}")
    assert all(not p["spec"].get("nodeName") for p in pods)
