"""A local Ray for an ``engine: rayjob`` run (the ``tau[ray]`` extra).

The supervisor starts a Ray head for the run (``ray start --head --block`` in its own process
group, with its own temp dir and a free port), points the driver at it with ``RAY_ADDRESS`` and
tears the whole group down when the driver exits, so concurrent runs never share a Ray.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

START_TIMEOUT = 90.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_local_ray(workdir: Path, options: dict[str, Any],
                    say: Callable[[str], None]) -> tuple[subprocess.Popen[bytes], str]:
    """Start a Ray head for one run; returns the process and the address for ``RAY_ADDRESS``."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise RuntimeError("engine: rayjob needs Ray, which is not installed (pip install 'tau[ray]')")
    workdir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    argv = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", f"--port={port}",
            "--node-ip-address=127.0.0.1", "--include-dashboard=false", f"--temp-dir={workdir / 'tmp'}"]
    cpus = options.get("num_cpus")
    if cpus:
        text = str(cpus)
        try:
            count = float(text[:-1]) / 1000 if text.endswith("m") else float(text)
            argv.append(f"--num-cpus={max(1, int(count))}")
        except ValueError:
            pass
    log = open(workdir / "ray-head.log", "ab")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, process_group=0)
    log.close()
    say(f"starting a local Ray head on 127.0.0.1:{port}")
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the local Ray head exited with code {proc.returncode} "
                               f"(see {workdir / 'ray-head.log'})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.25)
    stop_local_ray(proc)
    raise RuntimeError(f"the local Ray head did not listen on port {port} within {START_TIMEOUT:.0f}s")


def stop_local_ray(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
