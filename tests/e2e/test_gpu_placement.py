"""End to end: GPU and CPU work through `tau run` land where the TauGrid baseline queue sends them.

The simulated TauGrid cluster carries the baseline queue's shape: one resource group over cpu, memory and
``nvidia.com/gpu``, a CPU flavor with zero GPU quota, and a GPU flavor whose admission taint matches the
GPU nodes' ``sku=gpu:NoSchedule`` taint (tolerated only by the GPU tolerations `tau run` renders).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tau_testing.sim.scenarios.taugrid import CLUSTER_QUEUE, CPU_FLAVOR, GPU_FLAVOR, NAMESPACE, TauGridScenario
from tau_testing.sim.scripts import PodScript, scripts_of

NS = ["-n", NAMESPACE]
KUEUE = "kueue.x-k8s.io/v1beta2"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(root)
    return root


def write_target(repo: Path, name: str, *, gpus: int) -> None:
    (repo / "tau").mkdir(parents=True, exist_ok=True)
    (repo / "train.py").write_text("print('training')\n")
    (repo / "tau" / f"{name}.yaml").write_text(
        f"name: {name}\nengine: job\nentrypoint: ../train.py\n"
        f"compute:\n  gpus: {gpus}\n  cpu_request: \"4\"\n  memory_limit: 16Gi\n"
        "runtime:\n  image: ghcr.io/acme/train:1.0\npolicy:\n  queue: jobqueue\n")


def only_pod(scenario: TauGridScenario, job: str) -> dict[str, Any]:
    pods = [p for p in scenario.cluster.store.list("v1", "Pod", NAMESPACE)
            if (p["metadata"].get("labels") or {}).get("job-name") == job]
    assert len(pods) == 1, pods
    return pods[0]


def flavors_of(scenario: TauGridScenario, job: str) -> set[str]:
    (wl,) = [w for w in scenario.cluster.store.list(KUEUE, "Workload", NAMESPACE)
             if any(o.get("name") == job for o in w["metadata"].get("ownerReferences") or [])]
    return {f for ps in wl["status"]["admission"]["podSetAssignments"] for f in ps["flavors"].values()}


def test_gpu_job_runs_on_the_gpu_node(taugrid_cluster: TauGridScenario, tau_cli, repo: Path) -> None:
    scripts_of(taugrid_cluster.cluster).add({"job-name": "gpu-train"}, PodScript(pull_seconds=2, run_seconds=600))
    write_target(repo, "gpu-train", gpus=1)
    r = tau_cli("run", "gpu-train", *NS)
    assert r.exit_code == 0, r
    taugrid_cluster.cluster.advance(10)

    r = tau_cli("run", "status", "gpu-train", *NS, "-o", "json")
    assert r.exit_code == 0, r
    status = json.loads(r.stdout)
    assert [(p["phase"], p["node"]) for p in status["pods"]] == [("Running", "gpu-node-1")], status
    assert next(p for p in status["phases"] if p["name"] == "Pod scheduling")["state"] == "done", status
    pod = only_pod(taugrid_cluster, "gpu-train")
    assert pod["spec"]["nodeName"] == "gpu-node-1"
    assert pod["status"]["phase"] == "Running"
    assert flavors_of(taugrid_cluster, "gpu-train") == {GPU_FLAVOR}
    cq = taugrid_cluster.cluster.store.get(KUEUE, "ClusterQueue", None, CLUSTER_QUEUE)["status"]
    gpu_usage = {f["name"]: {r["name"]: r["total"] for r in f["resources"]} for f in cq["flavorsUsage"]}
    assert gpu_usage[GPU_FLAVOR]["nvidia.com/gpu"] == "1"


def test_cpu_job_stays_off_the_gpu_node(taugrid_cluster: TauGridScenario, tau_cli, repo: Path) -> None:
    scripts_of(taugrid_cluster.cluster).add({"job-name": "cpu-train"}, PodScript(pull_seconds=2, run_seconds=600))
    write_target(repo, "cpu-train", gpus=0)
    assert tau_cli("run", "cpu-train", *NS).exit_code == 0
    taugrid_cluster.cluster.advance(10)
    pod = only_pod(taugrid_cluster, "cpu-train")
    assert pod["spec"]["nodeName"].startswith("cpu-node-")
    assert pod["status"]["phase"] == "Running"
    assert flavors_of(taugrid_cluster, "cpu-train") == {CPU_FLAVOR}
