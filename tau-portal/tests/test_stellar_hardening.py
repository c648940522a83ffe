"""Stellar's network surface (issue 19, E18-E19): Host allowlist, no store path, exposure warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from taugrid_portal.stellar.server import allowed_hosts, host_allowed


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import import_jsonl

    root = tmp_path_factory.mktemp("stellar-hosts") / "secret-location" / "store"
    store, _ = ExperimentStore.init(root, project="demo")
    hist = root.parent / "h.jsonl"
    hist.write_text("".join(json.dumps({"_step": s, "loss": 1.0 / (1 + s)}) + "\n" for s in range(20)))
    with store:
        import_jsonl(store, run="run-0", history=[str(hist)])
    return root


@pytest.fixture(scope="module")
def base_url(store_path: Path) -> Iterator[str]:
    import uvicorn

    from taugrid_portal.stellar.server import bind, create_app, url_for

    sock = bind()
    server = uvicorn.Server(uvicorn.Config(create_app(store_path, hosts=allowed_hosts("127.0.0.1", env={})),
                                           log_level="warning", lifespan="off"))
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


@pytest.mark.parametrize("host", ["evil.example", "rebind.attacker.test:8080", "localhost.evil.example", ""])
def test_forged_host_headers_are_refused(base_url: str, host: str) -> None:
    for path in ("/", "/healthz", "/api/stellar/snapshot?target=run-0", "/nope"):
        r = httpx.get(base_url + path, headers={"Host": host}, timeout=30)
        assert r.status_code == 421, (path, r.status_code)
        assert "run-0" not in r.text and "loss" not in r.text
        assert r.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST:1234", "[::1]:80", "10.1.2.3:9"])
def test_bound_names_and_ip_literals_are_served(base_url: str, host: str) -> None:
    assert httpx.get(base_url + "/healthz", headers={"Host": host}, timeout=30).status_code == 200


def test_no_response_discloses_the_store_path(base_url: str, store_path: Path) -> None:
    for path in ("/", "/healthz", "/nope", "/api/stellar/snapshot?target=missing", "/api/stellar/snapshot?target=run-0",
                 "/stellar?target=run-0", "/api/stellar/series?target=run-0&metric=loss"):
        for method in ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"):
            r = httpx.request(method, base_url + path, timeout=30)
            assert r.status_code < 500, (method, path, r.status_code)
            assert "secret-location" not in r.text, (method, path)
            assert str(store_path) not in r.text


def test_configured_names_and_wildcards() -> None:
    hosts = allowed_hosts("127.0.0.1", env={"TAU_STELLAR_ALLOWED_HOSTS": "portal.example.org, *.corp.example"})
    assert host_allowed("portal.example.org", hosts) and host_allowed("a.corp.example:443", hosts)
    assert not host_allowed("corp.example.evil", hosts) and not host_allowed("example.org", hosts)
    assert not host_allowed("evil.example", allowed_hosts("127.0.0.1", env={}))


@pytest.mark.parametrize("command", ["serve", "open"])
def test_binding_all_interfaces_warns(store_path: Path, command: str) -> None:
    args = ["experiment", "serve"] if command == "serve" else ["experiment", "open", "run-0", "--no-browser"]
    env = {**os.environ, "TAU_EXP_STORE": str(store_path), "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "from taugrid_portal.cli import main; main()", *args,
                             "--host", "0.0.0.0"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first.startswith("warning: binding 0.0.0.0 exposes the store"), first
    finally:
        proc.kill()
        proc.wait()
