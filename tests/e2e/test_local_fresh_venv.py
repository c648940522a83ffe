"""The README's first command in a fresh virtual environment: install the checkout, run the quickstart.

Slow (a real ``pip install`` of the distributions and their dependencies, about a minute with a warm
pip cache); it proves that the quickstart needs nothing beyond what the distributions declare.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DISTS = ["./tau-core", "./tau-plugins/tau-run", "./tau-plugins/tau-version", "./tau-portal"]


@pytest.mark.slow
def test_fresh_venv_installs_and_runs_the_quickstart(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAU_", "VIRTUAL_ENV", "PYTHON"))}
    env.update({"TAU_DATA_DIR": str(tmp_path / "home"), "NO_COLOR": "1", "HOME": str(tmp_path),
                "PATH": f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"})
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", *DISTS], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    started = time.monotonic()
    submit = subprocess.run([str(env_dir / "bin" / "tau"), "run", "train", "--local", "-o", "json"],
                            cwd=REPO / "examples" / "quickstart", env=env, capture_output=True, text=True, timeout=120)
    assert submit.returncode == 0, submit.stderr
    run = json.loads(submit.stdout)["run"]
    record_path = tmp_path / "home" / "runs" / run / "run.json"
    record: dict = {}
    while time.monotonic() - started < 120:
        record = json.loads(record_path.read_text())
        if record.get("evidence_done"):
            break
        time.sleep(0.2)
    assert record.get("state") == "Succeeded" and record.get("evidence_done"), record
    evidence = json.loads((record_path.parent / "evidence.json").read_text())
    assert evidence["marker"] and evidence["rows"] == 80 and Path(evidence["stellar"]).is_file(), evidence
