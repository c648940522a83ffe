"""Readers of durable history on the command line, for a run whose Kubernetes objects are gone: ``tau logs``
reads the container logs adx-mon kept (``Logs.ContainerLogs``) and ``tau run status`` the recorded lifecycle,
both through the ``kusto`` history source, against the simulated cluster and the loopback endpoint."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from tau_core.history import LifecycleRow
from tau_core.hookspecs import hookimpl
from tau_kusto.history import KustoHistory
from tau_kusto.sink import KustoSink
from tau_testing.kusto import LoopbackKusto, StaticToken
from tau_testing.kusto.logs import ingest_container_logs
from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class LoopbackCredential:
    """The real history source, handed the loopback endpoint's test token (it stands in for an Entra sign-in)."""

    @hookimpl
    def tau_register_history_sources(self, register: Any) -> None:
        register("kusto", lambda **options: KustoHistory(credential=StaticToken(), **options), priority=1)


@pytest.fixture
def reader(taugrid_cluster: TauGridScenario, kusto_up: LoopbackKusto, tau_cli: Any, tau_plugins: Any) -> Any:
    tau_plugins.register(LoopbackCredential(), name="loopback-credential")
    return tau_cli


def test_tau_logs_reads_kusto_when_pods_and_archive_are_gone(reader: Any, kusto_up: LoopbackKusto,
                                                             taugrid_cluster: TauGridScenario, tmp_path: Path) -> None:
    ingest_container_logs(kusto_up, [(T0 + timedelta(seconds=i), "aks-1", NAMESPACE, "gone-run-x7k2p", "main",
                                      f"step {i} loss {1 / (i + 1):.3f}") for i in range(4)]
                          + [(T0, "aks-1", NAMESPACE, "gone-run-eval-abcde", "main", "another run"),
                             (T0, "aks-1", NAMESPACE, "gone-runner-abcde", "main", "another run"),
                             (T0, "aks-2", NAMESPACE, "gone-run-x7k2p", "main", "another cluster")])
    flags = ["--kusto-cluster", "aks-1", "--kusto-endpoint", kusto_up.query_url, "--kusto-database", "Logs"]
    r = reader("logs", "gone-run", "-n", NAMESPACE, *flags, "--tail", "2", "--prefix")
    assert r.exit_code == 0, r
    assert r.stdout.splitlines() == ["[kusto/gone-run-x7k2p/main] step 2 loss 0.333",
                                     "[kusto/gone-run-x7k2p/main] step 3 loss 0.250"]
    assert "showing 2 line(s) kept in Kusto Logs.ContainerLogs" in r.stderr and "Cluster 'aks-1'" in r.stderr

    # no connection at all: the original error, with where to look next
    r = reader("logs", "gone-run", "-n", NAMESPACE)
    assert r.exit_code == 1 and "--kusto-cluster, --kusto-endpoint, --kusto-database" in r.stderr, r
    r = reader("logs", "gone-run", "-n", NAMESPACE, "--kusto-cluster", "aks-1")
    assert r.exit_code == 1 and "historical log connection is incomplete" in r.stderr, r
    r = reader("logs", "gone-run", "-n", NAMESPACE, "--kusto-cluster", "aks-1", "--kusto-database", "Logs",
               "--kusto-endpoint", "https://user:pw@adx.example.net/db")
    assert r.exit_code == 1 and "must be an absolute https URL without path" in r.stderr and "Traceback" not in r.stderr

    # the platform's tau-log-connection ConfigMap fills in what the flags leave out
    connection = {"schema": "tau.logs.connection.v1", "endpoint": kusto_up.query_url, "database": "Logs",
                  "cluster": "aks-1"}
    taugrid_cluster.cluster.store.create({"apiVersion": "v1", "kind": "ConfigMap",
                                          "metadata": {"name": "tau-log-connection",
                                                                       "namespace": taugrid_cluster.system_namespace},
                                          "data": {"connection.json": json.dumps(connection)}})
    # (read as the platform admin: the researcher role of the scenario reads ConfigMaps in its own namespace only)
    admin = taugrid_cluster.cluster.write_kubeconfig(tmp_path / "admin-kubeconfig", user="admin")
    r = reader("logs", "gone-run", "-n", NAMESPACE, "--tail", "-1", env={"KUBECONFIG": str(admin)})
    assert r.exit_code == 0, r
    assert r.stdout.splitlines() == [f"step {i} loss {1 / (i + 1):.3f}" for i in range(4)]


def _row(uid: str, state: str, minute: int, **kw: str) -> LifecycleRow:
    return LifecycleRow(observed_at=T0 + timedelta(minutes=minute), observation_id=f"{uid}-{state}", run_id="done-run",
                        durable_id=f"aks-1/{NAMESPACE}/{uid}", namespace=NAMESPACE, cluster="aks-1",
                        owning_resource_kind="Job", owning_resource_name="done-run", resource_uid=uid, state=state,
                        **kw)


