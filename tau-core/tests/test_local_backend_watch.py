"""The local backend's status watch: when `watch_status` ends, against supervisors this test controls."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tau_core.backends.local.backend import LocalBackend
from tau_core.lifecycle import RunRef
from tau_core.lifecycle.base import FailureReason

pytestmark = pytest.mark.realclock  # real supervisor processes and signals on the wall clock


def _hand_run(backend: LocalBackend, procs: list[subprocess.Popen[bytes]], state: str,
              child: bool = False) -> tuple[RunRef, Any]:
    """A registered run whose supervisor is a real process this test controls (and kills), at ``state``."""
    from tau_core.backends.local import oom
    from tau_core.backends.local.registry import create_run_dir, now_iso
    from tau_core.fsutil import write_json_atomic

    for _ in range(2 if child else 1):
        procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))
    sup = procs[0]
    run = create_run_dir("watch-261202-000000-abcd")
    created = now_iso()
    record: dict[str, Any] = {
        "run_id": run.run_id, "name": "watch", "created_at": created, "updated_at": created, "started_at": created,
        "state": state, "attempt": 1, "attempts": [], "max_attempts": 1, "history": [], "spawned_at": created,
        "supervisor": {"pid": sup.pid, "start_ticks": oom.start_ticks(sup.pid)}, "evidence_done": False}
    if child:
        record["child"] = {"pid": procs[1].pid, "start_ticks": oom.start_ticks(procs[1].pid)}
    if state in ("Succeeded", "Failed", "Cancelled"):
        record["finished_at"] = created
        record["attempts"] = [{"attempt": 1, "started_at": created, "finished_at": created, "state": state}]
    write_json_atomic(run.run_file, record)
    return RunRef(name=run.run_id, backend="local"), run


def _watch_in_thread(backend: LocalBackend, ref: RunRef, **kw: Any) -> tuple[list[Any], Any]:
    import threading

    frames: list[Any] = []

    def collect() -> None:
        for st in backend.watch_status(ref, interval=0.1, **kw):
            frames.append(st)

    thread = threading.Thread(target=collect, daemon=True)
    thread.start()
    return frames, thread


@pytest.mark.parametrize("settle", ["evidence written", "supervisor killed"])
def test_watch_ends_when_the_run_settles_without_another_change(backend: LocalBackend, settle: str) -> None:
    """Issue 21: the record was already Succeeded when the watch began, with the supervisor still writing
    the evidence; settling it changes no phase, and the watch used to poll forever."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        ref, run = _hand_run(backend, procs, "Succeeded")
        frames, thread = _watch_in_thread(backend, ref)
        deadline = time.monotonic() + 30
        while not frames:
            assert time.monotonic() < deadline, "no first frame"
            time.sleep(0.05)
        assert not frames[0].terminal and frames[0].extra.state == "Succeeded"
        if settle == "evidence written":
            run.update(lambda r: r.update(evidence_done=True))
        else:
            procs[0].kill()
            procs[0].wait()
        thread.join(timeout=30)
        assert not thread.is_alive(), f"watch_status still polling after the run settled ({settle})"
        assert frames[-1].terminal and frames[-1].succeeded
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_watch_ends_when_the_supervisor_dies_mid_attempt(backend: LocalBackend) -> None:
    """A supervisor killed while its attempt ran: the watch ends on the Evicted frame that records the
    interrupted attempt (issue 19's evidence), not on the caller's patience."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        ref, _run = _hand_run(backend, procs, "Running", child=True)
        frames, thread = _watch_in_thread(backend, ref)
        deadline = time.monotonic() + 30
        while not frames:
            assert time.monotonic() < deadline, "no first frame"
            time.sleep(0.05)
        assert not frames[0].terminal
        procs[0].kill()
        procs[0].wait()
        thread.join(timeout=30)
        assert not thread.is_alive(), "watch_status still polling after the supervisor died"
        last = frames[-1]
        assert last.terminal and last.failure is FailureReason.EVICTED, last
        assert last.extra.attempts[-1].interrupted and f"pid {procs[1].pid}" in last.extra.attempts[-1].message
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_watch_ends_after_the_callers_timeout(backend: LocalBackend) -> None:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        ref, _run = _hand_run(backend, procs, "Running", child=True)
        frames, thread = _watch_in_thread(backend, ref, timeout=0.5)
        thread.join(timeout=30)
        assert not thread.is_alive(), "watch_status ignored its timeout"
        assert frames and not frames[-1].terminal and frames[-1].extra.state == "Running"
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_ctrl_c_stops_the_watch_with_exit_130(backend: LocalBackend) -> None:
    """The bound on the watch keeps Ctrl-C as it was: `tau run status --watch` stops, says the run keeps
    running, and exits 130."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        ref, _run = _hand_run(backend, procs, "Running", child=True)
        tau = str(Path(sys.executable).parent / "tau")
        watch = subprocess.Popen([tau, "run", "status", ref.name, "--watch", "--interval", "200ms"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert watch.stdout is not None
        assert watch.stdout.readline().startswith(f"watching {ref.name}")
        watch.send_signal(signal.SIGINT)
        _out, err = watch.communicate(timeout=30)
        assert watch.returncode == 130, err
        assert f"{ref.name} keeps running" in err
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
