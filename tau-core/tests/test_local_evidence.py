"""The evidence bridge: chunk discovery, parsing, scalar records and the terminal marker.

The experiment store is found through the plugin host; here an inline plugin registers a sink that
keeps what it receives, so the bridge's side of the contract is checked without taugrid-portal:
a metrics-only sink (``write``/``close``) and a full one (``register_run``, ``update_status``,
``render_evidence``), in-process, never through a ``taugrid-portal`` subprocess.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tau_core.backends.local.evidence import STATUS_METRIC, EvidenceBridge, EvidenceError, parse_chunk
from tau_core.backends.local.registry import RunDir
from tau_core.fsutil import write_json_atomic
from tau_core.hookspecs import hookimpl
from tau_core.plugins import Host, set_host
from tau_core.telemetry import RunRegistration, RunStatusUpdate, ScalarRecord

RECEIVED: list[ScalarRecord] = []
OPENED: list[dict[str, Any]] = []
CALLS: list[tuple[str, Any]] = []


class KeepingSink:
    def __init__(self, **options: Any) -> None:
        OPENED.append(options)

    def write(self, records: list[ScalarRecord]) -> None:
        RECEIVED.extend(records)
        CALLS.append(("write", len(records)))

    def close(self) -> None:
        CALLS.append(("close", None))


class RecordingSink(KeepingSink):
    """A sink that records whole runs: registration, status and the evidence page."""

    def register_run(self, run: RunRegistration) -> None:
        CALLS.append(("register_run", run))

    def update_status(self, update: RunStatusUpdate) -> None:
        CALLS.append(("update_status", update))

    def render_evidence(self, run_id: str, out: Path) -> Path:
        CALLS.append(("render_evidence", run_id))
        Path(out).write_text(f"<html>{run_id}</html>")
        return Path(out)


class SinkPlugin:
    @hookimpl
    def tau_register_telemetry_sinks(self, register: Any) -> None:
        register("experiment-store", KeepingSink)


class RecordingSinkPlugin:
    @hookimpl
    def tau_register_telemetry_sinks(self, register: Any) -> None:
        register("experiment-store", RecordingSink)


def _with(plugin: object) -> Iterator[None]:
    RECEIVED.clear()
    OPENED.clear()
    CALLS.clear()
    previous = set_host(Host.create(entry_points=False, extra_plugins=[("sink", plugin)]))
    yield
    set_host(previous)


@pytest.fixture
def host_with_sink() -> Iterator[None]:
    yield from _with(SinkPlugin())


@pytest.fixture
def host_with_recording_sink() -> Iterator[None]:
    yield from _with(RecordingSinkPlugin())


@pytest.fixture
def bridge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EvidenceBridge:
    monkeypatch.setenv("TAU_DATA_DIR", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))  # no taugrid-portal CLI: nothing runs it anyway
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    write_json_atomic(run.run_file, {"run_id": "train-1", "created_at": "2026-01-01T00:00:00.000000Z"})
    plan = {"run_id": "train-1", "name": "train", "output_dir": str(tmp_path / "out"), "argv": ["python", "t.py"],
            "history": ["metrics/*.jsonl"], "experiment": {"project": "Quick Start", "name": "lin-reg",
                                                            "group": "default"}}
    (tmp_path / "out" / "metrics").mkdir(parents=True)
    return EvidenceBridge(run, plan)


def chunk(bridge: EvidenceBridge, name: str, *rows: dict[str, Any] | str) -> Path:
    path = bridge.output / "metrics" / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_chunks_become_scalar_records_once(host_with_sink: None, bridge: EvidenceBridge) -> None:
    chunk(bridge, "chunk-000000.jsonl", {"_step": 0, "_timestamp": 1760000000.125, "loss": 1.0, "accuracy": 0.0,
                                          "note": "text is skipped", "flag": True})
    chunk(bridge, ".chunk-000001.jsonl.tmp", {"_step": 1, "_timestamp": 1760000001.0, "loss": 0.5})
    assert bridge.poll(1) == 2
    assert OPENED == [{"store": str(bridge.store)}]
    names = sorted((r.metric_name, r.step, r.value) for r in RECEIVED)
    assert names == [("accuracy", 0, 0.0), ("loss", 0, 1.0)]
    rec = RECEIVED[0]
    assert rec.run_id == "train-1" and rec.project == "quick-start" and rec.run_group_id == "default"
    assert rec.wall_time is not None and rec.wall_time.timestamp() == pytest.approx(1760000000.125)
    assert rec.tags["jsonl.history_file"] == "chunk-000000.jsonl" and rec.tags["tau_retry_attempt"] == "0"
    assert bridge.poll(1) == 0  # already imported; the dotfile is still invisible
    chunk(bridge, "chunk-000001.jsonl", {"_step": 1, "_timestamp": 1760000001.0, "loss": 0.5})
    assert bridge.poll(1) == 1 and len(RECEIVED) == 3


def test_a_bad_chunk_is_reported_and_the_rest_imported(host_with_sink: None, bridge: EvidenceBridge) -> None:
    chunk(bridge, "chunk-a.jsonl", "{not json")
    chunk(bridge, "chunk-b.jsonl", {"_timestamp": 1760000000.0, "loss": 1.0})
    chunk(bridge, "chunk-c.jsonl", {"_step": 2, "_timestamp": 1760000002.0, "loss": 0.25})
    assert bridge.poll(1) == 1
    assert "missing required numeric _step" in bridge.state["error"]
    assert [r.value for r in RECEIVED] == [0.25]


def test_finish_writes_the_terminal_marker(host_with_sink: None, bridge: EvidenceBridge) -> None:
    chunk(bridge, "chunk-000000.jsonl", {"_step": 0, "_timestamp": 1760000000.0, "loss": 1.0})
    bridge.finish("Cancelled", "Unknown", "cancelled through tau run cancel", "/ckpt", 1)
    marker = [r for r in RECEIVED if r.metric_name == STATUS_METRIC]
    assert len(marker) == 1 and marker[0].value == -2.0 and marker[0].step == 0
    assert marker[0].tags["tau.status.state"] == "cancelled"
    assert marker[0].tags["tau.status.artifact_uri"] == bridge.output.as_uri()
    assert bridge.state["marker"] is True and bridge.state["rows"] == 1
    # a metrics-only sink: no run record, no page, and the bridge says where a page comes from
    assert bridge.state["registered"] is False
    assert "taugrid-portal" in bridge.state["stellar_error"] and "stellar" not in bridge.state


def test_a_full_sink_records_the_run_in_process(host_with_recording_sink: None, bridge: EvidenceBridge) -> None:
    chunk(bridge, "chunk-000000.jsonl", {"_step": 0, "_timestamp": 1760000000.0, "loss": 1.0})
    assert bridge.poll(1) == 1
    [(first, run)] = CALLS[:1]
    assert first == "register_run" and isinstance(run, RunRegistration)  # before the first metric
    assert (run.run_id, run.project, run.experiment_id, run.state) == ("train-1", "quick-start", "lin-reg", "running")
    assert run.idempotency_key == "tau-local-train-1" and run.result_uri == bridge.output.as_uri()
    assert run.tags == {"tau.backend": "local", "tau.target": "train"} and run.tau_command == "python t.py"
    assert run.created_at == "2026-01-01T00:00:00.000000Z"
    bridge.finish("Failed", "Error", "exit code 3", "/ckpt", 1)
    kinds = [k for k, _ in CALLS]
    assert kinds == ["register_run", "write", "write", "update_status", "render_evidence", "close"]
    update = CALLS[3][1]
    assert isinstance(update, RunStatusUpdate) and (update.run_id, update.state) == ("train-1", "failed")
    assert update.completed_at is not None and update.reason == "Error"
    page = Path(bridge.state["stellar"])
    assert page == bridge.run_dir.path / "stellar.html" and page.read_text() == "<html>train-1</html>"
    assert "stellar_error" not in bridge.state and bridge.state["registered"] is True


def test_a_restarted_bridge_does_not_register_again(host_with_recording_sink: None, bridge: EvidenceBridge) -> None:
    chunk(bridge, "chunk-000000.jsonl", {"_step": 0, "_timestamp": 1760000000.0, "loss": 1.0})
    bridge.poll(1)
    again = EvidenceBridge(bridge.run_dir, bridge.plan)  # the supervisor restarted: state from evidence.json
    chunk(again, "chunk-000001.jsonl", {"_step": 1, "_timestamp": 1760000001.0, "loss": 0.5})
    assert again.poll(1) == 1
    assert [k for k, _ in CALLS].count("register_run") == 1
    assert [r.step for r in RECEIVED] == [0, 1]  # the first chunk is not sent twice


def test_a_failing_registration_is_reported_and_metrics_still_flow(
        host_with_recording_sink: None, bridge: EvidenceBridge, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: RecordingSink, run: RunRegistration) -> None:
        raise RuntimeError("store is read-only")

    monkeypatch.setattr(RecordingSink, "register_run", refuse)
    chunk(bridge, "chunk-000000.jsonl", {"_step": 0, "_timestamp": 1760000000.0, "loss": 1.0})
    assert bridge.poll(1) == 1
    assert bridge.state["error"] == "recording the run: RuntimeError: store is read-only"
    assert not bridge.state.get("registered")


def test_without_a_store_the_bridge_says_why(bridge: EvidenceBridge) -> None:
    previous = set_host(Host.create(entry_points=False))
    try:
        chunk(bridge, "chunk-000000.jsonl", {"_step": 0, "_timestamp": 1760000000.0, "loss": 1.0})
        assert bridge.poll(1) == 0
        assert "pip install taugrid-portal" in bridge.state["unavailable"]
    finally:
        set_host(previous)


@pytest.mark.parametrize(("line", "message"), [
    ('[1, 2]', "exactly one JSON object"),
    ('{"_step": "1", "_timestamp": 1.0}', "_step"),
    ('{"_step": 1, "_timestamp": -5}', "_timestamp"),
    ('{"_step": 1}', "_timestamp"),
])
def test_parse_chunk_rejects_malformed_rows(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(EvidenceError, match=message):
        parse_chunk(path)
