"""Issue 18's proof: a run's history outlives its Kubernetes objects.

On the simulated TauGrid cluster a Job with the metrics-offload sidecar and the platform's Kusto policy OOMs on
its first attempt, is retried by ``tau run`` and succeeds; the lifecycle recorder (``tau run history record``'s
loop) watches it; the Job's TTL then deletes it.  Afterwards ``tau run status`` answers from Kusto, ``tau logs``
from the logs the entrypoint wrapper archived, the Portal lists the run with ``historyState: available`` and
Stellar charts its metrics from Kusto.  Finally every ingested Kusto row is searched for the run's secret env
value and its log content: none is there.

Real parts: the simulator's API server, the retry loop of ``tau run``, the rendered wrapper and the rendered
native sidecar of both attempts run as local processes by the process kubelet (the first attempt really
outgrows its memory limit and is OOM-killed; the sidecar's ``taugrid-portal`` is the real CLI, started through
``sidecar_main.py`` so that it signs in with the loopback token instead of a workload identity), the loopback
Kusto endpoint with Azurite and the real azure-kusto clients.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from lifecycle_support import NS, RETRY, write_target

from tau_core.hookspecs import hookimpl
from tau_core.kql import schema_commands
from tau_testing.kusto import LoopbackKusto, StaticToken, start_kusto
from tau_testing.paths import repo_root
from tau_testing.sim.scenarios.taugrid import NAMESPACE, RESULT_PVC, TauGridScenario
from tau_testing.uvicorn_thread import UvicornThread

pytestmark = [pytest.mark.realclock, pytest.mark.slow]

SECRET = "sv-e2e-SECRET-5e1f0c9a"
LOGMARK = "LOGMARK-only-in-logs-77ab"
IMAGE = "registry.example.com/taugrid-portal@sha256:" + "d" * 64
SIDECAR_MAIN = repo_root() / "tau-plugins" / "tau-kusto" / "tests" / "sidecar_main.py"
WAIT = 180.0  # a loaded machine starts python slowly; never asserted as a duration
PROGRAM = f"""\
import json, os, time
attempt = os.environ.get("TAU_RETRY_ATTEMPT", "0")
print("training attempt=" + attempt + " {LOGMARK}", flush=True)
if attempt == "0":  # more than the container's memory limit: the kubelet OOM-kills it
    block = b"x" * (400 * 1024 * 1024)
    time.sleep(600)
hist = os.path.join(os.environ["TAU_OUTPUT_DIR"], "h")
os.makedirs(hist, exist_ok=True)
rows = "".join(json.dumps({{"_step": s, "_timestamp": time.time(), "loss": 1.0 / (s + 1),
                            "note": os.environ["API_TOKEN"]}}) + "\\n" for s in range(20))
with open(os.path.join(hist, ".c000.tmp"), "w") as fh:
    fh.write(rows)
os.replace(os.path.join(hist, ".c000.tmp"), os.path.join(hist, "c000.jsonl"))
print("finished", flush=True)
"""


class LoopbackCredential:
    """The real ``kusto`` history source, with the loopback endpoint's token in place of an Entra sign-in."""

    @hookimpl
    def tau_register_history_sources(self, register: Any) -> None:
        from tau_kusto.history import KustoHistory

        register("kusto", lambda **options: KustoHistory(credential=StaticToken(), **options), priority=1)


@pytest.fixture
def kusto(tmp_path: Path) -> Iterator[LoopbackKusto]:
    from tau_core.plugins import Host, set_host

    fake = start_kusto(tmp_path / "azurite")
    for command in schema_commands("all"):
        fake.client().execute_mgmt("Metrics", command)
    previous = set_host(Host.create(extra_plugins=[("loopback-credential", LoopbackCredential())]))
    yield fake
    set_host(previous)
    fake.stop()


class Recorder:
    """The lifecycle recorder's watch loop (what ``tau run history record`` runs) on its own thread."""

    def __init__(self, options: Any) -> None:
        from tau_run.recorder.main import record

        self.loop = asyncio.new_event_loop()
        self.task: asyncio.Task[Any] | None = None
        self.error: BaseException | None = None

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            self.task = self.loop.create_task(record(options, StaticToken()))
            try:
                self.loop.run_until_complete(self.task)
            except asyncio.CancelledError:
                pass
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.task is not None:
            self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(30)


