"""`tau cluster install` on the simulated cluster, then a researcher's `tau run` admitted by the chart's queue.

The same path as examples/kind-smoke/smoke.sh, on the simulator: the real Helm installs the umbrella (local
stand-ins for the upstream Kueue/KubeRay charts), the simulator's Kueue admits against the chart's
ClusterQueue and flavors, and the Tau controller is the test stand-in that publishes the TauCluster status.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tau_testing.charts import DaemonSetStatus, TauClusterStandIn, build_test_umbrella
from tau_testing.sim.controllers.scheduler import add_node
from tau_testing.sim.scripts import PodScript, scripts_of


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    (root / "tau").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "train.py").write_text("print('training')\n")
    (root / "tau" / "train.yaml").write_text(
        "name: train\nengine: job\nentrypoint: ../train.py\n"
        "compute:\n  gpus: 0\n  cpu_request: \"1\"\n  memory_limit: 1Gi\n"
        "runtime:\n  image: ghcr.io/acme/train:1.0\npolicy:\n  queue: jobqueue\n")
    monkeypatch.chdir(root)
    return root


def test_install_then_a_run_is_admitted_by_the_baseline_queue(tau_cli, tau_env, sim_cluster_factory, helm_bin,
                                                              tmp_path, repo):
    cluster = sim_cluster_factory(tls=True)
    cluster.add_controller("daemonsets", DaemonSetStatus())
    cluster.add_controller("tau-controller-stand-in", TauClusterStandIn())
    add_node(cluster, "node-1", cpu="16", memory="64Gi")
    chart = build_test_umbrella(tmp_path / "umbrella", helm_bin)
    tau_env["KUBECONFIG"] = str(cluster.kubeconfig_path)
    tau_env["PATH"] = f"{helm_bin.parent}{os.pathsep}{os.environ.get('PATH', '')}"

    installed = tau_cli("cluster", "install", "--chart", str(chart), "--timeout", "2m")
    assert installed.exit_code == 0, installed.stderr
    assert "READY: 8/8 checks passed" in installed.stdout
    # What the controller does for a workspace: a labelled namespace and its LocalQueue on the baseline queue.
    cluster.store.create({"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": "research", "labels": {"tau.azure.com/workspace": "research"}}})
    cluster.store.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                          "metadata": {"name": "jobqueue", "namespace": "research"},
                          "spec": {"clusterQueue": "jobqueue"}})
    scripts_of(cluster).add({"job-name": "train"}, PodScript(run_seconds=5, logs=["step 1 loss=0.5"]))

    submitted = tau_cli("run", "train", "-n", "research")
    assert submitted.exit_code == 0, submitted.stderr
    status = tau_cli("run", "status", "train", "-n", "research")
    assert "1/1 admitted queue=jobqueue" in status.stdout, status.stdout
    [workload] = cluster.store.list("kueue.x-k8s.io/v1beta2", "Workload", "research")
    admission = workload["status"]["admission"]
    assert admission["clusterQueue"] == "jobqueue"
    assert admission["podSetAssignments"][0]["flavors"]["cpu"] == "taugrid-default-cpu"
