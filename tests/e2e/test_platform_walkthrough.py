"""The platform walkthrough end to end: examples/platform-walkthrough/run.sh with the real console scripts.

From a simulated cluster holding only nodes: `tau cluster install` (stand-in charts for Kueue/KubeRay, the real
`tau-controller run`) to READY; `tau workspace create --apply` and the controller's Ready; the researcher's
init-repo, connection, run, watch, logs and get (the run's report.json fetched from the data claim); quota show
while the run is admitted; a second workspace and a user outside the group refused; `tau cluster uninstall --yes` with the namespace and its claim kept.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tau_testing.paths import repo_root

pytestmark = [pytest.mark.realclock, pytest.mark.slow]  # the simulator, Helm and the controller run in real time


def _section(out: str, number: int) -> str:
    parts = re.split(r"^== \[[0-9.]+s\] ", out, flags=re.M)
    [part] = [p for p in parts if p.startswith(f"{number}.")]
    return part


def test_platform_walkthrough(helm_bin: Path, kubectl_bin: Path, tmp_path: Path) -> None:
    path = os.pathsep.join([str(Path(sys.executable).parent), str(helm_bin.parent), str(kubectl_bin.parent),
                            os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "TAU_WALKTHROUGH_DIR": str(tmp_path / "work"), "HOME": str(tmp_path)}
    for key in ("KUBECONFIG", "TAU_CONTEXT", "TAU_CONFIG_DIR"):
        env.pop(key, None)
    done = subprocess.run(["bash", str(repo_root() / "examples" / "platform-walkthrough" / "run.sh")],
                          capture_output=True, text=True, env=env, timeout=600)
    out = done.stdout
    assert done.returncode == 0, f"{out[-4000:]}\n{done.stderr[-3000:]}"
    assert "CRDs: 0" in _section(out, 0)
    assert "READY: 8/8 checks passed" in _section(out, 1)
    created = _section(out, 2)
    assert '# preflight passed: ClusterQueue "jobqueue" exists' in created
    assert "TauWorkspace tau-system/aurora created" in created
    assert "Workspace: aurora" in created and "phase:          Ready" in created
    assert 'warning: durable /data PVC "blob-training" in namespace "aurora" is not Bound' in created
    researcher = _section(out, 3)
    assert "created " in researcher and "tau/workspace.connection.yaml" in researcher
    assert "Connected." in researcher and "Status:        Ready" in researcher
    assert "submitted train" in researcher
    quota = _section(out, 4)
    assert re.search(r"Workloads:\s+1 admitted", quota), quota
    follow = _section(out, 5)
    assert "Result: succeeded" in follow
    assert "step 2 loss=0.31" in follow  # tau logs: the simulated container's output
    # tau run get: the scaffold's durable output on the data claim, listed and fetched through the helper pod
    assert "PATH: /data/projects/aurora/runs/train" in follow and "PVC:  blob-training" in follow
    assert re.search(r"^  report\.json  \(\d+ bytes\)$", follow, re.M), follow
    assert '"output": "/data/projects/aurora/runs/train"' in follow
    assert "error:" not in follow
    request = _section(out, 6)
    assert "TauQuotaRequest tau-system/aurora-cpu-quota-request created" in request
    # the admission guard (a ValidatingAdmissionPolicy) refuses a self-approved request: it never exists
    assert 'quotarequests "aurora-gpu-quota-request" is invalid' in request
    assert "Only platform administrators may set the quota decision annotations" in request
    assert not re.search(r"^aurora-gpu-quota-request\s", request, re.M)
    assert re.search(r"^aurora-cpu-quota-request\s+aurora\s+cpu\s+64\s+Approved", request, re.M), request
    refusals = _section(out, 7)
    assert "v0 supports one active workspace" in refusals and "forbidden" in refusals
    kept = _section(out, 8)
    assert "TauGrid Helm release removed." in kept
    assert re.search(r"^aurora\s+Active", kept, re.M) and re.search(r"^blob-training\s", kept, re.M)
    assert "the run's results remain on the claim" in kept
    work = tmp_path / "work"
    assert "Traceback" not in (work / "controller.log").read_text()
