"""`tau-sim serve --volumes-dir`: claims backed by host directories, written by Job pods, read by helper pods."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tau_testing.sim.volumes import HostVolumes


def _job_pod(output: str, claim: str = "blob-training", mount: str = "/data") -> dict[str, Any]:
    return {"metadata": {"name": "train-abc", "namespace": "aurora"},
            "spec": {"containers": [{"name": "main", "env": [{"name": "OUTPUT_DIR", "value": output}],
                                     "volumeMounts": [{"name": "data", "mountPath": mount}]}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}


def _helper_pod(mode: str, target: str) -> dict[str, Any]:
    env = [{"name": "TAU_GET_MODE", "value": mode}, {"name": "TAU_GET_ROOT", "value": "/tau-pvc/data/runs/train"},
           {"name": "TAU_GET_TARGET", "value": target}]
    return {"metadata": {"name": "tau-get-x", "namespace": "aurora"},
            "spec": {"containers": [{"name": "get", "env": env}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "blob-training"}}]}}


def test_job_pod_writes_its_report_and_the_helper_reads_it(tmp_path: Path) -> None:
    volumes = HostVolumes(tmp_path)
    lines = volumes.job_container(["done"])(_job_pod("/data/runs/train"), "main")
    assert lines == ["done", "wrote /data/runs/train/report.json (simulated container)"]
    report = tmp_path / "aurora" / "blob-training" / "runs" / "train" / "report.json"
    assert json.loads(report.read_text())["pod"] == "train-abc"
    listing = volumes.helper_output(_helper_pod("list", "/tau-pvc/data/runs/train"), "get")
    assert listing[0].startswith("F ") and base64.b64decode(listing[0].split()[2]) == b"report.json"
    fetched = volumes.helper_output(_helper_pod("file", "/tau-pvc/data/runs/train/report.json"), "get")
    assert fetched[0] == "TAU_PVC_GET_BEGIN" and b'"simulated": true' in base64.b64decode("".join(fetched[1:-1]))


@pytest.mark.parametrize("pod", [_job_pod("/data/../../../escape"), _job_pod("/tmp/out"),
                                 _job_pod("/data/runs/x", claim="../../escape"), _job_pod("/data/x", mount="/mnt")])
def test_nothing_is_written_outside_a_claim(tmp_path: Path, pod: dict[str, Any]) -> None:
    root = tmp_path / "volumes"
    assert HostVolumes(root).job_container(["done"])(pod, "main") == ["done"]
    assert not any(tmp_path.rglob("report.json"))


def test_helper_refuses_targets_outside_the_claim(tmp_path: Path) -> None:
    volumes = HostVolumes(tmp_path)
    (tmp_path / "secret.txt").write_text("no")
    assert volumes.helper_output(_helper_pod("file", "/tau-pvc/data/../../../secret.txt"), "get") == \
        ["TAU_PVC_GET_NOT_FOUND"]