def _shim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``taugrid-portal`` on the process kubelet's PATH: the real CLI, signing in with the loopback token."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "taugrid-portal"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{SIDECAR_MAIN}" "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")


@contextlib.contextmanager
def _served(app: Any) -> Iterator[str]:
    """``app`` on a real uvicorn server on a loopback port."""
    from taugrid_portal.stellar.server import bind, url_for

    sock = bind("127.0.0.1", 0)
    served = UvicornThread(app, sock, name="portal", what="Portal", log_level="warning", lifespan="on")
    served.start(timeout=30)
    try:
        yield url_for(sock)
    finally:
        served.stop()


def _portal(*args: str) -> tuple[int, str, str]:
    from taugrid_portal.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as done:
        main(list(args))
    return int(done.value.code or 0), out.getvalue(), err.getvalue()


def _diagnose(result: Any, cluster: Any) -> str:
    """What the pods of the run said (for an assertion message)."""
    lines = [result.stderr]
    for pod in cluster.store.list("v1", "Pod", NAMESPACE):
        name = pod["metadata"]["name"]
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            lines.append(f"{name}/{status['name']}: {json.dumps(status.get('state'))}")
            lines += [str(x) for x in cluster.logs.read(NAMESPACE, name, status["name"], tail=15)] \
                if cluster.logs.has(NAMESPACE, name, status["name"]) else []
    return "\n".join(lines)


def _submit(scenario: TauGridScenario, tau_cli: Any, repo: Path, kusto: LoopbackKusto) -> Any:
    cluster = scenario.cluster
    cluster.store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "train-secret",
                                                                           "namespace": NAMESPACE},
                          "type": "Opaque", "data": {"token": base64.b64encode(SECRET.encode()).decode()}})
    target = write_target(repo, "hist", extra=RETRY.format(on="OOMKilled") + (
        f"storage:\n  data_pvc: {RESULT_PVC}\n"
        "metrics:\n  history: [h/*.jsonl]\n  offload:\n    enabled: true\n"
        "experiment:\n  project: durable\n  name: proof\n"
        "run:\n  ttl_seconds_after_finished: 40\n"))
    text = target.read_text().replace("memory_limit: 1Gi", "memory_limit: 256Mi")
    target.write_text(text.replace("runtime:\n", "runtime:\n  env_secret:\n    API_TOKEN: train-secret:token\n", 1))
    (repo / "train.py").write_text(PROGRAM)
    return tau_cli("run", "hist", *NS, env={"TAU_METRICS_OFFLOAD_IMAGE": IMAGE,
                                           "TAU_METRICS_OFFLOAD_ADX_CLUSTER_URI": kusto.query_url,
                                           "TAU_METRICS_OFFLOAD_INTERVAL": "1s"})


def _status_and_logs(scenario: TauGridScenario, tau_cli: Any, kusto: LoopbackKusto) -> None:
    """``tau run status`` from Kusto, ``tau logs`` from the archive the recorder located."""
    # tau run status: the recorded attempts, from Kusto
    status = tau_cli("run", "status", "hist", *NS, "--kusto-endpoint", kusto.query_url)
    assert status.exit_code == 0, status
    out = status.stdout
    assert "its objects are gone; recorded history from Kusto" in out
    assert out.index("Attempt 1: Job hist") < out.index("OOMKilled") < out.index("Attempt 2: Job hist")
    assert "Result: succeeded" in out.splitlines()[-1], out

    # tau logs: what the successful attempt printed, from the archive the wrapper wrote on the result PVC, found
    # where the recorder saw the run write (its Job is gone)
    archives = [p for p in scenario.volume.rglob("logs/hist-*-main.log") if LOGMARK in p.read_text()]
    assert len(archives) == 2, list(scenario.volume.rglob("logs/*"))  # one per attempt, the OOM-killed one too
    logs = tau_cli("logs", "hist", *NS, "--kusto-endpoint", kusto.query_url)
    assert logs.exit_code == 0, logs
    assert f"training attempt=0 {LOGMARK}" in logs.stdout and f"training attempt=1 {LOGMARK}" in logs.stdout
    assert "finished" in logs.stdout
    assert f"showing the logs archived on pvc/{RESULT_PVC}" in logs.stderr, logs.stderr
    assert all(a.name in logs.stderr for a in archives)


