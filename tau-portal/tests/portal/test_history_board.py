"""The Runs board with durable run history: ``historyState: available``, durable-only rows for deleted
workloads merged with the live ones, read from the loopback Kusto endpoint through the ``kusto`` history
source (tau-kusto) -- and the degradation when that tier fails."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tau_core import keys
from tau_core.history import LifecycleRow
from tau_core.hookspecs import hookimpl
from tau_core.kql import schema_commands
from tau_core.plugins import Host, set_host
from tau_testing.kusto import LoopbackKusto, StaticToken, start_kusto
from tau_testing.sim.scenarios.taugrid import NAMESPACE, QUEUE, TauGridScenario
from taugrid_portal.portal.kusto_flags import KustoConfig, RunHistoryConfig

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class LoopbackCredential:
    """The real history source, handed the loopback endpoint's test token (it stands in for an Entra sign-in)."""

    @hookimpl
    def tau_register_history_sources(self, register: Any) -> None:
        from tau_kusto.history import KustoHistory

        register("kusto", lambda **options: KustoHistory(credential=StaticToken(), **options), priority=1)


@pytest.fixture
def kusto(tmp_path: Path) -> Iterator[LoopbackKusto]:
    fake = start_kusto(tmp_path / "azurite")
    for command in schema_commands("lifecycle"):
        fake.client().execute_mgmt("Metrics", command)
    previous = set_host(Host.create(extra_plugins=[("loopback-credential", LoopbackCredential())]))
    yield fake
    set_host(previous)
    fake.stop()


def _row(name: str, uid: str, state: str, minute: int) -> LifecycleRow:
    return LifecycleRow(observed_at=T0 + timedelta(minutes=minute), observation_id=f"{uid}-{state}", run_id=name,
                        durable_id=f"aks-1/{NAMESPACE}/{uid}", namespace=NAMESPACE, cluster="aks-1",
                        owning_resource_kind="Job", owning_resource_name=name, resource_uid=uid,
                        created_time=T0, local_queue=QUEUE, state=state,
                        reason="BackoffLimitExceeded/OOMKilled" if state == "failed" else "")


def test_runs_board_merges_durable_only_rows(taugrid_cluster: TauGridScenario, portal_factory: Any,
                                            kusto: LoopbackKusto, tmp_path: Path) -> None:
    from tau_kusto.sink import KustoSink

    live = taugrid_cluster.cluster.store.create({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "live-1", "namespace": NAMESPACE,
                     "labels": {keys.KUEUE_QUEUE_NAME: QUEUE, keys.MANAGED_BY: keys.MANAGED_BY_VALUE}},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "ghcr.io/acme/t:1", "resources": {"requests": {"cpu": "100m"}}}]}}}})
    rows = [_row("gone-1", "u-gone", "submitted", 0), _row("gone-1", "u-gone", "running", 1),
            _row("gone-1", "u-gone", "succeeded", 5), _row("gone-2", "u-gone2", "failed", 3),
            _row("live-1", live["metadata"]["uid"], "queued", 0)]
    KustoSink(kusto.query_url, spool=tmp_path / "spool", credential=StaticToken()).write_lifecycle(rows)
    kusto.drain()
    portal = portal_factory(taugrid_cluster.cluster, kusto=KustoConfig(endpoint=kusto.query_url),
                            run_history=RunHistoryConfig(enabled=True))
    doc = portal.wait("/api/portal/runs", lambda r: r.status_code == 200 and len(r.json()["runs"]) >= 3).json()
    assert doc["historyState"] == "available" and doc["historyDiagnostic"] == "", doc
    by = {r["name"]: r for r in doc["runs"]}
    assert by["gone-1"]["source"] == "durable" and by["gone-1"]["status"] == "Complete"
    assert by["gone-2"]["status"] == "Failed" and by["gone-2"]["historyReason"] == "BackoffLimitExceeded/OOMKilled"
    assert by["live-1"]["source"] == "tau" and by["live-1"]["durableId"] == f"aks-1/{NAMESPACE}/{live['metadata']['uid']}"
    assert len(doc["runs"]) == 3

    kusto.endpoint.down = True  # the durable tier fails: the live board stays, and says why
    down = portal_factory(taugrid_cluster.cluster, kusto=KustoConfig(endpoint=kusto.query_url),
                          run_history=RunHistoryConfig(enabled=True))
    doc = down.wait("/api/portal/runs", lambda r: r.status_code == 200 and r.json()["runs"]).json()
    assert doc["historyState"] == "history-unavailable" and "Kusto history query" in doc["historyDiagnostic"]
    assert [r["name"] for r in doc["runs"]] == ["live-1"]


class BlackHole:
    """A Kusto endpoint that accepts connections and never answers (a hung cluster or network path)."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self.called = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            self.called.set()

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def credential_host() -> Iterator[None]:
    previous = set_host(Host.create(extra_plugins=[("loopback-credential", LoopbackCredential())]))
    yield
    set_host(previous)


def test_a_hung_history_query_stalls_no_other_request(taugrid_cluster: TauGridScenario, portal_factory: Any,
                                                      credential_host: None) -> None:
    """While the Runs board waits on Kusto, /healthz (the liveness probe) and the other boards still answer;
    when the query fails, the Runs board says so and keeps the live runs."""
    import threading

    import httpx

    hole = BlackHole()
    try:
        portal = portal_factory(taugrid_cluster.cluster, kusto=KustoConfig(endpoint=hole.url),
                                run_history=RunHistoryConfig(enabled=True))
        portal.wait("/api/portal/nodes", lambda r: r.status_code == 200)
        answers: list[httpx.Response] = []
        waiting = threading.Thread(target=lambda: answers.append(httpx.get(portal.url + "/api/portal/runs",
                                                                           timeout=120)))
        waiting.start()
        assert hole.called.wait(60), "the Runs board never queried the history endpoint"
        assert portal.get("/healthz").json() == {"status": "ok"}  # the client's timeout is a deadlock guard only
        assert portal.get("/api/portal/nodes").status_code == 200
        assert waiting.is_alive() and not answers, "the history query was expected to be still hanging"
    finally:
        hole.close()
    waiting.join(120)
    doc = answers[0].json()
    assert answers[0].status_code == 200 and doc["historyState"] == "history-unavailable", doc
