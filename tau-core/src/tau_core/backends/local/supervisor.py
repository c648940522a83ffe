"""The local run supervisor: ``python -m tau_core.backends.local.supervisor RUN_DIR``.

Started by :class:`~tau_core.backends.local.backend.LocalBackend` in a new session, it forks once more and
lets its parent exit, so it outlives the CLI and is never a zombie of it.  It then

1. records ``Started``, runs the target in its own process group (``Running``), and appends every line
   of its merged stdout/stderr to ``output.log`` with a UTC timestamp;
2. enforces the memory limit (``RLIMIT_AS`` in the child, RSS sampling of the group here);
3. honours a cancel (``SIGTERM`` to the supervisor or the ``cancel`` file): ``SIGTERM`` to the group,
   ``SIGKILL`` after the grace period;
4. classifies the exit, publishes staged artifacts on success, and retries following ``resilience.*``
   (bounded exponential backoff, ``TAU_RETRY_*`` and ``TAU_RESUME_FROM`` in the next attempt);
5. imports metric chunks into the experiment store while the run progresses and writes the terminal
   ``tau/run_status`` marker at the end.

Every state change is an atomic rewrite of ``run.json``.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

from tau_core.backends.local import oom
from tau_core.backends.local.log_archive import LogArchive, archive_path, max_bytes
from tau_core.backends.local.registry import RunDir, now_iso

TICK = 0.05
RSS_INTERVAL = 0.2
EVIDENCE_INTERVAL = 1.0
DEFAULT_GRACE = 10.0


def ts() -> bytes:
    return now_iso().encode()


class LogWriter:
    """Appends timestamped lines to ``output.log``; safe to use from several threads."""

    def __init__(self, path: Path, archive: LogArchive | None = None) -> None:
        self.fh: BinaryIO = open(path, "ab", buffering=0)
        self.lock = threading.Lock()
        self.tail: collections.deque[bytes] = collections.deque(maxlen=64)
        self.archive = archive  # the program's own lines, also in <output>/logs/ (as the cluster wrapper does)

    def line(self, data: bytes, *, keep: bool = True) -> None:
        with self.lock:
            self.fh.write(ts() + b" " + data.rstrip(b"\r\n") + b"\n")
            if keep and self.archive is not None:
                self.archive.write(data)
        if keep:
            self.tail.append(data)

    def tau(self, message: str) -> None:
        self.line(b"[tau] " + message.encode(), keep=False)

    def close(self) -> None:
        self.fh.close()
        if self.archive is not None:
            self.archive.close()


def pump(stream: BinaryIO, log: LogWriter) -> None:
    """Copy a child's output into the log, one timestamped line at a time."""
    pending = b""
    while True:
        try:
            chunk = os.read(stream.fileno(), 65536)
        except OSError:
            break
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            log.line(line)
        if len(pending) > 1 << 20:  # a very long line without a newline: write it out in pieces
            log.line(pending)
            pending = b""
    if pending:
        log.line(pending)
    stream.close()


def _archive(plan: dict[str, Any], run_id: str) -> LogArchive | None:
    """``<output>/logs/<run-id>-main.log`` (``-driver`` for a Ray job), like the cluster's entrypoint wrapper."""
    output = plan.get("output_dir")
    if not output:
        return None
    container = "driver" if plan.get("engine") == "rayjob" else "main"
    return LogArchive(archive_path(output, run_id, container), max_bytes())


