"""`tau-sim serve --bare-nodes`: an API server holding only nodes, as `tau cluster install` starts from."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml


def _wait_for(path: Path, process: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "tau-sim serve did not write its kubeconfig"
        time.sleep(0.1)


def test_bare_nodes_serves_nodes_and_nothing_else(kubectl_bin: Path, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen([sys.executable, "-m", "tau_testing.sim.cli", "serve", "--kubeconfig", str(kubeconfig),
                                "--bare-nodes", "2", "--add-user", "researcher=aurora-researchers",
                                "--add-user", "outsider"], stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(kubeconfig, process)

        def kubectl(*args: str) -> str:
            done = subprocess.run([str(kubectl_bin), "--kubeconfig", str(kubeconfig), *args], capture_output=True,
                                  text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            return done.stdout

        assert kubectl("get", "nodes", "-o", "name").split() == ["node/node-1", "node/node-2"]
        assert kubectl("get", "crd", "-o", "name").strip() == ""
        namespaces = set(kubectl("get", "namespaces", "-o", "name").split())
        assert "namespace/tau-system" not in namespaces
        contexts = [c["name"] for c in yaml.safe_load(kubeconfig.read_text())["contexts"]]
        admin = yaml.safe_load(kubeconfig.read_text())["current-context"]
        assert f"{admin}-researcher" in contexts and f"{admin}-outsider" in contexts
    finally:
        process.terminate()
        process.wait(30)


def test_bad_user_spec_is_an_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tau_testing.sim.cli", "serve", "--kubeconfig",
                           str(tmp_path / "kc"), "--add-user", "a b=g"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "--add-user" in done.stderr
    assert not (tmp_path / "kc").exists()


@pytest.mark.parametrize("upstream", [False, True])
def test_standins_carry_upstream_crds_only_when_asked(tmp_path: Path, upstream: bool) -> None:
    from tau_testing.charts import write_standin

    chart = write_standin(tmp_path, "kueue", upstream_crds=upstream)
    crds = sorted(p.name for p in (chart / "crds").glob("*.yaml")) if (chart / "crds").exists() else []
    assert ("kueue.x-k8s.io_clusterqueues.yaml" in crds) is upstream
