"""``LocalBackend``: the ``local`` execution backend (registered by ``tau_core.builtin_plugins``).

Runs live in the local run registry (:mod:`tau_core.backends.local.registry`); each is driven by its own
supervisor process (:mod:`tau_core.backends.local.supervisor`), so the CLI can exit, be interrupted or be
killed at any time without affecting the run.  Every verb reads the registry, which makes
``status``, ``logs``, ``get`` and ``cancel`` work from any shell.

A run is addressed by its run id (``train-261202-134501-a3f2``, printed at submit) or by its target
name, which means the newest local run of that target.

Dispatch from the lifecycle verbs (``tau run status|logs|get|cancel|resume``, ``tau logs``)::

    local = backend_for("local")
    if local.owns(name):                      # found in the local registry: no cluster is contacted
        backend, ref = local, RunRef(name, "local")
    else:
        ...                                   # the Kubernetes target and backend

``tau run list`` adds ``local.list()`` (``kind == "local"``, ``ref.backend == "local"``) to the cluster
rows, and still shows the local rows when no cluster is reachable.  It implements the whole
:class:`~tau_core.lifecycle.ExecutionBackend` protocol (``resume(..., dry_run=True)`` returns a JSON
``message``); cluster-only keyword options (``run_profile``, ``object_timeout``, ``workspace``, ...)
are accepted and ignored.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tau_core.backends.local import artifacts, oom, paths, publish
from tau_core.backends.local.env import build_plan
from tau_core.backends.local.registry import (
    TERMINAL,
    RunDir,
    create_run_dir,
    find_run,
    iter_runs,
    now_iso,
    parse_iso,
)
from tau_core.backends.local.status import BACKEND, KIND, build_status
from tau_core.errors import ConflictError, NotFoundError, TauError, UsageError
from tau_core.fsutil import write_json_atomic
from tau_core.lifecycle.base import (
    ArtifactListing,
    FailureReason,
    LogOptions,
    RunRef,
    RunStatus,
    RunSummary,
    SubmitRequest,
    SubmitResult,
)

LOST_AFTER = 30.0  # seconds a run may stay Submitted without a supervisor before it counts as lost
FOLLOW_INTERVAL = 0.05


class LocalBackend:
    """Supervised local processes behind the shared lifecycle interface."""

    name = BACKEND

    def __init__(self, env: Mapping[str, str] | None = None, **_options: Any) -> None:
        self._env = env
        self.last_get: dict[str, Any] = {}  # a local get reads the output directory; nothing to record

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ if self._env is None else self._env)

    # -- lookup ----------------------------------------------------------------------------
    def find(self, name: str, *, exact: bool = False) -> RunDir | None:
        """The local run called ``name``: its run id, or (unless ``exact``) the newest run of that target."""
        return find_run(name, self.env, exact=exact)

    def owns(self, name: str, *, exact: bool = False) -> bool:
        """True when ``name`` is a local run, so the lifecycle verbs dispatch it here.

        Run ids (``train-261202-134501-a3f2``) never collide with cluster run names.  A bare target
        name (``train``) also matches the newest local run of that target; pass ``exact=True`` where a
        cluster run of the same name should win (a repository connected to a cluster).
        """
        return self.find(name, exact=exact) is not None

    def _run(self, ref: RunRef | str) -> RunDir:
        name = ref if isinstance(ref, str) else ref.name
        run = self.find(name)
        if run is None:
            raise NotFoundError(f"local run '{name}' not found in {paths.runs_root(self.env)}",
                                hint="run `tau run list` to see local and cluster runs")
        return run

    def _record(self, run: RunDir) -> dict[str, Any]:
        """The run record, after noticing a supervisor that disappeared without finishing."""
        record = run.read()
        if record.get("state") in TERMINAL:
            return record
        sup = record.get("supervisor") or {}
        submitter = record.get("submitter") or {}
        if sup.get("pid"):
            lost = not oom.alive(sup.get("pid"), sup.get("start_ticks"))
        elif not record.get("spawned_at") and submitter.get("pid") and \
                not oom.alive(submitter.get("pid"), submitter.get("start_ticks")):
            lost = True  # the submitting tau process died before it started the supervisor
        else:
            created = parse_iso(record.get("updated_at") or record.get("created_at")) or time.time()
            lost = time.time() - created > LOST_AFTER
        if not lost:
            return record

        def mark(r: dict[str, Any]) -> None:
            if r.get("state") in TERMINAL or (r.get("supervisor") or {}) != sup \
                    or r.get("spawned_at") != record.get("spawned_at"):
                return  # the run moved on since it was read
            if sup.get("pid"):
                detail = (f"the local supervisor (pid {sup.get('pid')}) is gone; the run was interrupted "
                          "(machine restart or killed supervisor)")
            elif not record.get("spawned_at"):
                detail = "the local supervisor never started: the submitting tau process exited before starting it"
            else:
                detail = "the local supervisor never started"
            child = r.get("child") or {}
            if r.get("state") == "Running" and child.get("pid"):
                # the attempt in flight ran: record it as interrupted, so status reflects the evidence
                r.setdefault("attempts", []).append({
                    "attempt": r.get("attempt") or len(r.get("attempts") or []) + 1,
                    "started_at": r.get("started_at"), "finished_at": now_iso(), "state": "Failed",
                    "reason": FailureReason.EVICTED.value, "exit_code": None, "signal": None, "peak_rss": 0,
                    "interrupted": True,
                    "message": f"interrupted: the supervisor (pid {sup.get('pid')}) was killed while "
                               f"pid {child.get('pid')} ran"})
            r["state"] = "Failed"
            # a supervisor that ran and vanished is the local form of a lost node; one that never
            # started is a setup failure
            r["reason"] = (FailureReason.EVICTED if sup.get("pid") else FailureReason.UNKNOWN).value
            r["message"] = detail
            r["finished_at"] = now_iso()
            r.setdefault("transitions", []).append({"state": "Failed", "at": r["finished_at"], "detail": detail})
            child = r.get("child") or {}
            if child.get("pgid") and oom.alive(child.get("pid"), child.get("start_ticks")):
                r["message"] += f"; its process group {child['pgid']} is still running (tau run cancel stops it)"

        return run.update(mark)

    # -- submit ----------------------------------------------------------------------------
    def submit(self, request: SubmitRequest) -> SubmitResult:
        env = self.env
        run_id = paths.new_run_id(request.name or "run")
        plan = build_plan(request, run_id, env)
        run = create_run_dir(run_id, env)
        write_json_atomic(run.request_file, plan, mode=0o600, durable=True)
        max_attempts = 1 + int(plan["retry"]["max_retries"])
        created = now_iso()
        write_json_atomic(run.run_file, {
            "schema": "tau.local.run.v1", "run_id": run_id, "name": request.name, "engine": plan["engine"],
            "created_at": created, "updated_at": created, "state": "Submitted",
            "transitions": [{"state": "Submitted", "at": created, "detail": f"registered in {run.path}"}],
            "config_path": plan["config_path"], "config_hash": request.config_hash,
            "submission_id": request.submission_id, "output_dir": plan["output_dir"], "cwd": plan["cwd"],
            "log_path": str(run.log_file), "attempts": [], "max_attempts": max_attempts,
            "memory_limit": plan["memory_limit"], "history": plan["history"],
            "pending": {"attempt": 1},
            "submitter": {"pid": os.getpid(), "start_ticks": oom.start_ticks(os.getpid())},
        })
        run.log_file.touch()
        self._spawn(run, env)
        notes = [f"local run {run_id} started", f"output: {plan['output_dir']}"]
        if request.config.runtime.image:
            notes.append("runtime.image is not used locally: the run uses this Python environment")
        if plan["engine"] == "rayjob" and plan["ray"]["pip"]:
            from tau_core.backends.local.ray import pip_note

            notes.append(pip_note(plan["ray"]["pip"]))
        return SubmitResult(ref=RunRef(name=run_id, backend=BACKEND), created=True, message="; ".join(notes))

    def _spawn(self, run: RunDir, env: Mapping[str, str]) -> None:
        with open(run.supervisor_log, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tau_core.backends.local.supervisor", str(run.path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=str(run.path),
                env=dict(env), start_new_session=True, close_fds=True)
        run.update(lambda r: r.update(spawned_at=now_iso()))
        # The supervisor forks and its parent exits at once; reap it in the background so the CLI
        # returns without waiting for the supervisor's interpreter to start.  A supervisor that never
        # records "Started" is reported by status after LOST_AFTER seconds (see supervisor.log).
        threading.Thread(target=proc.wait, name="tau-local-reaper", daemon=True).start()

    # -- status ----------------------------------------------------------------------------
    def status(self, ref: RunRef, **_cluster_options: Any) -> RunStatus:
        run = self._run(ref)
        record = self._record(run)
        from tau_core.backends.local.evidence import read_evidence

        evidence = read_evidence(run)
        return build_status(run, record, evidence)

    def wait(self, ref: RunRef, timeout: float | None = None, interval: float = 0.2) -> RunStatus:
        """Block until the run is terminal and its evidence is written (or ``timeout``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            st = self.status(ref)
            if st.terminal and (st.extra.evidence_done or not st.extra.supervisor_alive):
                return st
            if deadline is not None and time.monotonic() >= deadline:
                return st
            time.sleep(interval)

    def watch_status(self, ref: RunRef, *, interval: float = 2.0, max_iterations: int = 0,
                     timeout: float | None = None, **_cluster_options: Any) -> Iterator[RunStatus]:
        """Status frames: the first at once, then one whenever the run changes (checked every 0.1 s, at
        most one frame per ``interval``); ends after the frame that shows the run finished (terminal:
        evidence written or supervisor gone), or after ``timeout`` seconds with the current frame.
        ``terminal`` is part of the change key, so the frame that only settles the evidence still ends it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        frames, last_key, last_at = 0, None, 0.0
        while True:
            st = self.status(ref)
            done = st.terminal
            key = (done, st.extra.state, st.attempt, tuple((p.name, p.state, p.detail) for p in st.phases))
            now = time.monotonic()
            expired = deadline is not None and now >= deadline
            if expired or (key != last_key and (frames == 0 or done or now - last_at >= interval)):
                frames += 1
                last_key, last_at = key, now
                yield st
                if done or expired or (max_iterations and frames >= max_iterations):
                    return
            time.sleep(0.1)

    # -- list ------------------------------------------------------------------------------
    def list(self, *, namespace: str | None = None, queue: str | None = None,
             include_external: bool = False, **_cluster_options: Any) -> list[RunSummary]:
        if queue:
            return []  # local runs are not queued in a Kueue LocalQueue
        rows: list[tuple[str, RunSummary]] = []
        for run in iter_runs(self.env):
            try:
                record = self._record(run)
            except NotFoundError:
                continue
            state = str(record.get("state", "?"))
            if state == "Failed" and record.get("reason"):
                state = f"Failed ({record['reason']})"
            created = str(record.get("created_at", ""))
            rows.append((created, RunSummary(ref=RunRef(name=run.run_id, backend=BACKEND), kind=KIND, state=state,
                                             queue=None, created=created, external=False)))
        rows.sort(key=lambda r: r[0], reverse=True)
        return [summary for _, summary in rows]

    # -- logs ------------------------------------------------------------------------------
    def logs(self, ref: RunRef, options: LogOptions) -> Iterator[str]:
        run = self._run(ref)
        if options.container or options.all_containers or options.previous:
            raise UsageError("container selection and --previous apply to cluster Jobs; a local run has one log",
                             hint=f"run `tau logs {run.run_id}`")
        return self._log_lines(run, options)

    def _log_lines(self, run: RunDir, options: LogOptions) -> Iterator[str]:
        path = run.log_file
        tail = options.tail
        try:
            fh = open(path, "rb")
        except OSError as exc:
            raise NotFoundError(f"the log of local run '{run.run_id}' is unreadable ({path}: {exc.strerror})",
                                hint=f"the run directory {run.path} was changed outside tau") from None
        with fh:
            if tail is None or tail < 0:
                start = 0
            elif tail == 0:
                start = fh.seek(0, os.SEEK_END)
            else:
                start = _tail_offset(fh, tail)
            fh.seek(start)
            pending = b""
            while True:
                chunk = fh.read(65536)
                if chunk:
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        yield _format_line(line, options.timestamps)
                    continue
                if not options.follow:
                    break
                if self._finished(run):
                    rest = fh.read()
                    if rest:
                        pending += rest
                        *lines, pending = pending.split(b"\n")
                        for line in lines:
                            yield _format_line(line, options.timestamps)
                        continue
                    break
                time.sleep(FOLLOW_INTERVAL)
            if pending:
                yield _format_line(pending, options.timestamps)

    def _finished(self, run: RunDir) -> bool:
        record = self._record(run)
        if record.get("state") not in TERMINAL:
            return False
        sup = record.get("supervisor") or {}
        # the supervisor writes its last log line after the terminal state; wait for it to exit
        return bool(record.get("evidence_done")) or not oom.alive(sup.get("pid"), sup.get("start_ticks"))

    # -- get -------------------------------------------------------------------------------
    def output_root(self, ref: RunRef) -> Path:
        run = self._run(ref)
        record = self._record(run)
        output = Path(str(record.get("output_dir")))
        publication = next((a.get("publication_id") for a in reversed(record.get("attempts") or [])
                            if a.get("publication_id") and a.get("state") == "Succeeded"), None)
        request = run.request()
        if request.get("staged"):
            if publication is None:
                raise NotFoundError(f"local run '{run.run_id}' has no completed staged publication yet",
                                    hint="staged files are published when the run succeeds; "
                                         f"check `tau run status {run.run_id}`")
            if not publish.is_complete(output, publication):
                raise NotFoundError(f"the staged publication {publication} of '{run.run_id}' is incomplete "
                                    "(no completion marker)", hint="commands only return a completed set")
            return publish.generation_dir(output, publication)
        if not output.is_dir():
            raise NotFoundError(f"local run '{run.run_id}' has not written its output directory {output} yet",
                                hint=f"check `tau run status {run.run_id}`")
        return output

    def get(self, ref: RunRef, artifact: str | None = None, *, path: str | None = None,
            pvc: str | None = None) -> ArtifactListing | bytes:
        if path or pvc:
            raise UsageError("--path and --pvc read a cluster volume; a local run is read from its output directory",
                             hint=f"run `tau run get {ref.name}` without them")
        if artifact is not None:
            artifacts.check_relative(artifact)  # refuse hostile paths before touching the registry
        root = self.output_root(ref)
        if artifact is None:
            return ArtifactListing(root=str(root), entries=artifacts.listing(root))
        target = artifacts.resolve(root, artifact)
        if target.is_dir():
            return ArtifactListing(root=str(target), entries=artifacts.listing(root, target))
        return target.read_bytes()

    # -- cancel ----------------------------------------------------------------------------
    def _cancel(self, ref: RunRef, *, wait: bool, timeout: float) -> None:
        run = self._run(ref)
        record = self._record(run)
        if record.get("state") in TERMINAL:
            child = record.get("child") or {}
            if child.get("pgid") and oom.alive(child.get("pid"), child.get("start_ticks")):
                _killpg(int(child["pgid"]), signal.SIGKILL)  # an orphan of a lost supervisor
            if record.get("ray"):  # what is left of a lost supervisor's Ray head, job drivers included
                from tau_core.backends.local import ray as local_ray

                local_ray.clean_up_after(run.path, record["ray"])
            return
        grace = max(0.5, min(10.0, timeout / 2))
        write_json_atomic(run.cancel_file, {"requested_at": now_iso(), "grace_seconds": grace})
        sup = record.get("supervisor") or {}
        if sup.get("pid") and oom.alive(sup.get("pid"), sup.get("start_ticks")):
            try:
                os.kill(int(sup["pid"]), signal.SIGTERM)
            except ProcessLookupError:
                pass
        if not wait:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._record(run).get("state") in TERMINAL:
                return
            time.sleep(0.1)
        child = (run.read().get("child") or {})
        raise TauError(f"local run '{run.run_id}' is still stopping after {timeout:g}s",
                       hint=f"stop it by hand: kill -KILL -{child.get('pgid', '<pgid>')}")

    def cancel(self, ref: RunRef, *, wait: bool = True, timeout: float = 600.0,
               **_cluster_options: Any) -> str:
        """Stop the run; returns the one-line account ``tau run cancel`` prints."""
        run = self._run(ref)
        before = self._record(run).get("state")
        self._cancel(ref, wait=wait, timeout=timeout)
        if before in TERMINAL:
            return f"local run {run.run_id} had already finished ({before}); nothing to cancel"
        if not wait:
            return (f"cancel requested for local run {run.run_id}: SIGTERM sent, SIGKILL follows after the grace "
                    "period (teardown not awaited)")
        record = self._record(run)
        how = record.get("signal") or (f"exit code {record.get('exit_code')}" if record.get("exit_code") is not None
                                       else "stopped")
        return f"local run {run.run_id} cancelled ({how})"

    # -- retry / resume --------------------------------------------------------------------
    def retry(self, ref: RunRef, request: SubmitRequest, *, attempt: int, reason: FailureReason) -> SubmitResult:
        """Start attempt ``attempt`` of a failed run (the supervisor already retries on its own)."""
        run = self._run(ref)
        record = self._record(run)
        if record.get("state") not in TERMINAL:
            raise ConflictError(f"local run '{run.run_id}' is still running; it retries on its own",
                                hint=f"follow it with `tau run status {run.run_id} --watch`")
        plan = self._replan(run, request, record)
        plan["retry"]["auto"] = False
        return self._restart(run, plan, {"attempt": len(record.get("attempts") or []) + 1,
                                         "retry_reason": reason.value, "retry_attempt": attempt,
                                         "resume_from": plan["checkpoint_path"]},
                             f"retry attempt {attempt} ({reason.value})")

    def resume(self, ref: RunRef, request: SubmitRequest, *, from_dir: str | None = None,
               force: bool = False, dry_run: bool = False) -> SubmitResult:
        run = self._run(ref)
        record = self._record(run)
        state, reason = record.get("state"), str(record.get("reason") or "")
        name = run.run_id
        if state not in TERMINAL:
            raise ConflictError(f"local run '{name}' is still running — cancel it first",
                                hint=f"tau run cancel {name}")
        if state == "Succeeded":
            raise ConflictError(f"local run '{name}' completed successfully — nothing to resume")
        if state == "Failed":
            if reason not in ("OOMKilled", "Preempted", "Evicted"):
                raise TauError(f"local run '{name}' failed with non-retryable reason {reason or 'Unknown'} — "
                               "inspect logs/status before resubmitting manually",
                               hint=f"tau run logs {name}; fix the cause, then `tau run` it again")
            if reason == "OOMKilled" and not force:
                raise TauError(f"local run '{name}' was OOMKilled; resuming unchanged would likely fail the same way",
                               hint="raise compute.memory_limit or shrink the workload, then pass --force")
        if from_dir is not None and not str(from_dir).startswith("/"):
            raise UsageError(f"--from {from_dir!r} must be an absolute path")
        plan = self._replan(run, request, record)
        source = str(paths.map_container_path(from_dir, self.env)) if from_dir else plan["checkpoint_path"]
        notes = [f"resuming local run {name} from {source}"]
        old_hash = record.get("config_hash") or ""
        if request.config_hash and old_hash and request.config_hash != old_hash:
            notes.append(f"warning: config hash changed ({old_hash[:8]} → {request.config_hash[:8]}) since the "
                         "original submission")
        if not Path(source).exists():
            notes.append(f"warning: checkpoint directory {source} does not exist")
        if dry_run:
            plan_view = {"run": name, "backend": BACKEND, "resume_from": source, "argv": plan["argv"],
                         "cwd": plan["cwd"], "output_dir": plan["output_dir"], "notes": notes}
            return SubmitResult(ref=RunRef(name=name, backend=BACKEND), created=False,
                                message=json.dumps(plan_view))
        result = self._restart(run, plan, {"attempt": len(record.get("attempts") or []) + 1, "resume_from": source},
                               f"resume from {source}")
        result.message = "; ".join(notes)
        return result

    def _replan(self, run: RunDir, request: SubmitRequest, record: dict[str, Any]) -> dict[str, Any]:
        plan = build_plan(request, run.run_id, self.env)
        plan["output_dir"] = record.get("output_dir") or plan["output_dir"]
        return plan

    def _restart(self, run: RunDir, plan: dict[str, Any], pending: dict[str, Any], why: str) -> SubmitResult:
        write_json_atomic(run.request_file, plan, mode=0o600, durable=True)
        run.cancel_file.unlink(missing_ok=True)

        def change(r: dict[str, Any]) -> None:
            r["pending"] = pending
            r["state"] = "Submitted"
            for key in ("reason", "message", "exit_code", "signal", "finished_at", "supervisor", "evidence_done",
                        "spawned_at"):
                r.pop(key, None)
            r["submitter"] = {"pid": os.getpid(), "start_ticks": oom.start_ticks(os.getpid())}
            r.setdefault("transitions", []).append({"state": "Submitted", "at": now_iso(), "detail": why})
            r["config_hash"] = plan.get("config_hash") or r.get("config_hash")

        run.update(change)
        self._spawn(run, self.env)
        return SubmitResult(ref=RunRef(name=run.run_id, backend=BACKEND), created=True, message=why)


# -- helpers ---------------------------------------------------------------------------------------


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _tail_offset(fh: Any, lines: int) -> int:
    """Offset of the start of the last ``lines`` lines of a binary file."""
    end = fh.seek(0, os.SEEK_END)
    pos, found = end, 0
    # a trailing newline terminates the last line rather than starting an empty one
    if end > 0:
        fh.seek(end - 1)
        if fh.read(1) == b"\n":
            pos = end - 1
    while pos > 0:
        size = min(65536, pos)
        pos -= size
        fh.seek(pos)
        block = fh.read(size)
        for i in range(len(block) - 1, -1, -1):
            if block[i] == 0x0A:
                found += 1
                if found == lines:
                    return int(pos + i + 1)
    return 0


def _format_line(raw: bytes, timestamps: bool) -> str:
    text = raw.decode("utf-8", "replace")
    if timestamps:
        return text
    stamp, sep, rest = text.partition(" ")
    return rest if sep and stamp.endswith("Z") and stamp[:4].isdigit() else text


def read_cancel(run: RunDir) -> dict[str, Any]:
    try:
        return dict(json.loads(run.cancel_file.read_text()))
    except (OSError, ValueError):
        return {}
