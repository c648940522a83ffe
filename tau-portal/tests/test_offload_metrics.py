"""``experiment offload metrics``: the rendered sidecar's exact command, strict rows, per-chunk checkpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from taugrid_portal import offload

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / "portal-ray-stellar" / "train.yaml"


def _chunk(directory: Path, name: str, steps: range, ts0: float = 1760000000.0, **extra: Any) -> Path:
    """One closed chunk, written the way the trainer does: a dotfile, then an atomic rename."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = "".join(json.dumps({"_step": s, "_timestamp": ts0 + s, "loss": 1.0 / (s + 1), **extra}) + "\n"
                   for s in steps)
    tmp = directory / f".{name}.tmp"
    tmp.write_text(rows)
    os.replace(tmp, directory / name)
    return directory / name


def _steps(store_dir: Path, run: str) -> list[int]:
    import polars as pl

    from taugrid_portal.store import ExperimentStore

    with ExperimentStore.open(store_dir) as s:
        files = [store_dir / r["path"] for r in s.query("SELECT path FROM metric_files WHERE run_id = ?", (run,))]
    if not files:
        return []
    frame = pl.concat([pl.read_parquet(f) for f in files])
    return sorted(frame.filter(pl.col("metric_name") == "loss")["step"].to_list())


def _sidecar_args() -> tuple[list[str], dict[str, str]]:
    doc = yaml.safe_load(GOLDEN.read_text())
    containers = doc["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
    sidecar = next(c for c in containers if c["name"] == "metrics-offload")
    env = {e["name"]: e["value"] for e in sidecar["env"] if "value" in e}
    return [*sidecar["command"], *sidecar["args"]], env


def _remap(values: list[str], root: Path) -> list[str]:
    return [v.replace("/data/", f"{root}/data/")
            .replace("/var/run/tau", f"{root}/var/run/tau") for v in values]


def test_the_rendered_sidecar_command_runs_to_completion(tmp_path: Path) -> None:
    argv, env = _sidecar_args()
    assert argv[:5] == ["taugrid-portal", "experiment", "offload", "metrics", "--watch"]
    argv = _remap(argv, tmp_path)
    argv[argv.index("--interval") + 1] = "100ms"  # the only change: the rendered 10s would make the test slow
    history = Path(argv[argv.index("--history") + 1]).parent
    store = Path(_remap([env["TAU_EXP_STORE"]], tmp_path)[0])
    _chunk(history, "old.jsonl", range(0, 5))  # from before this attempt: the baseline skips it
    exe = Path(sys.executable).with_name("taugrid-portal")
    proc = subprocess.Popen([str(exe), *argv[1:]], env={**os.environ, "TAU_EXP_STORE": str(store)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = Path(argv[argv.index("--ready-file") + 1])
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the sidecar never became ready"
            time.sleep(0.05)
        assert ready.read_text() == "ready\n"
        for i in range(3):
            _chunk(history, f"chunk-{i}.jsonl", range(10 + 10 * i, 20 + 10 * i))
        completion = Path(argv[argv.index("--completion-file") + 1])
        completion.write_text('{"state":"succeeded","reason":"exit-code","message":"exit code 0",'
                              '"completed_at":"2026-12-03T04:00:00Z"}\n')
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert Path(argv[argv.index("--done-file") + 1]).read_text() == "done\n"
    assert _steps(store, "portal-ray-stellar") == list(range(10, 40))
    checkpoint = json.loads(Path(argv[argv.index("--out") + 1], "metrics_jsonl_checkpoint.json").read_text())
    assert checkpoint["schema_version"] == "tau.metrics.offload.v1" and len(checkpoint["files"]) == 4
    assert "ITERATION" in out and "true" in out.splitlines()[-1]
    from taugrid_portal.store import ExperimentStore

    with ExperimentStore.open(store) as s:
        assert s.query("SELECT state FROM runs WHERE run_id = 'portal-ray-stellar'")[0]["state"] == "succeeded"
    status = json.loads(Path(argv[argv.index("--out") + 1], "metrics-status", "status.json").read_text())
    assert status["state"] == "succeeded" and status["artifact_uri"] == f"file://{tmp_path}/data/projects/" \
        "taugrid-default/runs/portal-ray-stellar"


def _args(tmp_path: Path, *extra: str) -> list[str]:
    return ["experiment", "offload", "metrics", "--run", "r1", "--experiment", "e1", "--out", str(tmp_path / "out"),
            "--history", str(tmp_path / "hist" / "*.jsonl"), "--store", str(tmp_path / "store"), *extra]


def test_a_malformed_chunk_is_fatal_and_not_checkpointed(portal: Callable[..., Any], tmp_path: Path) -> None:
    _chunk(tmp_path / "hist", "a.jsonl", range(0, 3))
    bad = _chunk(tmp_path / "hist", "b.jsonl", range(3, 5))
    bad.write_text(bad.read_text() + '{"_step": 5, "loss": 0.1}\n')
    result = portal(*_args(tmp_path))
    assert result.exit_code == 1
    assert f"direct online metrics history {bad} line 3: missing required numeric _timestamp field" in result.stderr
    assert "Traceback" not in result.stderr
    marks = offload.load_checkpoint(tmp_path / "out")
    assert str(tmp_path / "hist" / "a.jsonl") in marks and str(bad) not in marks
    assert _steps(tmp_path / "store", "r1") == [0, 1, 2]
    bad.write_text(bad.read_text().replace('"loss": 0.1}', '"_timestamp": 1760000005.0, "loss": 0.1}'))
    assert portal(*_args(tmp_path)).exit_code == 0
    assert _steps(tmp_path / "store", "r1") == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize(("row", "message"), [
    ('{"_step": 1.5, "_timestamp": 1760000000, "loss": 1}', "_step must be an integer representable as int64"),
    ('{"_step": "1", "_timestamp": 1760000000, "loss": 1}', "_step must be numeric"),
    ('{"_step": 1, "_timestamp": -3, "loss": 1}', "_timestamp must be a valid positive Unix epoch-seconds value"),
    ('{"_step": 1, "_timestamp": 1760000000, "loss": NaN}', "metric 'loss' must be a finite number"),
    ("[1, 2]", "row must contain exactly one JSON object"),
    ('{"_step": 1,', "invalid JSON"),
])
def test_online_row_rules(row: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(offload.OffloadError, match="line 2: " + message.replace("(", r"\(")):
        offload.parse_online(b'{"_step": 0, "_timestamp": 1760000000, "loss": 1}\n' + row.encode() + b"\n",
                             tmp_path / "h.jsonl", 1)
    assert len(offload.parse_online(b'{}\n{"_note": "x"}\n', tmp_path / "h.jsonl", 1)) == 0  # skipped, not fatal


def test_replay_and_a_crash_before_the_checkpoint_leave_no_duplicates(portal: Callable[..., Any], tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(3):
        _chunk(tmp_path / "hist", f"c{i}.jsonl", range(i * 4, i * 4 + 4))
    real_save, calls = offload.save_checkpoint, []

    def crash_on_second(out: Path, marks: dict[str, Any]) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed after the import, before the checkpoint")
        real_save(out, marks)

    monkeypatch.setattr(offload, "save_checkpoint", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        offload.watch(_options(tmp_path), offload.open_targets(_options(tmp_path)), lambda *a: None)
    monkeypatch.setattr(offload, "save_checkpoint", real_save)
    assert portal(*_args(tmp_path)).exit_code == 0  # the restart redoes chunk 2: the store reuses its import
    assert _steps(tmp_path / "store", "r1") == list(range(12))
    (tmp_path / "out" / offload.CHECKPOINT).unlink()  # a full replay from scratch
    assert portal(*_args(tmp_path, "-o", "json")).exit_code == 0
    assert _steps(tmp_path / "store", "r1") == list(range(12))


def _options(tmp_path: Path) -> Any:
    from taugrid_portal.offload_cli import build_options

    return build_options({"out": str(tmp_path / "out"), "history": (str(tmp_path / "hist" / "*.jsonl"),),
                          "run": "r1", "experiment": "e1", "watch": False, "max_iterations": 0, "baseline": False,
                          "store": str(tmp_path / "store")})


def test_watch_reads_unset_flags_from_the_environment(portal: Callable[..., Any], tmp_path: Path) -> None:
    _chunk(tmp_path / "hist", "a.jsonl", range(2))
    (tmp_path / "done.json").write_text('{"state": "failed"}')
    env = {"TAU_METRICS_OFFLOAD_RUN": "env-run", "TAU_METRICS_OFFLOAD_EXPERIMENT": "env-exp",
           "TAU_METRICS_OFFLOAD_OUT": str(tmp_path / "out"), "TAU_METRICS_HISTORY": str(tmp_path / "hist" / "*"),
           "TAU_METRICS_OFFLOAD_COMPLETION_FILE": str(tmp_path / "done.json"),
           "TAU_METRICS_OFFLOAD_INTERVAL": "50ms", "TAU_EXP_STORE": str(tmp_path / "store")}
    result = portal("experiment", "offload", "metrics", "--watch", env=env)
    assert result.exit_code == 0, result.stderr
    assert _steps(tmp_path / "store", "env-run") == [0, 1]


@pytest.mark.parametrize(("args", "message"), [
    (["--history", "h"], "--out is required"),
    (["--out", "o", "--watch", "--interval", "1s"], "--watch and --baseline-existing-history need --history"),
    (["--out", "o", "--remote-write-max-attempts", "-1"], "--remote-write-max-attempts must be non-negative"),
    (["--out", "o", "--remote-write-batch-size", "0"], "--remote-write-batch-size must be positive"),
    (["--out", "o", "--remote-write-endpoint", "http://${TAU_TEST_UNSET_NODE_IP}:3100/receive"],
     "a variable in it is not set"),
    (["--out", "o", "--history", "h"], "--run is required with --history"),
    (["--out", "o", "--history", "h", "--run", "r"], "--experiment is required with --history"),
    (["--out", "o", "--history", "h", "--run", "r", "--experiment", "e", "--max-iterations", "-1"],
     "--max-iterations must be non-negative"),
    (["--out", "o", "--history", "h", "--run", "r", "--experiment", "e", "--interval", "soon", "--store", "s"],
     "--interval 'soon' is not a duration"),
])
def test_usage_errors(portal: Callable[..., Any], args: list[str], message: str) -> None:
    result = portal("experiment", "offload", "metrics", *args)
    assert result.exit_code == 2 and message in result.stderr


def test_kusto_schema_and_queries_come_from_one_column_definition(portal: Callable[..., Any]) -> None:
    from tau_core.exptelemetry import EVENT_COLUMNS, LIFECYCLE_COLUMNS

    schema = portal("experiment", "kusto", "schema").stdout
    assert ".create-merge table TauExpMetricEventsV1 (" + ", ".join(
        f"{c.name}:{c.kusto_type}" for c in EVENT_COLUMNS) + ")" in schema
    assert '"column":"observed_at","path":"$.observed_at","datatype":"datetime"' in schema
    assert len([c for c in LIFECYCLE_COLUMNS if f"{c.name}:{c.kusto_type}" in schema]) == len(LIFECYCLE_COLUMNS)
    for name in ("TauExpMetricEventsV1Dedup", "TauExpMetricEventRows", "TauExpMetricsDashboardRows",
                 "TauExpRunLifecycleDashboardRows", "ExperimentMetricsDashboardRows", 'folder = "Tau/experiments"'):
        assert name in schema
    lifecycle = portal("experiment", "kusto", "schema", "--ingestion", "lifecycle").stdout
    assert "TauExpMetricEventsV1" not in lifecycle and "TauExpRunLifecycleMapping" in lifecycle
    query = portal("experiment", "kusto", "metrics-query", "--run", "r1", "--run", 'r"2', "--since", "3d").stdout
    assert 'where run_id in ("r1", "r\\"2")' in query and "summarize arg_max(exported_at, *) by event_id" in query
    doc = portal("experiment", "kusto", "metrics-query", "-o", "json").json()
    assert doc["target_points"] == 12000 and doc["database"] == "Metrics"
    assert "stale" in portal("experiment", "kusto", "lifecycle-query", "--target", "r1").stdout
    for args, message in ((["schema", "--ingestion", "x"], "--ingestion must be"),
                          (["schema", "--run-lifecycle-table", "a-b"], "--run-lifecycle-table must be a Kusto identifier"),
                          (["metrics-query", "--target-points", "5"], "--target-points must be at least 100"),
                          (["lifecycle-query", "--target-type", "x"], "--target-type must be auto")):
        result = portal("experiment", "kusto", *args)
        assert result.exit_code == 2 and message in result.stderr
