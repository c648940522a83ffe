"""examples/cpu-queueing/demo.sh with the real kubectl against the simulator's Kueue and KubeRay."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tau_testing.paths import repo_root

DEMO = repo_root() / "examples" / "cpu-queueing" / "demo.sh"
KUEUE = "kueue.x-k8s.io/v1beta2"


def _demo(kubectl_bin: Path, cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig_path),
           "PATH": f"{kubectl_bin.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("TAU_CONTEXT", None)
    return subprocess.run(["bash", str(DEMO), *args], capture_output=True, text=True, env=env, timeout=120)


def _admitted(workload: dict) -> bool:
    return any(c.get("type") == "Admitted" and c.get("status") == "True"
               for c in (workload.get("status") or {}).get("conditions") or [])


def test_single_queue_admits_one_rayjob_and_queues_the_other(kubectl_bin, sim_cluster_factory):
    from tau_testing.sim.controllers.scheduler import add_node

    cluster = sim_cluster_factory(tls=True)
    add_node(cluster, "node-1", cpu="16", memory="64Gi")
    done = _demo(kubectl_bin, cluster, "single")
    assert done.returncode == 0, done.stderr
    cluster.settle()
    workloads = cluster.store.list(KUEUE, "Workload", "kueue-ray-cpu")
    assert len(workloads) == 2
    assert sorted(_admitted(w) for w in workloads) == [False, True]  # 3 CPU of quota: one RayJob at a time
    cleaned = _demo(kubectl_bin, cluster, "cleanup")
    assert cleaned.returncode == 0, cleaned.stderr
    assert cluster.store.get(KUEUE, "ClusterQueue", None, "cpu-queueing") is None


def test_shared_context_guard(kubectl_bin, sim_cluster_factory):
    cluster = sim_cluster_factory(tls=True)
    cluster.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-x"}})
    cluster.store.create({"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "w", "namespace": "team-x"},
                          "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}})
    refused = _demo(kubectl_bin, cluster, "single")
    assert refused.returncode == 1
    assert "already runs 1 Kueue workload(s) outside this example" in refused.stderr
    assert cluster.store.get(KUEUE, "ClusterQueue", None, "cpu-queueing") is None
    allowed = _demo(kubectl_bin, cluster, "single", "--allow-shared-context")
    assert allowed.returncode == 0, allowed.stderr
    bad = _demo(kubectl_bin, cluster, "everything")
    assert bad.returncode == 2 and "usage:" in bad.stderr
