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


def test_sink_registers_a_run_updates_its_status_and_renders_its_page(host, tmp_path):
    """What the local backend does through the hook, against the real store (SQLite, Parquet, HTML)."""
    from datetime import UTC, datetime

    from tau_core.telemetry import RunRegistration, RunStatusUpdate, status_record

    config = tmp_path / "tau.yaml"
    config.write_text("train:\n  lr: 0.1\n")
    factory = host.registry("telemetry_sinks")["experiment-store"].load()
    sink = factory(store=tmp_path / "store")
    run = RunRegistration(run_id="train-1", project="quick-start", run_group_id="default", experiment_id="lin-reg",
                          owner="alice", created_at="2026-01-01T00:00:00.000000Z", config_path=str(config),
                          result_uri=(tmp_path / "out").as_uri(), log_uri=(tmp_path / "log").as_uri(),
                          tau_command="python train.py", tags={"tau.backend": "local"},
                          idempotency_key="tau-local-train-1")
    first = sink.register_run(run)
    assert first["created_run"] and not first["reused"]
    assert sink.register_run(run)["reused"]  # a restarted bridge registers again: a no-op
    recorded = sink.store.run("train-1")
    assert (recorded.state, recorded.owner, recorded.experiment_id) == ("running", "alice", "lin-reg")
    assert recorded.result_uri == run.result_uri and recorded.tags["tau.backend"] == "local"
    assert sink.store.run_context("train-1")["log_uri"] == run.log_uri
    assert [c["format"] for c in sink.store.configs("train-1")] == ["yaml"]
    sink.write([{"run_id": "train-1", "project": "quick-start", "metric_name": "loss", "step": 0, "value": 1.0}])
    done = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    sink.write([status_record(run_id="train-1", project="quick-start", run_group_id="default",
                              experiment_id="lin-reg", state="failed", completed_at=done, source="t")])
    assert not sink.update_status(RunStatusUpdate(run_id="train-1", state="failed", completed_at=done))
    assert sink.store.run("train-1").state == "failed"  # the marker closed it; the update is a no-op
    page = sink.render_evidence("train-1", tmp_path / "stellar.html")
    text = page.read_text()
    assert page == tmp_path / "stellar.html" and "train-1" in text and run.result_uri in text
    assert not list(tmp_path.glob(".stellar.html*"))  # written atomically: no temporary left behind
    sink.close()


def test_status_update_closes_an_open_run_once(host, tmp_path):
    from datetime import UTC, datetime

    from tau_core.errors import NotFoundError
    from tau_core.telemetry import RunStatusUpdate

    sink = host.registry("telemetry_sinks")["experiment-store"].load()(store=tmp_path / "store", project="demo")
    sink.write([{"run_id": "r1", "metric_name": "loss", "step": 1, "value": 0.5}])
    when = datetime(2026, 2, 1, tzinfo=UTC)
    assert sink.update_status(RunStatusUpdate(run_id="r1", state="cancelled", completed_at=when))
    closed = sink.store.run("r1")
    assert closed.state == "cancelled" and closed.completed_at.startswith("2026-02-01T00:00:00")
    assert not sink.update_status(RunStatusUpdate(run_id="r1", state="succeeded"))
    assert sink.store.run("r1").state == "cancelled"
    with pytest.raises(NotFoundError):
        sink.update_status(RunStatusUpdate(run_id="nope", state="failed"))
    sink.close()
