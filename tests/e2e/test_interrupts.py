"""Ctrl-C (SIGINT) during `tau run status --watch` and `tau logs -f`, against the simulated cluster.

The watch and the log follow run their streams in an anyio task group inside a blocking portal; an interrupt
lands in the command's own thread, cancels the task group and closes every stream.  The command exits 130
with its one-line message and no traceback, and the run keeps going.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tau_testing.sim.scenarios.taugrid import NAMESPACE
from tau_testing.sim.scripts import PodScript, scripts_of

NS = ["-n", NAMESPACE]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    (root / "tau").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "train.py").write_text("print('training')\n")
    monkeypatch.chdir(root)
    return root


def write_target(repo: Path, name: str) -> None:
    (repo / "tau" / f"{name}.yaml").write_text(
        f"name: {name}\nengine: job\nentrypoint: ../train.py\ncompute:\n  gpus: 0\n  cpu_request: \"1\"\n"
        "  memory_limit: 1Gi\nruntime:\n  image: ghcr.io/acme/train:1.0\npolicy:\n  queue: jobqueue\n")


def interrupt_once_printed(argv: list[str], marker: str, tau_env: dict[str, Any], cwd: Path) -> tuple[int, str, str]:
    """Start `tau ARGV`, send SIGINT once ``marker`` is on its stdout, and return (exit code, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAU_")}
    env.update({k: v for k, v in tau_env.items() if v is not None})
    env["PYTHONUNBUFFERED"] = "1"  # every frame and line reaches the pipe as it is printed
    proc = subprocess.Popen([sys.executable, "-c", "from tau_core.cli import main; main()", *argv], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = threading.Event()
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if marker in line:
                seen.set()
        seen.set()  # the stream ended: the assertions below report why

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert seen.wait(timeout=120), "the command printed nothing within 120 s"
        assert proc.poll() is None, f"the command ended before the interrupt: {lines} {proc.communicate()}"
        proc.send_signal(signal.SIGINT)
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    return proc.returncode, "".join(lines), err


@pytest.mark.realclock
def test_ctrl_c_stops_watching_cleanly(taugrid_factory, tau_env, tau_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    scenario = taugrid_factory(clock="real", time_scale=5)
    scripts_of(scenario.cluster).add({"job-name": "wi"}, PodScript(pull_seconds=10**6, run_seconds=600))
    write_target(repo, "wi")
    assert tau_cli("run", "wi", *NS).exit_code == 0
    code, out, err = interrupt_once_printed(["run", "status", "wi", *NS, "--watch", "--interval", "0.1s"],
                                            "[>] Image pull", tau_env, repo)
    assert code == 130, err
    assert f"stopped watching; {NAMESPACE}/wi keeps running (tau run status wi)" in err
    assert "Traceback" not in err and "Task exception" not in err and "never retrieved" not in err, err
    assert "Unclosed" not in err, err  # every connection was released
    assert f"watching {NAMESPACE}/wi every 0.1s" in out
    assert scenario.cluster.store.get("batch/v1", "Job", NAMESPACE, "wi") is not None  # the run keeps going


@pytest.mark.realclock
def test_ctrl_c_stops_following_logs_cleanly(taugrid_factory, tau_env, tau_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    scenario = taugrid_factory(clock="real", time_scale=5)
    lines = [f"step {i}" for i in range(1, 2000)]
    scripts_of(scenario.cluster).add({"job-name": "fi"}, PodScript(run_seconds=3600, logs=lines, log_every=1))
    write_target(repo, "fi")
    assert tau_cli("run", "fi", *NS).exit_code == 0
    code, out, err = interrupt_once_printed(["logs", "fi", *NS, "-f"], "step 2", tau_env, repo)
    assert code == 130, err
    assert "stopped following; fi keeps running" in err
    assert "Traceback" not in err and "Task exception" not in err and "never retrieved" not in err, err
    assert "Unclosed" not in err, err  # every connection was released
    assert out.splitlines()[:2] == ["step 1", "step 2"]
    job = scenario.cluster.store.get("batch/v1", "Job", NAMESPACE, "fi")
    assert job is not None
    ended = [c["type"] for c in job.get("status", {}).get("conditions") or [] if c.get("status") == "True"
             and c.get("type") in ("Complete", "Failed")]
    assert not ended  # the run keeps going
