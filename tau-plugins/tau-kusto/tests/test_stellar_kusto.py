"""Stellar reads the durable history in Kusto: ``experiment stellar|serve --source kusto|local|auto`` against the
loopback endpoint, through the real azure-kusto-data client and the ``kusto`` history source; the served page is
checked in the real headless Chromium."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tau_core.history import LifecycleRow
from tau_core.telemetry import ScalarRecord
from tau_kusto.sink import KustoSink
from tau_testing.kusto import LoopbackKusto, StaticToken
from tau_testing.uvicorn_thread import UvicornThread

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
NS = "stellar-ns"
STEPS = 40


def _loss(run: str, step: int) -> float:
    return round((2.0 if run.endswith("a") else 3.0) / (1 + step), 6)


@pytest.fixture(scope="module")
def recorded(kusto: LoopbackKusto, tmp_path_factory: pytest.TempPathFactory) -> LoopbackKusto:
    """Two runs of group ``stel-sweep`` (project ``stelproj``) as the sidecar and the recorder left them."""
    sink = KustoSink(kusto.query_url, spool=tmp_path_factory.mktemp("spool"), credential=StaticToken(),
                     workspace_id="aurora")
    rows = []
    for run, final in (("stel-run-a", "succeeded"), ("stel-run-b", "failed")):
        for i, state in enumerate(("submitted", "running", final)):
            rows.append(LifecycleRow(observed_at=T0 + timedelta(minutes=i), observation_id=f"{run}-{state}",
                                     run_id=run, durable_id=f"aks-1/{NS}/{run}-uid", workspace_id="aurora",
                                     project="stelproj", run_group_id="stel-sweep", namespace=NS, cluster="aks-1",
                                     owning_resource_kind="Job", owning_resource_name=run, resource_uid=f"{run}-uid",
                                     state=state, created_time=T0))
    sink.write_lifecycle(rows)
    sink.write([ScalarRecord(run_id=run, metric_name=m, value=_loss(run, s) if m == "loss" else s / STEPS, step=s,
                             wall_time=T0 + timedelta(seconds=s), project="stelproj", run_group_id="stel-sweep",
                             experiment_id="stel-exp")
                for run in ("stel-run-a", "stel-run-b") for s in range(STEPS) for m in ("loss", "accuracy")])
    kusto.drain()
    return kusto


@pytest.fixture
def up(recorded: LoopbackKusto, loopback_history: None, tmp_path: Path,
       monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackKusto]:
    monkeypatch.setenv("TAU_EXP_STORE", str(tmp_path / "no-local-store"))
    recorded.endpoint.down = False
    yield recorded
    recorded.endpoint.down = False


def _portal(*args: str) -> tuple[int, str, str]:
    from taugrid_portal.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as done:
        main(list(args))
    return int(done.value.code or 0), out.getvalue(), err.getvalue()


def test_stellar_snapshot_from_kusto(up: LoopbackKusto) -> None:
    code, out, err = _portal("experiment", "stellar", "stel-sweep", "--source", "kusto", "--kusto-endpoint",
                             up.query_url, "-o", "json")
    assert code == 0, err
    snap = json.loads(out)
    assert snap["source"] == "kusto" and snap["target_type"] == "run_group"
    assert snap["store_path"] == f"kusto://{urlsplit(up.query_url).netloc}/Metrics"
    assert {r["run_id"]: r["state"] for r in snap["runs"]} == {"stel-run-a": "succeeded", "stel-run-b": "failed"}
    assert [m["name"] for m in snap["metric_options"]] == ["loss", "accuracy"]  # loss is the primary metric
    loss = snap["charts"][0]
    assert loss["source_points"] == 2 * STEPS and not loss["decimated"]
    series = {s["run_id"]: s for s in loss["series"]}
    assert series["stel-run-b"]["steps"] == list(range(STEPS))
    assert series["stel-run-b"]["values"] == pytest.approx([_loss("stel-run-b", s) for s in range(STEPS)], rel=1e-5)
    assert snap["summary"]["best_run_id"] == "stel-run-a"
    assert f"--source kusto --kusto-endpoint {up.query_url}" in snap["actions"]["status"]

    # one run; auto with no local store reads Kusto too; the terminal summary and the page build from it
    code, out, _ = _portal("experiment", "stellar", "stel-run-a", "--source", "auto", "--kusto-endpoint",
                           up.query_url, "-o", "json")
    assert code == 0 and json.loads(out)["target_type"] == "run" and json.loads(out)["source"] == "kusto"
    code, out, _ = _portal("experiment", "stellar", "stelproj", "--source", "kusto", "--kusto-endpoint",
                           up.query_url, "-o", "tui")
    assert code == 0 and "stel-run-a" in out and "stel-run-b" in out


def test_stellar_kusto_errors_are_one_line(up: LoopbackKusto) -> None:
    code, _, err = _portal("experiment", "stellar", "stel-sweep", "--source", "kusto")
    assert code == 2 and "--source kusto needs --kusto-endpoint" in err
    code, _, err = _portal("experiment", "stellar", "nothing-here", "--source", "kusto", "--kusto-endpoint",
                           up.query_url)
    assert code == 1 and "no recorded metrics or lifecycle for 'nothing-here'" in err
    up.endpoint.down = True
    code, _, err = _portal("experiment", "stellar", "stel-sweep", "--source", "kusto", "--kusto-endpoint",
                           up.query_url, "-o", "json")
    assert code == 1 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0].startswith("error: Kusto history query to ") and "failed" in lines[0], err
    assert any("hint:" in line and "--kusto-endpoint" in line for line in lines), err


def test_stellar_auto_prefers_the_local_store_and_degrades(up: LoopbackKusto, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.track import record_run

    local = tmp_path / "local"
    store, _ = ExperimentStore.init(local, project="stelproj")
    with store:
        record_run(store, "local-run", group="here", metrics={"loss": 0.5}, step=1)
    monkeypatch.setenv("TAU_EXP_STORE", str(local))
    up.endpoint.down = True  # the local target never touches Kusto
    code, out, err = _portal("experiment", "stellar", "local-run", "--source", "auto", "--kusto-endpoint",
                             up.query_url, "-o", "json")
    assert code == 0 and json.loads(out)["source"] == "local" and "warning" not in err
    # not local, Kusto down: a clear warning, then the local answer (not found)
    code, _, err = _portal("experiment", "stellar", "stel-sweep", "--source", "auto", "--kusto-endpoint",
                           up.query_url, "-o", "json")
    assert code == 1 and "Traceback" not in err
    assert "warning: Kusto history at" in err and "is unavailable" in err and "reading the local store" in err
    up.endpoint.down = False
    code, out, _ = _portal("experiment", "stellar", "stel-sweep", "--source", "auto", "--kusto-endpoint",
                           up.query_url, "-o", "json")
    assert code == 0 and json.loads(out)["source"] == "kusto"
    code, out, _ = _portal("experiment", "stellar", "local-run", "--source", "local", "-o", "json")
    assert code == 0 and json.loads(out)["source"] == "local"


@contextlib.contextmanager
def _server(kusto: LoopbackKusto, store: Path, workspace: str) -> Iterator[str]:
    """A real uvicorn Stellar server reading Kusto (``serve --source kusto --workspace WORKSPACE``)."""
    from taugrid_portal.stellar.kusto import KustoOrigin
    from taugrid_portal.stellar.server import bind, create_app, url_for

    sock = bind("127.0.0.1", 0)
    app = create_app(store, source="kusto", kusto=KustoOrigin(kusto.query_url, "Metrics", workspace=workspace))
    served = UvicornThread(app, sock, name="stellar-kusto", what="Stellar server", log_level="warning")
    served.start(timeout=30)
    try:
        yield url_for(sock)
    finally:
        served.stop()


@pytest.fixture
def served(up: LoopbackKusto, tmp_path: Path) -> Iterator[str]:
    with _server(up, tmp_path / "no-local-store", "aurora") as url:
        yield url


def test_stellar_server_reads_kusto(served: str, up: LoopbackKusto) -> None:
    snap = httpx.get(f"{served}/api/stellar/snapshot", params={"target": "stel-sweep"}, timeout=30).json()
    assert snap["store_path"].startswith("kusto://") and snap["target_type"] == "run_group"
    assert sorted(r["run_id"] for r in snap["runs"]) == ["stel-run-a", "stel-run-b"]
    detail = httpx.get(f"{served}/api/stellar/series", params={"target": "stel-sweep", "metric": "loss",
                                                              "run_id": "stel-run-a", "start_step": 10},
                       timeout=30).json()
    assert detail["chart"]["series"][0]["steps"] == list(range(10, STEPS))
    missing = httpx.get(f"{served}/api/stellar/snapshot", params={"target": "nothing-here"}, timeout=30)
    assert missing.status_code == 404 and "no recorded metrics or lifecycle" in missing.json()["detail"]
    assert "tau-stellar-kusto-" not in missing.text and "tau-stellar-kusto-" not in json.dumps(snap)
    assert httpx.get(f"{served}/healthz", timeout=10).json() == {"ok": True, "source": "kusto"}


def test_stellar_server_scopes_kusto_reads_to_its_workspace(up: LoopbackKusto, tmp_path: Path) -> None:
    with _server(up, tmp_path, "other") as url:
        r = httpx.get(f"{url}/api/stellar/snapshot", params={"target": "stel-sweep"}, timeout=30)
    assert r.status_code == 404, r.text  # the runs belong to workspace aurora


@pytest.mark.browser
def test_kusto_page_in_chromium(served: str) -> None:
    from playwright.sync_api import sync_playwright

    chromium = "/usr/bin/chromium"
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                     args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{served}/stellar?target=stel-sweep")
            page.wait_for_function("() => window.stellar && window.stellar.ready === true", timeout=30000)
            assert page.locator("figure.chart").count() == 2
            assert page.evaluate("window.stellar.charts[0].u.series.length") == 3  # x + two runs
            body = page.inner_text("body")
            assert "stel-run-a" in body and "kusto://" in body
        finally:
            browser.close()
    assert errors == []


def test_serve_command_reads_kusto(up: LoopbackKusto, tmp_path: Path) -> None:
    """``experiment serve --source kusto --workspace W --kusto-endpoint E`` as a chart runs it (a process)."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    main = Path(__file__).with_name("sidecar_main.py")
    proc = subprocess.Popen([sys.executable, str(main), "experiment", "serve", "--addr", f"127.0.0.1:{port}",
                             "--workspace", "aurora", "--source", "kusto", "--kusto-endpoint", up.query_url],
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TAU_EXP_STORE": str(tmp_path / "none")})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/api/stellar/snapshot", params={"target": "stel-run-b"},
                              timeout=30)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError(proc.stderr.read() if proc.poll() is not None else "no server") from None
                time.sleep(0.2)
        assert r.status_code == 200, r.text
        snap = r.json()
        assert snap["target_type"] == "run" and [x["state"] for x in snap["runs"]] == ["failed"]
        assert snap["store_path"].startswith("kusto://")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "kusto://" in err  # the startup line names the source, not a local store
