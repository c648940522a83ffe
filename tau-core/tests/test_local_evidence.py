"""The evidence bridge: chunk discovery, parsing, scalar records and the terminal marker.

The experiment store is found through the plugin host; here an inline plugin registers a sink that
keeps what it receives, so the bridge's side of the contract is checked without taugrid-portal.
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

RECEIVED: list[dict[str, Any]] = []
OPENED: list[dict[str, Any]] = []


class KeepingSink:
    def __init__(self, **options: Any) -> None:
        OPENED.append(options)

    def write(self, records: list[dict[str, Any]]) -> None:
        RECEIVED.extend(records)

    def close(self) -> None:
        pass


class SinkPlugin:
    @hookimpl
    def tau_register_telemetry_sinks(self, register: Any) -> None:
        register("experiment-store", KeepingSink)


@pytest.fixture
def host_with_sink() -> Iterator[None]:
    RECEIVED.clear()
    OPENED.clear()
    previous = set_host(Host.create(entry_points=False, extra_plugins=[("keeping-sink", SinkPlugin())]))
    yield
    set_host(previous)


@pytest.fixture
def bridge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EvidenceBridge:
    monkeypatch.setenv("TAU_DATA_DIR", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))  # no taugrid-portal CLI: no Stellar page
    monkeypatch.setattr("tau_core.backends.local.evidence.find_portal_cli", lambda: None)
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
    names = sorted((r["metric_name"], r["step"], r["value"]) for r in RECEIVED)
    assert names == [("accuracy", 0, 0.0), ("loss", 0, 1.0)]
    rec = RECEIVED[0]
    assert rec["run_id"] == "train-1" and rec["project"] == "quick-start" and rec["run_group_id"] == "default"
    assert rec["wall_time"].timestamp() == pytest.approx(1760000000.125)
    assert bridge.poll(1) == 0  # already imported; the dotfile is still invisible
    chunk(bridge, "chunk-000001.jsonl", {"_step": 1, "_timestamp": 1760000001.0, "loss": 0.5})
    assert bridge.poll(1) == 1 and len(RECEIVED) == 3


def test_a_bad_chunk_is_reported_and_the_rest_imported(host_with_sink: None, bridge: EvidenceBridge) -> None:
    chunk(bridge, "chunk-a.jsonl", "{not json")
    chunk(bridge, "chunk-b.jsonl", {"_timestamp": 1760000000.0, "loss": 1.0})
    chunk(bridge, "chunk-c.jsonl", {"_step": 2, "_timestamp": 1760000002.0, "loss": 0.25})
    assert bridge.poll(1) == 1
    assert "missing required numeric _step" in bridge.state["error"]
    assert [r["value"] for r in RECEIVED] == [0.25]


def test_finish_writes_the_terminal_marker(host_with_sink: None, bridge: EvidenceBridge) -> None:
    chunk(bridge, "chunk-000000.jsonl", {"_step": 0, "_timestamp": 1760000000.0, "loss": 1.0})
    bridge.finish("Cancelled", "Unknown", "cancelled through tau run cancel", "/ckpt", 1)
    marker = [r for r in RECEIVED if r["metric_name"] == STATUS_METRIC]
    assert len(marker) == 1 and marker[0]["value"] == -2.0 and marker[0]["step"] == 0
    assert marker[0]["tags"]["tau.status.state"] == "cancelled"
    assert marker[0]["tags"]["tau.status.artifact_uri"] == bridge.output.as_uri()
    assert bridge.state["marker"] is True and bridge.state["rows"] == 1
    assert "taugrid-portal" in bridge.state["stellar_error"]


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
