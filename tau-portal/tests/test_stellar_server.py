"""The read-only Stellar server over real HTTP (uvicorn on a random loopback port) and its CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

#: a real server thread or process answering while the test runs; the commands that run to completion are not
#: real-clock tests and stay out of `nox -s flaky`
REALCLOCK = pytest.mark.realclock


def _history(path: Path, steps: int, seed: int) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for s in range(steps):
            fh.write(json.dumps({"_step": s, "_timestamp": 1760000000.0 + s, "loss": 1.0 / (1 + s + seed)}) + "\n")
    return path


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import import_jsonl, init_experiment

    root = tmp_path_factory.mktemp("stellar-server") / "store"
    store, _ = ExperimentStore.init(root, project="demo")
    with store:
        init_experiment(store, "sweep", project="demo")
        for i in range(2):
            hist = _history(root.parent / f"r{i}.jsonl", 500, i)
            import_jsonl(store, run=f"run-{i}", history=[str(hist)], experiment="sweep")
    return root


@pytest.fixture(scope="module")
def base_url(store_path: Path) -> Iterator[str]:
    yield from _serve(store_path)


def _serve(store_path: Path) -> Iterator[str]:
    import uvicorn

    from taugrid_portal.stellar.server import bind, create_app, url_for

    sock = bind()
    server = uvicorn.Server(uvicorn.Config(create_app(store_path), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    yield url_for(sock)
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


def _get(base_url: str, path: str, **kw: Any) -> httpx.Response:
    return httpx.get(base_url + path, timeout=30, **kw)


def test_default_bind_is_loopback() -> None:
    from taugrid_portal.stellar.server import DEFAULT_HOST, bind, url_for

    sock = bind()
    try:
        assert DEFAULT_HOST == "127.0.0.1"
        assert sock.getsockname()[0] == "127.0.0.1" and sock.getsockname()[1] > 0
        assert url_for(sock).startswith("http://127.0.0.1:")
    finally:
        sock.close()


@REALCLOCK
def test_endpoints(base_url: str, store_path: Path) -> None:
    health = _get(base_url, "/healthz")
    assert health.status_code == 200
    assert health.json() == {"ok": True, "source": "local"}  # the store's location is never disclosed

    snap = _get(base_url, "/api/stellar/snapshot", params={"target": "sweep", "max_points": "40"})
    assert snap.status_code == 200 and snap.headers["content-type"].startswith("application/json")
    body = snap.json()
    assert body["target_type"] == "experiment" and len(body["runs"]) == 2
    assert all(s["rendered_points"] <= 40 for s in body["charts"][0]["series"])

    series = _get(base_url, "/api/stellar/series",
                  params={"target": "sweep", "metric": "loss", "run_id": "run-1", "start_step": "10",
                          "end_step": "19"})
    assert series.status_code == 200
    detail = series.json()
    assert detail["chart"]["series"][0]["steps"] == list(range(10, 20))

    page = _get(base_url, "/stellar", params={"target": "sweep"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'data-series-path="/api/stellar/series"' in page.text and "connect-src 'self'" in page.text.replace(
        "&#39;", "'")

    index = _get(base_url, "/")
    assert index.json()["service"] == "tau.exp.stellar"


@REALCLOCK
def test_every_response_has_nosniff(base_url: str) -> None:
    paths = ["/", "/healthz", "/stellar?target=sweep", "/api/stellar/snapshot?target=sweep",
             "/api/stellar/series?target=sweep&metric=loss", "/api/stellar/snapshot?target=nope", "/nope",
             "/api/stellar/snapshot"]
    for path in paths:
        r = _get(base_url, path)
        assert r.headers.get("x-content-type-options") == "nosniff", path
        assert r.headers.get("x-frame-options") == "DENY", path


@REALCLOCK
def test_errors_are_clear_json(base_url: str) -> None:
    r = _get(base_url, "/api/stellar/snapshot", params={"target": "nope"})
    assert r.status_code == 404
    body = r.json()
    assert body["code"] == "NOT_FOUND" and "'nope'" in body["detail"] and body["status"] == 404
    r = _get(base_url, "/stellar", params={"target": "sweeep"})
    assert r.status_code == 404 and "sweep" in r.json()["hint"]
    r = _get(base_url, "/api/stellar/snapshot")
    assert r.status_code == 400 and r.json()["detail"] == "target query parameter is required"
    r = _get(base_url, "/api/stellar/series", params={"target": "sweep"})
    assert r.status_code == 400 and r.json()["detail"] == "metric query parameter is required"
    r = _get(base_url, "/api/stellar/series", params={"target": "sweep", "metric": "loss", "max_points": "0"})
    assert r.status_code == 400 and "max_points" in r.json()["detail"]
    r = _get(base_url, "/api/stellar/series", params={"target": "sweep", "metric": "loss", "start_step": "x"})
    assert r.status_code == 400 and "start_step must be an integer" in r.json()["detail"]
    r = _get(base_url, "/api/stellar/series", params={"target": "sweep", "metric": "nope"})
    assert r.status_code == 404


@REALCLOCK
def test_no_write_routes(base_url: str) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in ("/stellar?target=sweep", "/api/stellar/snapshot?target=sweep", "/healthz"):
            r = httpx.request(method, base_url + path, timeout=30)
            assert r.status_code == 405, (method, path)
            assert r.json()["code"] == "METHOD_NOT_ALLOWED"
            assert r.headers["x-content-type-options"] == "nosniff"


@REALCLOCK
def test_healthz_reports_a_broken_store(tmp_path: Path) -> None:
    for url in _serve(tmp_path / "missing"):
        r = httpx.get(url + "/healthz", timeout=30)
        assert r.status_code == 503 and r.json()["ok"] is False and "does not exist" in r.json()["error"]
        assert r.headers["x-content-type-options"] == "nosniff"
        r = httpx.get(url + "/api/stellar/snapshot?target=x", timeout=30)
        assert r.status_code == 404 and "does not exist" in r.json()["detail"]


@REALCLOCK
def test_serve_command_binds_loopback_by_default(store_path: Path) -> None:
    env = {**os.environ, "TAU_EXP_STORE": str(store_path), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from taugrid_portal.cli import main; main()", "experiment", "serve"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"serving taugrid-portal experiment stellar at (http://127\.0\.0\.1:(\d+))", line)
        assert match, line
        url = match.group(1)
        deadline = time.monotonic() + 30
        while True:
            try:
                r = httpx.get(url + "/healthz", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None, "serve did not come up"
                time.sleep(0.1)
        assert r.status_code == 200 and r.json()["ok"] is True
        assert r.headers["x-content-type-options"] == "nosniff"
        proc.send_signal(signal.SIGINT)  # Ctrl-C stops the server cleanly
        assert proc.wait(timeout=15) == 0
        rest = proc.stderr.read()
        assert "stopped" in rest and "Traceback" not in rest and "error:" not in rest
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_stellar_command_outputs(store_path: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from taugrid_portal.cli import cli

    runner = CliRunner()
    env = {"TAU_EXP_STORE": str(store_path)}
    r = runner.invoke(cli, ["experiment", "stellar", "sweep", "-o", "json", "--max-points", "25"], env=env)
    assert r.exit_code == 0, r.output
    snap = json.loads(r.stdout)
    assert snap["sampling"]["max_points_per_series"] == 25
    out = tmp_path / "page.html"
    r = runner.invoke(cli, ["experiment", "dashboard", "sweep", "--out", str(out)], env=env)
    assert r.exit_code == 0, r.output
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and "stellar-snapshot" in html
    r = runner.invoke(cli, ["experiment", "stellar", "sweep", "-o", "tui"], env=env)
    assert r.exit_code == 0 and "Stellar dashboard: sweep (experiment)" in r.stdout


def test_stellar_command_errors(store_path: Path, tmp_path: Path) -> None:
    from taugrid_portal.cli import main

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        code = "import sys; from taugrid_portal.cli import main; main(sys.argv[1:])"
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "TAU_EXP_STORE": str(store_path)})

    del main
    r = run("experiment", "stellar", "nope")
    assert r.returncode == 1 and r.stderr.startswith("error: no experiment, run group or run named 'nope'")
    assert "Traceback" not in r.stderr
    r = run("experiment", "stellar", "sweep", "--max-points", "0")
    assert r.returncode == 2 and "--max-points must be at least 1" in r.stderr
    r = run("experiment", "stellar", "sweep", "--out", str(tmp_path / "missing-dir" / "x.html"))
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = run("experiment", "stellar", "sweep", "--store", str(tmp_path / "no-store"))
    assert r.returncode == 1 and "does not exist" in r.stderr and "hint:" in r.stderr


def test_stellar_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from taugrid_portal.cli import main\n"
        "for verb in ('stellar', 'dashboard', 'serve', 'open'):\n"
        "    try:\n"
        "        main(['experiment', verb, '--help'])\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0, verb\n"
        "heavy = [m for m in ('polars', 'pyarrow', 'starlette', 'uvicorn', 'jinja2') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout
    assert "Examples:" in r.stdout and "-o, --output [html|json|tui]" in r.stdout


def _with_browser(store_path: Path, tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    """Start ``taugrid-portal experiment ARGS`` with a $BROWSER that records the URL it is asked to open."""
    marker = tmp_path / "opened.txt"
    fake_browser = tmp_path / "browser.sh"
    fake_browser.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {marker}\n', encoding="utf-8")
    fake_browser.chmod(0o755)
    env = {**os.environ, "TAU_EXP_STORE": str(store_path), "PYTHONUNBUFFERED": "1", "BROWSER": f"{fake_browser} %s"}
    proc = subprocess.Popen([sys.executable, "-c", "from taugrid_portal.cli import main; main()", "experiment", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return proc, marker


def _opened(proc: subprocess.Popen[str], marker: Path) -> str:
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None, "the browser was not opened"
        time.sleep(0.1)
    return marker.read_text()


def _interrupt(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@REALCLOCK
@pytest.mark.slow
def test_serve_open_opens_the_default_target_with_its_metric(store_path: Path, tmp_path: Path) -> None:
    proc, marker = _with_browser(store_path, tmp_path, "serve", "--addr", "0.0.0.0:0", "--default-target", "sweep",
                                 "--metric", "loss", "--open")
    try:
        url = _opened(proc, marker)
        # a wildcard bind is shown and opened as loopback
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/stellar\?target=sweep&metric=loss", url), url
        r = httpx.get(url, timeout=30)
        assert r.status_code == 200 and "stellar-snapshot" in r.text
    finally:
        _interrupt(proc)


@REALCLOCK
@pytest.mark.slow
def test_open_serves_and_opens_the_default_browser(store_path: Path, tmp_path: Path) -> None:
    proc, marker = _with_browser(store_path, tmp_path, "open", "sweep")
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/stellar\?target=sweep", url), url
        assert _opened(proc, marker) == url
        r = httpx.get(url, timeout=30)
        assert r.status_code == 200 and "stellar-snapshot" in r.text
        assert r.headers["x-content-type-options"] == "nosniff"
    finally:
        _interrupt(proc)


def test_open_rejects_unknown_targets_before_serving(store_path: Path) -> None:
    code = "import sys; from taugrid_portal.cli import main; main(sys.argv[1:])"
    r = subprocess.run([sys.executable, "-c", code, "experiment", "open", "swep", "--no-browser"],
                       capture_output=True, text=True, timeout=60, env={**os.environ, "TAU_EXP_STORE": str(store_path)})
    assert r.returncode == 1 and "no experiment, run group or run named 'swep'" in r.stderr
    assert "did you mean 'sweep'" in r.stderr


@REALCLOCK
def test_snapshots_are_cached_until_the_store_changes(tmp_path: Path) -> None:
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import import_jsonl

    root = tmp_path / "store"
    store, _ = ExperimentStore.init(root, project="demo")
    with store:
        import_jsonl(store, run="run-a", history=[str(_history(tmp_path / "a.jsonl", 50, 0))], group="g")
    for url in _serve(root):
        first = httpx.get(url + "/api/stellar/snapshot?target=g", timeout=30).json()
        time.sleep(1.1)  # generated_at has one-second resolution
        again = httpx.get(url + "/api/stellar/snapshot?target=g", timeout=30).json()
        assert again["generated_at"] == first["generated_at"]  # served from the cache
        with ExperimentStore.open(root) as writer:  # another process/connection writes
            import_jsonl(writer, run="run-b", history=[str(_history(tmp_path / "b.jsonl", 50, 1))], group="g")
        fresh = httpx.get(url + "/api/stellar/snapshot?target=g", timeout=30).json()
        assert sorted(r["run_id"] for r in fresh["runs"]) == ["run-a", "run-b"]
        page = httpx.get(url + "/stellar?target=g", timeout=30)
        assert "run-b" in page.text


@REALCLOCK
def test_artifact_index_and_sandboxed_content(base_url: str) -> None:
    listing = _get(base_url, "/api/stellar/artifacts", params={"target": "sweep"})
    assert listing.status_code == 200 and listing.json()["target_type"] == "experiment"
    arts = listing.json()["artifacts"]
    assert {a["run_id"] for a in arts} == {"run-0", "run-1"}, arts  # the imported JSONL histories
    first = next(a for a in arts if a["run_id"] == "run-0")
    content = _get(base_url, first["fetch_url"])
    assert content.status_code == 200 and '"_step": 0' in content.text
    assert content.headers["content-security-policy"].startswith("sandbox;")
    assert content.headers["x-frame-options"] == "SAMEORIGIN"
    foreign = _get(base_url, "/api/stellar/artifact", params={"target": "run-1", "artifact": first["artifact_id"]})
    assert foreign.status_code == 404 and foreign.json()["code"] == "NOT_FOUND"
    missing = _get(base_url, "/api/stellar/artifact", params={"target": "run-1"})
    assert missing.status_code == 400 and missing.json()["detail"] == "artifact query parameter is required"