def test_tau_run_status_answers_from_the_recorded_history(reader: Any, kusto_up: LoopbackKusto,
                                                          tmp_path: Path) -> None:
    rows = [_row("u1", "submitted", 0, reason="initial-observation"), _row("u1", "running", 1),
            _row("u1", "failed", 2, reason="BackoffLimitExceeded/OOMKilled",
                 message="pod done-run-a container main: OOMKilled (exit code 137)"),
            _row("u2", "submitted", 3, reason="initial-observation"), _row("u2", "running", 4),
            _row("u2", "succeeded", 6, reason="Completed")]
    KustoSink(kusto_up.query_url, spool=tmp_path / "spool", credential=StaticToken()).write_lifecycle(rows)
    kusto_up.drain()
    r = reader("run", "status", "done-run", "-n", NAMESPACE)
    assert r.exit_code == 1  # without history: the run is simply not there
    r = reader("run", "status", "done-run", "-n", NAMESPACE, "--kusto-endpoint", kusto_up.query_url)
    assert r.exit_code == 0, r
    out = r.stdout
    assert "its objects are gone; recorded history from Kusto Metrics.TauExpRunLifecycle" in out
    assert out.index("Attempt 1: Job done-run (uid u1)") < out.index("BackoffLimitExceeded/OOMKilled") \
        < out.index("Attempt 2: Job done-run (uid u2)")
    assert out.rstrip().endswith("Result: succeeded (Completed)")
    doc = json.loads(reader("run", "status", "done-run", "-n", NAMESPACE, "--kusto-endpoint", kusto_up.query_url,
                            "-o", "json").stdout)
    assert doc["source"] == "kusto" and doc["state"] == "succeeded"
    assert [[t["state"] for t in a["transitions"]] for a in doc["attempts"]] == [
        ["submitted", "running", "failed"], ["submitted", "running", "succeeded"]]
    r = reader("run", "status", "never-ran", "-n", NAMESPACE, "--kusto-endpoint", kusto_up.query_url)
    assert r.exit_code == 1 and "no recorded history" in r.stderr


def _portal(*args: str) -> tuple[int, str, str]:
    import contextlib
    import io

    from taugrid_portal.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as done:
        main(list(args))
    return int(done.value.code or 0), out.getvalue(), err.getvalue()


def test_experiment_status_and_search_read_kusto(kusto_up: LoopbackKusto, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from tau_core.plugins import Host, set_host
    from tau_core.telemetry import ScalarRecord

    previous = set_host(Host.create(extra_plugins=[("loopback-credential", LoopbackCredential())]))
    try:
        sink = KustoSink(kusto_up.query_url, spool=tmp_path / "spool", credential=StaticToken())
        sink.write_lifecycle([attrs.evolve(r, run_id="exp-run", owning_resource_name="exp-run") for r in (
            _row("u9", "submitted", 0), _row("u9", "running", 1), _row("u9", "succeeded", 3, reason="Completed"))])
        sink.write([ScalarRecord(run_id="exp-run", metric_name=m, value=float(s), step=s,
                                 wall_time=T0 + timedelta(seconds=s), project="vision", run_group_id="sweep-x",
                                 experiment_id="e1") for s in range(3) for m in ("loss", "acc")])
        kusto_up.drain()
        monkeypatch.setenv("TAU_EXP_STORE", str(tmp_path / "no-store"))
        code, out, _ = _portal("experiment", "status", "exp-run", "--source", "kusto", "--kusto-endpoint",
                               kusto_up.query_url, "-o", "json")
        assert code == 0
        doc = json.loads(out)
        assert (doc["source"], doc["target_type"], doc["runs"], doc["states"]) == (
            "kusto", "run", 1, {"succeeded": 1})
        assert (doc["metric_series"], doc["metric_points"]) == (2, 6)
        code, out, _ = _portal("experiment", "status", "sweep-x", "--source", "auto", "--kusto-endpoint",
                               kusto_up.query_url)  # no local store: auto reads Kusto
        assert code == 0 and "run_group" in out and "source:  Kusto Metrics at" in out
        code, _, err = _portal("experiment", "status", "sweep-x", "--source", "kusto")
        assert code == 2 and "--source kusto needs --kusto-endpoint" in err
        code, _, err = _portal("experiment", "status", "nothing-here", "--source", "kusto", "--kusto-endpoint",
                               kusto_up.query_url)
        assert code == 1 and "no recorded lifecycle or metrics for 'nothing-here'" in err

        # search: runs by their latest recorded state
        code, out, _ = _portal("experiment", "search", "--source", "kusto", "--kusto-endpoint", kusto_up.query_url,
                               "-q", "exp-run", "--lifecycle", "succeeded", "-o", "json")
        assert code == 0, out
        found = json.loads(out)
        assert found["source"] == "kusto" and [(r["run_id"], r["state"]) for r in found["runs"]] == [
            ("exp-run", "succeeded")]
        code, out, _ = _portal("experiment", "search", "--source", "kusto", "--kusto-endpoint", kusto_up.query_url,
                               "-q", "exp-run", "--lifecycle", "failed", "-o", "json")
        assert code == 0 and json.loads(out)["runs"] == []
        code, _, err = _portal("experiment", "search", "--source", "kusto", "--kusto-endpoint", kusto_up.query_url,
                               "--metric-filter", "loss@min<1")
        assert code == 2 and "--metric-filter need the local store" in err
    finally:
        set_host(previous)
