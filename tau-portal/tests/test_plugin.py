"""The store reached through the tau plugin host, as another plugin would."""

from __future__ import annotations

import pytest

from tau_core.errors import UsageError
from tau_core.plugins import Host


@pytest.fixture
def host() -> Host:
    return Host.create(entry_points=True, env={})


def test_entry_point_registers_backend_and_sink(host):
    [info] = [p for p in host.plugins if p.name == "portal"]
    assert info.status == "loaded" and info.dist == "taugrid-portal"
    assert {"tau_register_storage_backends", "tau_register_telemetry_sinks"} <= set(info.hooks)
    assert host.registry("storage_backends")["experiment-store"].dist == "taugrid-portal"
    assert host.registry("telemetry_sinks")["experiment-store"].dist == "taugrid-portal"


def test_storage_backend_round_trip_and_key_confinement(host, tmp_path):
    factory = host.registry("storage_backends")["experiment-store"].load()
    backend = factory(root=tmp_path / "store", project="demo")
    backend.put("run-1/reports/eval.json", b'{"acc": 0.9}')
    assert backend.get("run-1/reports/eval.json") == b'{"acc": 0.9}'
    assert backend.exists("run-1/reports/eval.json") and backend.list("run-1") == ["run-1/reports/eval.json"]
    for bad in ("../escape", "/etc/passwd", "run-1/../../x", "a\\b", ""):
        with pytest.raises(UsageError):
            backend.put(bad, b"x")
    assert not (tmp_path / "escape").exists()
    assert backend.store.project == "demo"
    backend.close()


def test_telemetry_sink_writes_idempotently(host, tmp_path):
    factory = host.registry("telemetry_sinks")["experiment-store"].load()
    sink = factory(store=tmp_path / "store", project="demo")
    records = [{"project": "demo", "run_group_id": "g", "run_id": "r1", "metric_name": "loss", "step": i,
                "wall_time": 1760000000 + i, "value": 1 / (i + 1), "unit": None, "source": "trainer",
                "split": "train", "tags": {"tau_workspace": "ws"}} for i in range(5)]
    assert sink.write(records)["rows"] == 5
    assert sink.write(records)["reused"] == 1
    [summary] = sink.store.summaries(["r1"])
    assert summary["count"] == 5 and summary["latest_step"] == 4
    assert sink.store.run("r1").state == "running"
    frame = sink.store.series(["r1"], "loss")
    assert frame["step"].to_list() == [0, 1, 2, 3, 4]
    sink.close()


@pytest.mark.parametrize(("marker", "state"), [(1.0, "succeeded"), (-1.0, "failed"), (-2.0, "cancelled")])
def test_terminal_run_status_marker_closes_a_running_run(host, tmp_path, marker, state):
    factory = host.registry("telemetry_sinks")["experiment-store"].load()
    sink = factory(store=tmp_path / "store", project="demo")
    sink.write([{"run_id": "r1", "metric_name": "loss", "step": 1, "value": 0.5}])
    assert sink.store.run("r1").state == "running"
    sink.write([{"run_id": "r1", "metric_name": "tau/run_status", "step": 2, "value": marker}])
    closed = sink.store.run("r1")
    assert closed.state == state and closed.completed_at
    # a later marker does not rewrite a terminal state
    sink.write([{"run_id": "r1", "metric_name": "tau/run_status", "step": 3, "value": 1.0 if marker != 1.0 else -1.0}])
    assert sink.store.run("r1").state == state
    sink.close()
