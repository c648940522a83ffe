from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Git repository as the working directory, with private tau data directories."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(root)
    monkeypatch.setenv("TAU_DATA_DIR", str(tmp_path / "tau-data"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    for name in ("TAU_CLUSTER_JOB", "TAU_BINARY", "TAU_CONTEXT", "TAU_OUTPUT_DIR", "TAU_EXP_STORE"):
        monkeypatch.delenv(name, raising=False)
    return root
