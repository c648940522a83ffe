"""``experiment serve``/``open`` speak the reference flags (``--addr``, ``--workspace``, ``--source``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def store(tmp_path: Path) -> Path:
    from taugrid_portal.store import ExperimentStore

    ExperimentStore.init(tmp_path / "store", project="demo")[0].close()
    return tmp_path / "store"


def test_serve_listens_on_addr_with_an_optional_workspace(store: Path) -> None:
    port = _free_port()
    entry = "from taugrid_portal.cli import main; main()"
    proc = subprocess.Popen([sys.executable, "-c", entry, "experiment", "serve", "--addr", f"127.0.0.1:{port}",
                             "--workspace", "aurora", "--source", "local", "--store", str(store)],
                            stderr=subprocess.PIPE, text=True, env={**os.environ})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError(proc.stderr.read() if proc.poll() is not None else "no server") from None
                time.sleep(0.1)
        assert r.status_code == 200 and r.json()["ok"] is True
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize(("args", "message"), [
    (["--addr", "127.0.0.1:0", "--host", "0.0.0.0"], "--addr cannot be combined with --host"),
    (["--addr", "nope"], "must be HOST:PORT"),
    (["--source", "kusto"], "--source kusto needs --workspace"),
    (["--source", "kusto", "--workspace", "aurora"], "--source kusto reads Kusto through --kusto-endpoint"),
    (["--source", "kusto", "--workspace", "aurora", "--kusto-query-command", "kq"],
     "--kusto-query-command and --kusto-metrics-file are not supported"),
    (["--source", "auto", "--kusto-endpoint", "https://k.example"], "--source auto needs --workspace"),
    (["--kusto-endpoint", "http://k.example"], "must be an https:// cluster URL"),
    (["--discovery-since", "400d"], "is longer than --max-discovery-since"),
    (["--kusto-workspace", "a", "--workspace", "b"], "conflicts with --workspace"),
    (["--workspace", "Not A Name"], "is not a workspace name"),
])
def test_serve_refuses_bad_reference_flags(store: Path, capsys, args: list[str], message: str) -> None:
    from tau_core.cli import run
    from taugrid_portal.cli import cli

    code = run(cli, ["experiment", "serve", "--store", str(store), *args], prog_name="taugrid-portal")
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
