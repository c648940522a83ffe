"""Azurite, the npm Azure Storage emulator, on loopback ports: the one launcher every Blob or Queue test uses.

``tests/tools/ensure-azurite.sh`` installs it from npm once; :func:`start_azurite` runs it in memory with blob and
queue services on free 127.0.0.1 ports and waits until both accept connections.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import attrs

DEV_ACCOUNT = "devstoreaccount1"
#: Azurite's well-known development key (public, documented by Microsoft; it protects nothing).
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@attrs.define
class Azurite:
    """A running Azurite (blob + queue) on loopback ports; ``stop()`` ends it."""

    blob_port: int
    queue_port: int
    proc: subprocess.Popen[bytes]

    @property
    def blob_url(self) -> str:
        return f"http://127.0.0.1:{self.blob_port}/{DEV_ACCOUNT}"

    @property
    def queue_url(self) -> str:
        return f"http://127.0.0.1:{self.queue_port}/{DEV_ACCOUNT}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def azurite_launcher(repo: Path) -> Path:
    """The ``azurite`` launcher installed by ``tests/tools/ensure-azurite.sh`` (installs it once from npm)."""
    out = subprocess.run(["bash", str(repo / "tests" / "tools" / "ensure-azurite.sh")], check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    return Path(out).with_name("azurite")


def start_azurite(launcher: Path, workdir: Path, timeout: float = 60) -> Azurite:
    blob, queue = _free_port(), _free_port()
    proc = subprocess.Popen([str(launcher), "--blobHost", "127.0.0.1", "--blobPort", str(blob), "--queueHost",
                             "127.0.0.1", "--queuePort", str(queue), "--tablePort", str(_free_port()),
                             "--inMemoryPersistence", "--skipApiVersionCheck", "--loose", "--silent",
                             "--disableTelemetry"], cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    for port in (blob, queue):
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    tail = proc.stdout.read().decode()[-500:] if proc.stdout else ""
                    raise RuntimeError(f"Azurite did not start: {tail}") from None
                time.sleep(0.2)
    return Azurite(blob, queue, proc)


def repo_root() -> Path:
    """The repository holding ``tests/tools/ensure-azurite.sh``: ``TAU_REPO_ROOT``, else up from this file (an
    editable install), else up from the working directory (nox installs wheels and runs from the checkout)."""
    env = os.environ.get("TAU_REPO_ROOT")
    if env:
        return Path(env)
    for parent in [*Path(__file__).resolve().parents, Path.cwd(), *Path.cwd().parents]:
        if (parent / "tests" / "tools" / "ensure-azurite.sh").is_file():
            return parent
    raise RuntimeError("cannot find tests/tools/ensure-azurite.sh; set TAU_REPO_ROOT to the TauGrid checkout")