class Supervisor:
    def __init__(self, run_dir: RunDir) -> None:
        self.run = run_dir
        self.plan: dict[str, Any] = run_dir.request()
        self.cancel_requested = False
        self.log = LogWriter(run_dir.log_file, _archive(self.plan, run_dir.run_id))
        self.bridge: Any = None
        self._evidence_stop = threading.Event()
        self._evidence_attempt = 1
        self.ray_head: Any = None  # tau_core.backends.local.ray.RayHead of an engine: rayjob run, once started

    # -- signals ---------------------------------------------------------------------------
    def _on_term(self, signum: int, _frame: Any) -> None:
        self.cancel_requested = True

    def _cancel_asked(self) -> bool:
        if not self.cancel_requested and self.run.cancel_file.exists():
            self.cancel_requested = True
        return self.cancel_requested

    def _grace(self) -> float:
        try:
            return float(json.loads(self.run.cancel_file.read_text()).get("grace_seconds", DEFAULT_GRACE))
        except (OSError, ValueError, AttributeError):
            return DEFAULT_GRACE

    # -- evidence --------------------------------------------------------------------------
    def _start_evidence(self) -> threading.Thread | None:
        if not self.plan.get("history"):
            return None

        def loop() -> None:
            # imported here, off the path that starts the workload
            from tau_core.backends.local.evidence import EvidenceBridge

            try:
                self.bridge = EvidenceBridge(self.run, self.plan)
            except Exception:
                self._diag("evidence bridge failed:\n" + _traceback())
                return
            while not self._evidence_stop.wait(EVIDENCE_INTERVAL):
                try:
                    self.bridge.poll(self._evidence_attempt)
                except Exception:
                    self._diag("evidence poll failed:\n" + _traceback())

        thread = threading.Thread(target=loop, name="tau-evidence", daemon=True)
        thread.start()
        return thread

    def _diag(self, text: str) -> None:
        with open(self.run.supervisor_log, "a", encoding="utf-8") as fh:
            fh.write(f"{now_iso()} {text}\n")

    # -- one attempt -----------------------------------------------------------------------
    def _attempt_env(self, retry_index: int, resume_from: str | None, retry_reason: str | None,
                     staging: Path | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TAU_")}
        env.update(self.plan["env"])
        max_retries = int(self.plan["retry"]["max_retries"])
        if retry_reason is not None:
            env["TAU_RETRY_ATTEMPT"] = str(retry_index)
            env["TAU_RETRY_MAX"] = str(max_retries)
            env["TAU_RETRY_REASON"] = retry_reason
        if resume_from:
            env["TAU_RESUME_FROM"] = resume_from
        if staging is not None:
            env["TAU_OUTPUT_STAGING_DIR"] = str(staging)
        return env

    def run_attempt(self, attempt: int, max_attempts: int, resume_from: str | None,
                    retry_reason: str | None, retry_index: int = 0) -> dict[str, Any]:
        plan = self.plan
        output = Path(plan["output_dir"])
        output.mkdir(parents=True, exist_ok=True)
        publication_id = _token() if plan.get("staged") else None
        staging = Path(plan["staging_root"]) / f"attempt-{attempt}" if publication_id else None
        if staging is not None:
            staging.mkdir(parents=True, exist_ok=True)
        env = self._attempt_env(retry_index, resume_from, retry_reason, staging)
        limit = plan.get("memory_limit")
        info: dict[str, Any] = {"attempt": attempt, "started_at": now_iso(), "resume_from": resume_from,
                                "retry_reason": retry_reason, "publication_id": publication_id}
        self.log.tail.clear()  # MemoryError detection looks at this attempt's output only
        what = (f"Ray job {plan['ray']['entrypoint']}" if plan.get("engine") == "rayjob"
                else f"{' '.join(plan['argv'])} (cwd {plan['cwd']})")
        head = f"attempt {attempt}/{max_attempts} starting: {what}"
        if resume_from:
            head += f"; TAU_RESUME_FROM={resume_from}"
        self.log.tau(head)
        if plan.get("engine") == "rayjob":
            from tau_core.backends.local import ray_job

            info = ray_job.run_attempt(self, info, env)
        else:
            info = self._process_attempt(info, env, limit, max_attempts)
        return self._finish_attempt(info, output, staging, publication_id, max_attempts)

    def _process_attempt(self, info: dict[str, Any], env: dict[str, str], limit: int | None,
                         max_attempts: int) -> dict[str, Any]:
        plan, attempt = self.plan, info["attempt"]
        try:
            proc = subprocess.Popen(
                plan["argv"], cwd=plan["cwd"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, process_group=0,
                preexec_fn=(lambda: oom.set_address_space_limit(limit)) if limit else None,
            )
        except OSError as exc:
            message = f"could not start {plan['argv'][0]}: {exc.strerror or exc}"
            self.log.tau(message)
            return {**info, "finished_at": now_iso(), "state": "Failed", "reason": "Unknown", "message": message,
                    "exit_code": None, "signal": None, "peak_rss": 0}
        reader = threading.Thread(target=pump, args=(proc.stdout, self.log), name="tau-log", daemon=True)
        reader.start()
        child = {"pid": proc.pid, "pgid": proc.pid, "start_ticks": oom.start_ticks(proc.pid)}
        self.run.transition("Running", f"attempt {attempt}/{max_attempts}: pid {proc.pid}", child=child,
                            attempt=attempt, started_at=info["started_at"])
        peak, oom_killed, term_sent, kill_sent = 0, False, None, False
        last_rss = 0.0
        while proc.poll() is None:
            now = time.monotonic()
            if limit and now - last_rss >= RSS_INTERVAL:
                last_rss = now
                rss = oom.group_rss(proc.pid)
                peak = max(peak, rss)
                if rss > limit and not oom_killed:
                    oom_killed = True
                    self.log.tau(f"resident memory {oom.format_bytes(rss)} exceeds the limit "
                                 f"{oom.format_bytes(limit)}: killing the process group (OOMKilled)")
                    _killpg(proc.pid, signal.SIGKILL)
            if self._cancel_asked() and not oom_killed:
                if term_sent is None:
                    term_sent = now
                    self.log.tau("cancel requested: sending SIGTERM to the process group")
                    _killpg(proc.pid, signal.SIGTERM)
                elif not kill_sent and now - term_sent >= self._grace():
                    kill_sent = True
                    self.log.tau(f"still running {self._grace():.0f}s after SIGTERM: sending SIGKILL")
                    _killpg(proc.pid, signal.SIGKILL)
            time.sleep(TICK)
        returncode = proc.returncode
        _killpg(proc.pid, signal.SIGKILL)  # leftovers of the group (daemonised grandchildren)
        reader.join(timeout=5)
        memory_error = any(b"MemoryError" in line for line in self.log.tail)
        state, reason, message = oom.classify_exit(returncode, cancelled=term_sent is not None, oom_killed=oom_killed,
                                                   memory_error=memory_error, limit=limit, peak_rss=peak)
        info.update(finished_at=now_iso(), exit_code=returncode if returncode >= 0 else None,
                    signal=signal.Signals(-returncode).name if returncode < 0 and -returncode in signal.valid_signals()
                    else None, peak_rss=peak, state=state, reason=reason, message=message)
        return info

    def _finish_attempt(self, info: dict[str, Any], output: Path, staging: Path | None, publication_id: str | None,
                        max_attempts: int) -> dict[str, Any]:
        attempt = info["attempt"]
        if info["state"] == "Succeeded" and staging is not None and publication_id:
            from tau_core.backends.local import publish

            try:
                names = publish.publish(staging, output, publication_id)
                where = publish.generation_dir(output, publication_id)
                self.log.tau(f"published {len(names)} staged file(s) to {where}")
                info["published"] = names
            except (publish.PublishError, OSError) as exc:
                info.update(state="Failed", reason="Unknown", exit_code=publish.PUBLISH_FAILURE_EXIT,
                            message=f"staged publication failed: {exc}")
        self.log.tau(f"attempt {attempt}/{max_attempts} {info['state'].lower()}: {info['message']}")
        return info

    # -- the whole run ---------------------------------------------------------------------
    def main(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        record = self.run.read()
        session = dict(record.get("pending") or {})
        retry = self.plan["retry"]
        max_retries = int(retry["max_retries"])
        retry_on = {r.strip().lower() for r in retry["retry_on"]}
        attempt = int(session.get("attempt") or len(record.get("attempts") or []) + 1)
        first_attempt = attempt
        max_attempts = first_attempt + max_retries
        resume_from = session.get("resume_from")
        retry_reason = session.get("retry_reason")
        retry_base = int(session.get("retry_attempt") or 0)
        self.run.transition("Started", f"supervisor pid {os.getpid()}", pending=None,
                            supervisor={"pid": os.getpid(), "start_ticks": oom.start_ticks(os.getpid())},
                            max_attempts=max_attempts)
        evidence_thread = self._start_evidence()
        final: dict[str, Any] = {}
        while True:
            self._evidence_attempt = attempt
            if self._cancel_asked():
                final = {"state": "Cancelled", "reason": "Unknown", "message": "cancelled before the attempt started"}
                break
            info = self.run_attempt(attempt, max_attempts, resume_from, retry_reason,
                                    retry_base + attempt - first_attempt)
            self.run.update(_append_attempt(info))
            final = info
            if info["state"] != "Failed":
                break
            reason = info["reason"]
            if max_retries <= 0 or not retry.get("auto", True):  # auto is off when the CLI drives retries
                break
            if reason.lower() not in retry_on:
                final = {**info, "message": f"{info['message']} — {reason} is not in resilience.retry_on "
                                            f"[{', '.join(retry['retry_on'])}]"}
                break
            if attempt - first_attempt + 1 > max_retries:
                final = {**info, "message": f"{info['message']} — exhausted all {max_retries} retries"}
                break
            retry_index = attempt - first_attempt + 1
            delay = min(float(retry["backoff_initial"]) * 2 ** (retry_index - 1), float(retry["backoff_max"]))
            note = f"attempt {attempt}/{max_attempts} failed ({reason}) — retrying in {delay:g}s"
            self.log.tau(note)
            self.run.transition("BackingOff", note, reason=reason, message=note)
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline and not self._cancel_asked():
                time.sleep(TICK)
            attempt += 1
            retry_reason = reason
            resume_from = self.plan["checkpoint_path"]
        if self.ray_head is not None:
            from tau_core.backends.local import ray_job

            ray_job.stop(self)
        self._evidence_stop.set()
        if evidence_thread is not None:
            evidence_thread.join(timeout=30)
        state = final["state"]
        self.run.transition(state, final.get("message", ""), reason=final.get("reason"),
                            message=final.get("message", ""), exit_code=final.get("exit_code"),
                            signal=final.get("signal"), finished_at=now_iso(), child=None)
        if self.bridge is not None:
            try:
                self.bridge.finish(state, str(final.get("reason") or ""), final.get("message", ""),
                                   self.plan["checkpoint_path"], attempt)
            except Exception:
                self._diag("evidence finish failed:\n" + _traceback())
        self.log.tau(f"run {state.lower()}")
        self.log.close()
        # last: readers that follow the log stop once this is set, so every line is already written
        self.run.update(lambda r: r.update(evidence_done=True))
        return 0


def _token() -> str:
    import secrets

    return secrets.token_hex(12)


def _traceback() -> str:
    import traceback

    return traceback.format_exc()


def _append_attempt(info: dict[str, Any]) -> Any:
    def change(record: dict[str, Any]) -> None:
        record.setdefault("attempts", []).append(info)

    return change


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tau_core.backends.local.supervisor RUN_DIR", file=sys.stderr)
        return 2
    run_dir = RunDir(Path(args[0]))
    if not run_dir.exists():
        print(f"error: {run_dir.run_file} does not exist", file=sys.stderr)
        return 1
    if os.environ.get("TAU_LOCAL_SUPERVISOR_FOREGROUND") != "1" and os.fork() > 0:
        os._exit(0)  # the parent returns to the CLI at once; the child is adopted by init
    supervisor = None
    try:
        supervisor = Supervisor(run_dir)
        return supervisor.main()
    except Exception:
        text = _traceback()
        if supervisor is not None and supervisor.ray_head is not None:
            from tau_core.backends.local import ray as local_ray

            local_ray.stop_head(supervisor.ray_head)
        try:
            with open(run_dir.supervisor_log, "a", encoding="utf-8") as fh:
                fh.write(f"{now_iso()} supervisor crashed:\n{text}\n")
            last = text.strip().splitlines()[-1]
            run_dir.transition("Failed", f"the local supervisor failed: {last}", reason="Unknown",
                               message=f"the local supervisor failed: {last} (see {run_dir.supervisor_log})",
                               finished_at=now_iso(), child=None)
        except Exception:
            pass
        return 1


if __name__ == "__main__":
    sys.exit(main())

