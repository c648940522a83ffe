"""The metrics offload sidecar shipping to Kusto, run as a real process: kill and restart, Kusto down, secrets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl

from tau_core.kql import MetricsFilter, metrics_query
from tau_testing.kusto import LoopbackKusto

MAIN = Path(__file__).with_name("sidecar_main.py")
SECRET = "s3cr3t-VALUE-9f8e7d6c"


def _chunks(history: Path, count: int, per: int) -> None:
    history.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        rows = "".join(json.dumps({"_step": s, "_timestamp": 1760000000.0 + s, "loss": 1.0 / (s + 1),
                                   "acc": s / 1000, "note": SECRET}) + "\n" for s in range(i * per, (i + 1) * per))
        tmp = history / f".c{i:03d}.tmp"
        tmp.write_text(rows)
        os.replace(tmp, history / f"c{i:03d}.jsonl")


def _start(kusto: LoopbackKusto, tmp_path: Path, run: str) -> subprocess.Popen[str]:
    args = ["experiment", "offload", "metrics", "--watch", "--run", run, "--project", "vision", "--experiment",
            "exp1", "--out", str(tmp_path / "out"), "--completion-file", str(tmp_path / "completion.json"),
            "--interval", "100ms", "--history", str(tmp_path / "hist" / "*.jsonl"), "--tag", "workspace=ws1",
            "--kusto-endpoint", kusto.query_url, "-o", "json", "--kusto-cluster", "aks-1", "--kusto-namespace", "team-a",
            "--store", str(tmp_path / "store")]
    env = {**os.environ, "AZURE_CLIENT_SECRET": SECRET, "TAU_METRICS_OFFLOAD_SECRET": SECRET}
    return subprocess.Popen([sys.executable, str(MAIN), *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait(what: str, ready: Callable[[], bool], proc: subprocess.Popen[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise AssertionError(f"the sidecar exited ({proc.returncode}) before {what}: {proc.stderr.read()}"
                                 if proc.stderr else what)
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _consumed(tmp_path: Path) -> int:
    try:
        return len(json.loads((tmp_path / "out" / "metrics_jsonl_checkpoint.json").read_text())["files"])
    except (OSError, ValueError):
        return 0


def _finish(proc: subprocess.Popen[str], tmp_path: Path) -> None:
    (tmp_path / "completion.json").write_text('{"state":"succeeded","completed_at":"2026-12-03T04:00:00Z"}')
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out.splitlines()[-1])["kusto_pending"] == 0, out
    assert "Traceback" not in err


def _kusto_steps(kusto: LoopbackKusto, run: str) -> list[int]:
    kusto.drain()
    rows = kusto.query(metrics_query(MetricsFilter(runs=(run,), metrics=("loss",), since="3650d",
                                                   target_points=100000)))
    return [int(r["step"]) for r in rows]


def _store_steps(store: Path, run: str) -> list[int]:
    files = sorted(store.glob(f"metrics/**/run={run}/*.parquet"))
    frame = pl.concat([pl.read_parquet(f) for f in files])
    return sorted(frame.filter(pl.col("metric_name") == "loss")["step"].to_list())


def test_sidecar_killed_mid_run_and_restarted_leaves_no_gap_and_no_duplicate(kusto_up: LoopbackKusto,
                                                                            tmp_path: Path) -> None:
    _chunks(tmp_path / "hist", 40, 5)
    proc = _start(kusto_up, tmp_path, "run-kill")
    try:
        _wait("a few chunks were checkpointed", lambda: _consumed(tmp_path) >= 3, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # wherever it died (before, during or after a chunk's import, send or checkpoint), the restart makes it whole
    restarted = _start(kusto_up, tmp_path, "run-kill")
    _wait("every chunk was checkpointed", lambda: _consumed(tmp_path) == 40, restarted)
    _finish(restarted, tmp_path)
    assert _kusto_steps(kusto_up, "run-kill") == list(range(200))
    events = [r for r in kusto_up.store.rows("TauExpMetricEventsV1") if r["run_id"] == "run-kill"]
    assert len([e for e in events if e["metric_name"] == "loss"]) == 200  # replays were skipped by ingest-by tag
    assert {(e["workspace_id"], e["cluster"], e["namespace"]) for e in events} == {("ws1", "aks-1", "team-a")}
    assert any(e["metric_name"] == "tau/run_status" and e["value"] == 1.0 for e in events)
    assert _store_steps(tmp_path / "store", "run-kill") == list(range(200))
    dumped = json.dumps([kusto_up.store.rows(t) for t in ("TauExpMetricEventsV1", "TauExpMetrics")], default=str)
    assert SECRET not in dumped  # neither the env values nor the string fields of the rows reach Kusto


def test_kusto_down_the_sidecar_buffers_then_catches_up(kusto_up: LoopbackKusto, tmp_path: Path) -> None:
    _chunks(tmp_path / "hist", 6, 5)
    kusto_up.endpoint.down = True
    proc = _start(kusto_up, tmp_path, "run-outage")
    try:
        _wait("every chunk was imported while Kusto is down", lambda: _consumed(tmp_path) == 6, proc)
        pending = tmp_path / "out" / "kusto-spool" / "pending"
        _wait("the batches are spooled", lambda: len(list(pending.glob("*.ndjson"))) == 6, proc)
        kusto_up.drain()
        assert not [r for r in kusto_up.store.rows("TauExpMetricEventsV1") if r["run_id"] == "run-outage"]
        assert _store_steps(tmp_path / "store", "run-outage") == list(range(30))  # the store does not wait for Kusto
        kusto_up.endpoint.down = False
        _wait("the backlog was sent", lambda: not list(pending.glob("*.ndjson")), proc)
        _finish(proc, tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _kusto_steps(kusto_up, "run-outage") == list(range(30))
