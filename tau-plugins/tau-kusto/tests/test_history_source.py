"""The Kusto history source (``tau_register_history_sources`` → ``kusto``) against the loopback endpoint:
lifecycle rows, metric points and container logs read back, deduplicated at query time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tau_core.errors import TauError
from tau_core.history import LifecycleRow, LogQuery, RunQuery, history_source, transitions
from tau_core.kql import MetricsFilter
from tau_core.telemetry import ScalarRecord
from tau_kusto.history import KustoHistory
from tau_kusto.sink import KustoSink
from tau_testing.kusto import LoopbackKusto, StaticToken
from tau_testing.kusto.logs import ingest_container_logs

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _row(run: str, state: str, minute: int, **kw: str) -> LifecycleRow:
    return LifecycleRow(observed_at=T0 + timedelta(minutes=minute), observation_id=f"{run}-{state}-{minute}",
                        run_id=run, durable_id=f"aks-1/team-a/uid-{run}", namespace="team-a", cluster="aks-1",
                        owning_resource_kind="Job", owning_resource_name=run, state=state, **kw)


def _source(kusto: LoopbackKusto) -> KustoHistory:
    source = history_source("kusto", endpoint=kusto.query_url, credential=StaticToken())
    assert isinstance(source, KustoHistory)
    return source


def test_run_history_reads_the_recorded_rows_once(kusto_up: LoopbackKusto, tmp_path: Path) -> None:
    rows = [_row("hist-a", "submitted", 0), _row("hist-a", "queued", 0), _row("hist-a", "running", 1),
            _row("hist-a", "failed", 3, reason="BackoffLimitExceeded/OOMKilled"), _row("hist-b", "running", 1)]
    sink = KustoSink(kusto_up.query_url, spool=tmp_path / "spool", credential=StaticToken())
    first = sink.write_lifecycle(rows)
    assert first["sent"] == 1 and first["tag"].startswith("tau-lifecycle-")
    # the same rows in another batch (a recorder restarted mid-batch) and the same batch replayed
    sink.write_lifecycle(rows[2:4])
    KustoSink(kusto_up.query_url, spool=tmp_path / "other", credential=StaticToken()).write_lifecycle(rows)
    kusto_up.drain()
    assert len([r for r in kusto_up.store.rows("TauExpRunLifecycle") if r["run_id"] == "hist-a"]) == 6
    got = _source(kusto_up).run_history(RunQuery("hist-a", namespace="team-a"))
    assert [r.state for r in got] == ["submitted", "queued", "running", "failed"]  # query-time dedup
    assert got[-1].reason == "BackoffLimitExceeded/OOMKilled" and got[-1].observed_at == T0 + timedelta(minutes=3)
    assert [r.state for r in transitions(got)] == ["submitted", "queued", "running", "failed"]
    assert _source(kusto_up).run_history(RunQuery("hist-a", namespace="other")) == []


def test_metric_points_and_container_logs(kusto_up: LoopbackKusto, tmp_path: Path) -> None:
    KustoSink(kusto_up.query_url, spool=tmp_path / "spool", credential=StaticToken()).write(
        [ScalarRecord(run_id="hist-m", metric_name="loss", value=1.0 / (s + 1), step=s,
                      wall_time=T0 + timedelta(seconds=s), project="p", run_group_id="g", experiment_id="e")
         for s in range(3)])
    kusto_up.drain()
    points = _source(kusto_up).metric_points(MetricsFilter(runs=("hist-m",), since="3650d"))
    assert [(p.step, p.value) for p in points] == [(0, 1.0), (1, 0.5), (2, 1 / 3)]

    lines = [(T0 + timedelta(seconds=i), "aks-1", "team-a", "hist-m-x7k2p", "main", f"step {i}") for i in range(5)]
    lines += [(T0, "aks-1", "team-a", "hist-mx-abcde", "main", "another run"),
              (T0, "aks-2", "team-a", "hist-m-x7k2p", "main", "another cluster")]
    ingest_container_logs(kusto_up, lines)
    got = _source(kusto_up).container_logs(LogQuery("aks-1", "team-a", "hist-m", tail=3))
    assert [(x.pod, x.container, x.message) for x in got] == [("hist-m-x7k2p", "main", f"step {i}") for i in (2, 3, 4)]
    assert len(_source(kusto_up).container_logs(LogQuery("aks-1", "team-a", "hist-m", tail=None))) == 5


def test_an_unreachable_endpoint_is_one_line(kusto_up: LoopbackKusto) -> None:
    kusto_up.endpoint.down = True
    with pytest.raises(TauError, match=r"Kusto history query to http://127\.0\.0\.1:\d+ \(database Metrics\) failed"):
        _source(kusto_up).run_history(RunQuery("x"))
