"""Kill the CLI in the middle of a register, then re-run: the record is whole or absent, and a retry completes."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


def _tau() -> list[str]:
    exe = shutil.which("tau")
    return [exe] if exe else [sys.executable, "-m", "tau_core.cli"]


def _open_when_read(fifo: Path, proc: subprocess.Popen[bytes]):  # type: ignore[no-untyped-def]
    """The FIFO's write end, once the CLI has opened the read end (ENXIO until then)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
        else:
            os.set_blocking(fd, True)
            return os.fdopen(fd, "wb")
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the CLI exited ({proc.returncode}) before it read the FIFO: {err!r} {out!r}")
        assert time.monotonic() < deadline, "the CLI never opened the FIFO"
        time.sleep(0.02)


def test_kill_mid_register_leaves_nothing_and_retry_completes(tmp_path, dataset_dir):  # type: ignore[no-untyped-def]
    registry = tmp_path / "registry"
    fifo = dataset_dir / "shards" / "zz-stream.bin"
    os.mkfifo(fifo)
    args = [*_tau(), "data", "dataset", "register", "web@1.0", "--registry", f"file://{registry}",
            "--purpose", "pretrain", "--from", str(dataset_dir)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The FIFO opens for writing only once the CLI has opened it to hash it: the kill lands mid-hash. Opened
    # non-blocking in a loop, so a CLI that exits before it gets there fails the test instead of hanging it.
    with _open_when_read(fifo, proc) as writer:
        writer.write(b"\x01\x02" * 1024)
        writer.flush()
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    record = registry / "dataset-registry" / "datasets" / "web" / "1.0" / "dataset.json"
    assert not record.exists()

    # What a kill during the record write itself leaves behind: a hidden, partial temporary file.
    record.parent.mkdir(parents=True, exist_ok=True)
    (record.parent / ".dataset.json.999.1.tmp").write_text('{"name": "web", "vers')
    listed = subprocess.run([*_tau(), "data", "dataset", "list", "--registry", f"file://{registry}", "-o", "json"],
                            capture_output=True, text=True, check=True)
    assert json.loads(listed.stdout) == []

    fifo.unlink()
    (dataset_dir / "shards" / "zz-stream.bin").write_bytes(b"\x01\x02" * 1024)
    retry = subprocess.run(args, capture_output=True, text=True)
    assert retry.returncode == 0, retry.stderr
    data = json.loads(record.read_text())
    assert data["total_bytes"] == 4096 + 2048 + 20 + 2048 and len(data["files"]) == 4
    verify = subprocess.run([*_tau(), "data", "dataset", "verify", "web@1.0", "--registry", f"file://{registry}"],
                            capture_output=True, text=True)
    assert verify.returncode == 0 and "web@1.0: OK" in verify.stdout
    assert Path(record).stat().st_nlink == 1


DRIVER = """
import sys
from tau_core.cli import cli, run
from tau_core.hookspecs import hookimpl
from tau_core.plugins import Host, set_host

endpoint, account, key = sys.argv[1:4]

class Azurite:
    @hookimpl
    def tau_register_storage_backends(self, register):
        def factory(url, location=None, **options):
            from azure.core.credentials import AzureNamedKeyCredential
            from tau_data.azure import AzureBlobStore
            return AzureBlobStore(url, location, credential=AzureNamedKeyCredential(account, key),
                                  account_url=endpoint, **options)
        register("az", factory, priority=10)

set_host(Host.create(extra_plugins=[("azurite", Azurite())]))
sys.exit(run(cli, sys.argv[4:]))
"""


def test_kill_mid_register_on_azure_leaves_nothing(dataset_dir, azurite, az_registry, azurite_account):  # type: ignore[no-untyped-def]
    registry = az_registry
    account, key = azurite_account
    fifo = dataset_dir / "shards" / "zz-stream.bin"
    os.mkfifo(fifo)
    args = [sys.executable, "-c", DRIVER, azurite, account, key, "data", "dataset", "register", "web@1.0",
            "--registry", registry, "--purpose", "pretrain", "--from", str(dataset_dir)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with open(fifo, "wb") as writer:
        writer.write(b"\x01\x02" * 1024)
        writer.flush()
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    listed = subprocess.run([*args[:6], "data", "dataset", "list", "--registry", registry, "-o", "json"],
                            capture_output=True, text=True)
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stderr
    fifo.unlink()
    fifo.write_bytes(b"\x01\x02" * 1024)
    retry = subprocess.run(args, capture_output=True, text=True)
    assert retry.returncode == 0, retry.stderr
    verify = subprocess.run([*args[:6], "data", "dataset", "verify", "web@1.0", "--registry", registry],
                            capture_output=True, text=True)
    assert verify.returncode == 0 and "web@1.0: OK" in verify.stdout