def test_a_run_leaves_a_complete_history(taugrid_factory: Any, tau_cli: Any, tau_plugins: Any, repo: Path,
                                         kusto: LoopbackKusto, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from tau_core.history import RunQuery, history_source
    from tau_run.recorder.derive import Scope
    from tau_run.recorder.main import RecordOptions

    _shim(tmp_path, monkeypatch)
    tau_plugins.register(LoopbackCredential(), name="loopback-credential")
    scenario = taugrid_factory(clock="real", time_scale=10, process_kubelet=True)
    cluster = scenario.cluster
    admin = cluster.write_kubeconfig(tmp_path / "admin-kubeconfig", user="admin")
    recorder = Recorder(RecordOptions(kubeconfig=str(admin), scope=Scope("aks-1", NAMESPACE),
                                      endpoint=kusto.query_url, database="Metrics", table="TauExpRunLifecycle",
                                      health=None, watch_timeout=30, spool=str(tmp_path / "recorder-spool")))
    try:
        r = _submit(scenario, tau_cli, repo, kusto)
        assert r.exit_code == 0, _diagnose(r, cluster)
        assert "attempt 1/2 failed (OOMKilled)" in r.stderr and "completed successfully" in r.stderr, r.stderr
        # the Job's TTL removes it (and its pods): Kubernetes forgets the run
        cluster.wait_for(lambda: cluster.store.get("batch/v1", "Job", NAMESPACE, "hist") is None, timeout=WAIT)

        def recorded() -> bool:
            kusto.drain()
            source = history_source("kusto", endpoint=kusto.query_url)
            try:
                states = [row.state for row in source.run_history(RunQuery("hist", namespace=NAMESPACE))]
            finally:
                source.close()
            return states.count("submitted") == 2 and "failed" in states and "succeeded" in states

        cluster.wait_for(recorded, timeout=WAIT, interval=0.5)
    finally:
        recorder.stop()
    assert recorder.error is None, recorder.error

    _status_and_logs(scenario, tau_cli, kusto)

    # the Portal's runs board: a durable-only row, historyState available
    from taugrid_portal.portal.app import create_app
    from taugrid_portal.portal.config import PortalConfig
    from taugrid_portal.portal.kusto_flags import KustoConfig, RunHistoryConfig

    config = PortalConfig(kubeconfig=str(admin), refresh_seconds=0.5, kusto=KustoConfig(endpoint=kusto.query_url),
                          run_history=RunHistoryConfig(enabled=True))
    answers: list[Any] = []
    with _served(create_app(config)) as url:
        def listed() -> bool:  # the board answers once its first refresh is done
            answers.append(httpx.get(f"{url}/api/portal/runs", timeout=30))
            return answers[-1].status_code == 200 and any(r["name"] == "hist" for r in answers[-1].json()["runs"])

        cluster.wait_for(listed, timeout=WAIT, interval=0.5)
    doc = answers[-1].json()
    assert doc["historyState"] == "available", doc
    row = next(r for r in doc["runs"] if r["name"] == "hist")
    assert row["source"] == "durable" and row["status"] == "Complete", row

    # Stellar: the run's metrics, shipped by the sidecar, read back from Kusto
    code, text, err = _portal("experiment", "stellar", "hist", "--source", "kusto", "--kusto-endpoint",
                              kusto.query_url, "-o", "json")
    assert code == 0, err
    snap = json.loads(text)
    assert snap["source"] == "kusto" and [r["state"] for r in snap["runs"]] == ["succeeded"]
    loss = next(c for c in snap["charts"] if c["metric_name"] == "loss")
    assert loss["series"][0]["steps"] == list(range(20))

    # nothing secret, no env value and no log line reached Kusto
    for table in sorted(kusto.store.tables):
        dumped = json.dumps(kusto.store.rows(table), default=str)
        assert SECRET not in dumped and LOGMARK not in dumped and "API_TOKEN" not in dumped, table
