"""The Kusto telemetry sink against the loopback endpoint: typed events, replay safety, buffering, no secrets."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from tau_core.exptelemetry import EventContext, event_id, to_event
from tau_core.kql import MetricsFilter, metrics_query
from tau_core.plugins import get_host
from tau_core.telemetry import ScalarRecord
from tau_kusto.sink import FILE_ID_TAG, KustoSink, ingest_endpoint_of
from tau_testing.kusto import LoopbackKusto, StaticToken

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _records(run: str, steps: range, **tags: str) -> list[ScalarRecord]:
    return [ScalarRecord(run_id=run, metric_name=name, value=step * 0.5 + i, step=step,
                         wall_time=T0 + timedelta(seconds=step), project="vision", run_group_id="arm-a",
                         experiment_id="exp1", source="stellar-online", tags={FILE_ID_TAG: "chunk-1", **tags})
            for step in steps for i, name in enumerate(("loss", "accuracy"))]


def _sink(kusto: LoopbackKusto, spool: Path | None) -> KustoSink:
    return KustoSink(kusto.query_url, spool=spool, credential=StaticToken(), workspace_id="ws1", cluster="aks-1",
                     namespace="team-a")


def _points(kusto: LoopbackKusto, run: str) -> list[tuple[str, int, float]]:
    got = kusto.query(metrics_query(MetricsFilter(runs=(run,), since="3650d")))
    return [(r["metric_name"], r["step"], r["value"]) for r in got]


def _raw(kusto: LoopbackKusto, table: str, run: str) -> list[dict[str, Any]]:
    return [r for r in kusto.store.rows(table) if r["run_id"] == run]


def test_the_sink_is_registered_through_the_hook() -> None:
    registry = get_host().registry("telemetry_sinks")
    assert "kusto" in registry
    assert registry["kusto"].load() is KustoSink


def test_event_id_is_deterministic_and_ignores_delivery_metadata() -> None:
    record = _records("r0", range(1))[0]
    a = to_event(record, EventContext(workspace_id="ws1"), T0)
    b = to_event(attrs.evolve(record, tags={"other": "x"}), EventContext(workspace_id="ws1"),
                 T0 + timedelta(hours=1))
    assert a.event_id == b.event_id and a.event_id.startswith("metric-")
    assert to_event(record, EventContext(workspace_id="ws2"), T0).event_id != a.event_id
    with pytest.raises(ValueError, match="step must be >= 0"):
        to_event(attrs.evolve(record, step=-1), EventContext(), T0)
    assert a.event_id == event_id(a.row() | {"wall_time": a.wall_time})


def test_write_ingests_typed_events_and_the_projection(kusto_up: LoopbackKusto, tmp_path: Path) -> None:
    sink = _sink(kusto_up, tmp_path / "spool")
    result = sink.write(_records("run-write", range(3)))
    assert result["events"] == 6 and result["sent"] == 1 and result["pending"] == 0
    kusto_up.drain()
    assert _points(kusto_up, "run-write") == [("accuracy", 0, 1.0), ("accuracy", 1, 1.5), ("accuracy", 2, 2.0),
                                              ("loss", 0, 0.0), ("loss", 1, 0.5), ("loss", 2, 1.0)]
    event = _raw(kusto_up, "TauExpMetricEventsV1", "run-write")[0]
    assert event["schema_version"] == "tau.experiment.metric.v1" and event["metric_file_id"] == "chunk-1"
    assert (event["workspace_id"], event["cluster"], event["namespace"]) == ("ws1", "aks-1", "team-a")
    projection = _raw(kusto_up, "TauExpMetrics", "run-write")
    assert len(projection) == 6 and projection[0]["tags"]["tau_workspace"] == "ws1"
    assert ingest_endpoint_of("https://c.westeurope.kusto.windows.net") == "https://ingest-c.westeurope.kusto.windows.net"


def test_a_replayed_batch_is_skipped_and_reads_dedup(kusto_up: LoopbackKusto, tmp_path: Path) -> None:
    sink = _sink(kusto_up, tmp_path / "spool")
    first = sink.write(_records("run-replay", range(4)))
    again = _sink(kusto_up, tmp_path / "other").write(_records("run-replay", range(4)))  # a restarted sender
    assert first["tag"] == again["tag"]
    kusto_up.drain()
    assert len(_raw(kusto_up, "TauExpMetricEventsV1", "run-replay")) == 8  # ingest-by tag: the replay was skipped
    sink.write(_records("run-replay", range(2, 6)))  # an overlapping batch (another tag) does land ...
    kusto_up.drain()
    assert len(_raw(kusto_up, "TauExpMetricEventsV1", "run-replay")) == 16
    assert len(_points(kusto_up, "run-replay")) == 12  # ... and query-time dedup by event_id hides the overlap


def test_kusto_down_buffers_and_a_restart_catches_up(kusto_up: LoopbackKusto, tmp_path: Path) -> None:
    kusto_up.endpoint.down = True
    sink = _sink(kusto_up, tmp_path / "spool")
    first = sink.write(_records("run-down", range(2)))
    second = sink.write(_records("run-down", range(2, 4)))
    assert (first["sent"], first["pending"], second["pending"]) == (0, 1, 2)
    assert "endpoint is down" in second["error"]
    sink.close()
    kusto_up.endpoint.down = False
    restarted = _sink(kusto_up, tmp_path / "spool")  # a new process: the spool is all it has
    assert restarted.flush() == {"sent": 2, "pending": 0, "error": ""}
    kusto_up.drain()
    assert [s for _, s, _ in _points(kusto_up, "run-down")] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert not list((tmp_path / "spool" / "pending").iterdir())


def test_no_secret_or_env_value_reaches_kusto(kusto_up: LoopbackKusto, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sv-SECRET-0123456789abcdef"
    monkeypatch.setenv("AZURE_CLIENT_SECRET", secret)
    monkeypatch.setenv("TAU_TOKEN", secret)
    _sink(kusto_up, tmp_path / "spool").write(_records("run-secret", range(2), team="a"))
    kusto_up.drain()
    dumped = json.dumps([kusto_up.store.rows(t) for t in ("TauExpMetricEventsV1", "TauExpMetrics")], default=str)
    assert "run-secret" in dumped
    assert secret not in dumped and "loopback-kusto-token" not in dumped


def test_credentials_workload_identity_tau_sign_in_or_a_clear_error(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from azure.identity import WorkloadIdentityCredential

    from tau_core.azure_auth import TokenCredentialAdapter
    from tau_core.errors import ConfigError
    from tau_kusto.auth import select_credential
    from tau_kusto.sink import default_credential

    with pytest.raises(ConfigError, match="no Azure sign-in for Kusto"):
        select_credential({"TAU_CONFIG_DIR": str(tmp_path)}, which=lambda _: None)  # no az on this machine
    assert isinstance(default_credential({"TAU_CONFIG_DIR": str(tmp_path), "AZURE_TENANT_ID": "t1"}),
                      TokenCredentialAdapter)  # Tau's own sign-in (Azure CLI login or msal device code)
    token = tmp_path / "sa-token"
    token.write_text("projected-service-account-token")
    for name, value in (("AZURE_TENANT_ID", "t1"), ("AZURE_CLIENT_ID", "c1"),
                        ("AZURE_FEDERATED_TOKEN_FILE", str(token))):
        monkeypatch.setenv(name, value)
    assert isinstance(default_credential(), WorkloadIdentityCredential)  # in the cluster
    with pytest.raises(ConfigError, match="must use https"):
        KustoSink("http://kusto.example.com", credential=StaticToken())
