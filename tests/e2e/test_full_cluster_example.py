"""examples/full-cluster/run.sh as its README runs it on the simulator: bare nodes, the stand-in charts, the real
`tau-controller run`, and INSTALL=1 with a principal and a data claim to check.

The operator's path on any context: install, the readiness gate, GPU capacity, the workspace created and Ready,
checked (with its /data claim), its quota, and the researcher handoff line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tau_testing.paths import repo_root

pytestmark = [pytest.mark.realclock, pytest.mark.slow]  # the simulator, Helm and the controller run in real time

SCRIPT = repo_root() / "examples" / "full-cluster" / "run.sh"


@pytest.fixture
def platform(helm_bin: Path, kubectl_bin: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A bare-nodes `tau-sim serve`, a stand-in umbrella chart, and `tau-controller run` once the CRDs exist."""
    path = os.pathsep.join([str(Path(sys.executable).parent), str(helm_bin.parent), str(kubectl_bin.parent),
                            os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "kubeconfig"),
           "TAU_CONFIG_DIR": str(tmp_path / "tau-config"), "NO_COLOR": "1"}
    for key in ("TAU_CONTEXT", "TAU_SYSTEM_NAMESPACE"):
        env.pop(key, None)
    log = (tmp_path / "sim.log").open("w")
    procs = [subprocess.Popen(["tau-sim", "serve", "--kubeconfig", env["KUBECONFIG"], "--bare-nodes", "2"],
                              env=env, stdout=log, stderr=subprocess.STDOUT)]
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(["kubectl", "get", "nodes"], env=env, capture_output=True).returncode != 0:
            assert time.monotonic() < deadline and procs[0].poll() is None, (tmp_path / "sim.log").read_text()
            time.sleep(0.3)
        chart = subprocess.run(["tau-sim", "standin-chart", "--output", str(tmp_path / "charts"), "--upstream-crds"],
                               env=env, capture_output=True, text=True, check=True).stdout.strip()
        controller = ("until kubectl get crd clusters.tau.azure.com >/dev/null 2>&1; do sleep 0.3; done; exec "
                      "tau-controller run --health-probe-bind-address 127.0.0.1:0 --metrics-bind-address 127.0.0.1:0")
        procs.append(subprocess.Popen(["bash", "-c", controller], env=env, stdout=log, stderr=subprocess.STDOUT))
        yield {**env, "CHART": chart}
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
        log.close()


def test_full_cluster_example_installs_and_hands_off_a_ready_workspace(platform: dict[str, str]) -> None:
    env = {**platform, "INSTALL": "1", "PRINCIPAL": "aurora-researchers", "TAU_WORKSPACE": "aurora",
           "DATA_PVC": "blob-training"}
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=600)
    out = done.stdout
    assert done.returncode == 0, f"{out[-4000:]}\n{done.stderr[-3000:]}"
    assert "READY: 8/8 checks passed" in out
    assert "node-1" in out and "node-2" in out  # the GPU capacity listing names every node
    assert '# preflight passed: ClusterQueue "jobqueue" exists' in out
    assert "TauWorkspace tau-system/aurora created" in out
    assert "grants nobody access" not in out  # PRINCIPAL named the real group
    assert "phase:          Ready" in out
    assert 'warning: durable /data PVC "blob-training" not found in namespace "aurora"' in out
    assert "Workloads:    0 admitted, 0 pending, 0 reserving" in out and "Quota by flavor:" in out
    assert "--workspace aurora" in out and "--kube-context <researcher-context>" in out
