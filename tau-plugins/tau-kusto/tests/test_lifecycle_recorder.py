"""The lifecycle recorder (``tau run history record``, tau-run) against the simulated cluster and the loopback
Kusto endpoint: watches, derived transitions with pod enrichment, replay and restart safety, Kusto down."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tau_core import keys
from tau_core.errors import TauError
from tau_core.history import RunQuery, history_source, transitions
from tau_run.recorder.derive import Scope
from tau_run.recorder.health import Address
from tau_run.recorder.main import RecordOptions, record
from tau_testing.kusto import LoopbackKusto, StaticToken
from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario
from tau_testing.sim.scripts import PodScript, scripts_of

SECRET = "sv-SECRET-recorder-0123456789"


def _job(name: str) -> dict[str, Any]:
    labels = {keys.KUEUE_QUEUE_NAME: "jobqueue", keys.MANAGED_BY: keys.MANAGED_BY_VALUE}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels,
                         "annotations": {keys.IMAGE: "ghcr.io/acme/t:1", keys.CONFIG_HASH: "cfg1"}},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "ghcr.io/acme/t:1", "env": [{"name": "API_KEY", "value": SECRET}],
                    "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}}}]}}}}


def _options(kusto: LoopbackKusto, tmp: Path, *, once: bool = False, health: Address | None = None) -> RecordOptions:
    kubeconfig = tmp / "kubeconfig"
    if not kubeconfig.exists():
        CLUSTERS[-1].write_kubeconfig(kubeconfig, user="admin")
    return RecordOptions(kubeconfig=str(kubeconfig), scope=Scope("aks-1", NAMESPACE), endpoint=kusto.query_url, database="Metrics",
                         table="TauExpRunLifecycle", health=health, once=once, watch_timeout=30,
                         spool=str(tmp / "spool"))


class Running:
    """The recorder in watch mode on its own thread and event loop."""

    def __init__(self, options: RecordOptions) -> None:
        self.loop = asyncio.new_event_loop()
        self.task: asyncio.Task[Any] | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, args=(options,), daemon=True)
        self.thread.start()

    def _main(self, options: RecordOptions) -> None:
        asyncio.set_event_loop(self.loop)
        self.task = self.loop.create_task(record(options, StaticToken()))
        try:
            self.loop.run_until_complete(self.task)
        except asyncio.CancelledError:
            pass
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        if self.task is not None:
            self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _rows(kusto: LoopbackKusto, run: str) -> list[dict[str, Any]]:
    kusto.drain()
    return [r for r in kusto.store.rows("TauExpRunLifecycle") if r["run_id"] == run]


def _attempts(kusto: LoopbackKusto, run: str) -> list[list[tuple[str, str]]]:
    """Per durable id (one per attempt, oldest first): the transitions read back through the history source."""
    kusto.drain()
    source = history_source("kusto", endpoint=kusto.query_url, credential=StaticToken())
    rows = source.run_history(RunQuery(run, namespace=NAMESPACE))
    by: dict[str, list[Any]] = {}
    for row in rows:
        by.setdefault(row.durable_id, []).append(row)
    return [[(r.state, r.reason) for r in transitions(v)] for v in by.values()]


CLUSTERS: list[Any] = []


@pytest.fixture
def cluster(taugrid_cluster: TauGridScenario) -> Iterator[TauGridScenario]:
    CLUSTERS.append(taugrid_cluster.cluster)
    yield taugrid_cluster
    CLUSTERS.pop()


def _wait(predicate: Any, what: str, timeout: float = 60) -> None:
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_oom_retry_success_is_recorded_once_and_health_answers(cluster: TauGridScenario, kusto_up: LoopbackKusto,
                                                               tmp_path: Path) -> None:
    sim, store = cluster.cluster, cluster.cluster.store
    first: dict[str, str] = {}
    scripts_of(sim).add(lambda pod: any(o.get("uid") == first.get("uid") for o in
                                        pod["metadata"].get("ownerReferences") or []),
                        PodScript(run_seconds=2, oom=True))
    port = _free_port()
    running = Running(_options(kusto_up, tmp_path, health=Address("127.0.0.1", port)))
    _wait(lambda: running.error is not None or _port_open(port), "the health server")
    assert running.error is None, running.error
    assert _get(f"http://127.0.0.1:{port}/healthz")[0] == 200
    _wait(lambda: _get(f"http://127.0.0.1:{port}/readyz")[0] == 200, "readyz")
    ready = json.loads(_get(f"http://127.0.0.1:{port}/readyz")[1])
    assert ready["rayjobs_status"] == "ok" and ready["workloads_status"] == "ok" and ready["pods_status"] == "ok"

    first["uid"] = store.create(_job("hist-oom"))["metadata"]["uid"]
    sim.advance(10)
    # the Job's and the pod's watch events arrive in either order: the enriched row follows the plain one
    _wait(lambda: any(r["state"] == "failed" and "exit code 137" in r["message"] for r in _rows(kusto_up, "hist-oom")),
          "the failed row with the pod's evidence")
    store.delete("batch/v1", "Job", NAMESPACE, "hist-oom")  # what Tau's retry does: delete, resubmit
    store.create(_job("hist-oom"))
    sim.advance(10)
    _wait(lambda: any(r["state"] == "succeeded" for r in _rows(kusto_up, "hist-oom")), "the succeeded row")
    running.stop()
    assert running.error is None, running.error

    attempts = _attempts(kusto_up, "hist-oom")
    assert len(attempts) == 2
    states = [[s for s, _ in a] for a in attempts]
    assert states[0][0] == "submitted" and states[0][-1] == "failed" and "running" in states[0]
    assert states[1][0] == "submitted" and states[1][-1] == "succeeded" and "running" in states[1]
    assert {"queued", "admitted"} & set(states[1])
    reason = attempts[0][-1][1]
    assert reason.endswith("/OOMKilled"), attempts[0]
    failed = max((r for r in _rows(kusto_up, "hist-oom") if r["state"] == "failed"), key=lambda r: r["observed_at"])
    assert "exit code 137" in failed["message"] and "container main" in failed["message"]  # arg_max prefers it
    ids = [r["observation_id"] for r in _rows(kusto_up, "hist-oom")]
    assert len(ids) == len(set(ids))  # every observation written once
    dumped = json.dumps(kusto_up.store.rows("TauExpRunLifecycle"), default=str)
    assert SECRET not in dumped and "API_KEY" not in dumped and "loopback-kusto-token" not in dumped


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_replay_and_restart_leave_no_gaps_and_no_duplicates(cluster: TauGridScenario, kusto_up: LoopbackKusto,
                                                            tmp_path: Path) -> None:
    sim, store = cluster.cluster, cluster.cluster.store
    store.create(_job("hist-restart"))
    asyncio.run(record(_options(kusto_up, tmp_path, once=True), StaticToken()))  # before admission
    before = len(_rows(kusto_up, "hist-restart"))
    asyncio.run(record(_options(kusto_up, tmp_path / "again", once=True), StaticToken()))  # replayed batch
    assert len(_rows(kusto_up, "hist-restart")) == before
    # the recorder is down while the run is admitted, runs and succeeds; the next one catches up
    sim.advance(10)
    asyncio.run(record(_options(kusto_up, tmp_path, once=True), StaticToken()))
    [states] = [[s for s, _ in a] for a in _attempts(kusto_up, "hist-restart")]
    assert states[0] == "submitted" and states[-1] == "succeeded"
    # the restarted recorder sent its receipt again in a new batch: stored twice, read back once
    raw = [r["observation_id"] for r in _rows(kusto_up, "hist-restart")]
    read = [r.observation_id for r in history_source("kusto", endpoint=kusto_up.query_url, credential=StaticToken())
            .run_history(RunQuery("hist-restart"))]
    assert len(raw) > len(set(raw)) and sorted(read) == sorted(set(raw))
    final = next(r for r in _rows(kusto_up, "hist-restart") if r["state"] == "succeeded")
    assert final["pod_start_time"] and final["completion_time"]  # what ran while it was down is on the row


def test_kusto_down_ends_the_recorder_non_zero(cluster: TauGridScenario, kusto_up: LoopbackKusto,
                                               tmp_path: Path, tau_cli: Any) -> None:
    cluster.cluster.store.create(_job("hist-down"))
    kusto_up.endpoint.down = True
    with pytest.raises(TauError, match=r"writing 2 lifecycle observation\(s\) failed 3 times"):
        asyncio.run(record(_options(kusto_up, tmp_path, once=True), StaticToken()))
    # the command line: a persistent error (here: no Azure sign-in for its ingestion) is one line and exit 1
    r = tau_cli("run", "history", "record", "-n", NAMESPACE, "--cluster", "aks-1", "--kusto-endpoint",
                kusto_up.query_url, "--once", "--health-addr", "")
    assert r.exit_code == 1 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr, r
    r = tau_cli("run", "history", "record", "-n", NAMESPACE, "--cluster", "aks-1", "--kusto-endpoint",
                kusto_up.query_url, "--kusto-table", "no-such table")
    assert r.exit_code == 2 and "--kusto-table must be a Kusto identifier" in r.stderr
