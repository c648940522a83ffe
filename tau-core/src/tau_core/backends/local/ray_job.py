"""One attempt of a local ``engine: rayjob`` run: a Ray job on the run's head, through the Jobs API.

The supervisor (:mod:`tau_core.backends.local.supervisor`) calls :func:`run_attempt`.  It starts the run's head
on the first attempt (and again if it died), submits the entrypoint with ``JobSubmissionClient`` and the
``runtime_env`` the cluster RayJob carries (``working_dir`` with its excludes, ``env_vars`` with the
``TAU_*`` contract), copies the driver log into ``output.log`` as it is written, records the Ray job state
in the run record (``ray.job_state``: PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED) and, on a cancel, stops
the job (the head goes when the run ends).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau_core.backends.local import oom
from tau_core.backends.local import ray as local_ray
from tau_core.backends.local.registry import now_iso

if TYPE_CHECKING:
    from tau_core.backends.local.supervisor import Supervisor

POLL = 0.25
TERMINAL_JOB_STATES = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})


def _failed(info: dict[str, Any], message: str) -> dict[str, Any]:
    return {**info, "finished_at": now_iso(), "state": "Failed", "reason": "Unknown", "message": message,
            "exit_code": None, "signal": None, "peak_rss": 0}


def ensure_head(sup: Supervisor) -> local_ray.RayHead:
    head: local_ray.RayHead | None = sup.ray_head
    if head is not None and head.alive():
        return head
    if head is not None and head.proc is not None:
        sup.log.tau(f"the local Ray head exited (code {head.proc.returncode}); starting a new one")
        local_ray.stop_head(head)
    ray_plan = sup.plan["ray"]
    if ray_plan.get("pip"):
        sup.log.tau(local_ray.pip_note(ray_plan["pip"]))
    if ray_plan.get("address"):  # TAU_LOCAL_RAY_ADDRESS: a head that outlives the run
        external = local_ray.attach_head(str(ray_plan["address"]))
        sup.log.tau(f"using the Ray head at {external.dashboard} ({local_ray.ADDRESS_ENV}); it stays up after "
                    "the run")
        sup.ray_head = external
        sup.run.update(lambda r: r.update(ray=external.record()))
        return external
    head = local_ray.start_head(sup.run.path, int(ray_plan["num_cpus"]), sup.log.tau, sup._cancel_asked)
    sup.ray_head = head
    sup.run.update(lambda r: r.update(ray=head.record()))
    return head


def stop(sup: Supervisor) -> None:
    head: local_ray.RayHead | None = sup.ray_head
    if head is None:
        return
    if head.external:
        sup.ray_head = None
        return
    sup.log.tau("stopping the local Ray head")
    local_ray.stop_head(head)
    sup.ray_head = None


class DriverLog:
    """Copies ``job-driver-<submission id>.log`` into the run log while the job runs."""

    def __init__(self, head: local_ray.RayHead, submission_id: str, sup: Supervisor, client: Any) -> None:
        self.path = (head.temp_root or Path(".")) / "session_latest" / "logs" / f"job-driver-{submission_id}.log"
        self.sup, self.client, self.submission_id = sup, client, submission_id
        self.done = threading.Event()
        loop = self._api_loop if head.external else self._loop
        self.thread = threading.Thread(target=loop, name="tau-ray-log", daemon=True)
        self.thread.start()

    def _api_loop(self) -> None:
        """An external head's driver log (its files are not on a path we know), read through the Jobs API."""
        sent = 0
        while True:
            final = self.done.is_set()
            try:
                text: str = self.client.get_job_logs(self.submission_id)
            except Exception:
                text = ""
            complete = text[:text.rfind("\n") + 1] if not final else text
            for line in complete[sent:].splitlines():
                self.sup.log.line(line.encode())
            sent = max(sent, len(complete))
            if final:
                return
            self.done.wait(POLL * 2)

    def _loop(self) -> None:
        while not self.path.exists():
            if self.done.wait(POLL / 2):
                if not self.path.exists():
                    return
        pending = b""
        with open(self.path, "rb") as fh:
            while True:
                chunk = fh.read(65536)
                if chunk:
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        self.sup.log.line(line)
                    continue
                if self.done.is_set():
                    break
                time.sleep(0.05)
        if pending:
            self.sup.log.line(pending)

    def finish(self) -> None:
        time.sleep(0.2)  # the job agent flushes the driver's last lines
        self.done.set()
        self.thread.join(timeout=10)


def run_attempt(sup: Supervisor, info: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """Submit this attempt as a Ray job, follow it to the end; the attempt's record entry."""
    try:
        head = ensure_head(sup)
    except local_ray.HeadStartCancelled as exc:
        sup.log.tau(str(exc))
        return {**_failed(info, str(exc)), "state": "Cancelled"}
    except RuntimeError as exc:
        sup.log.tau(str(exc))
        return _failed(info, str(exc))
    from ray.job_submission import JobSubmissionClient

    plan, ray_plan = sup.plan, sup.plan["ray"]
    runtime_env: dict[str, Any] = {"env_vars": local_ray.job_env(plan["env"], env)}
    if ray_plan.get("working_dir"):
        runtime_env["working_dir"] = ray_plan["working_dir"]
        if ray_plan.get("excludes"):
            runtime_env["excludes"] = list(ray_plan["excludes"])
    runtime_env["env_vars"].update(ray_plan.get("env") or {})
    submission_id = f"{plan['run_id']}-a{info['attempt']}"
    try:
        client = JobSubmissionClient(head.dashboard)
        client.submit_job(entrypoint=ray_plan["entrypoint"], runtime_env=runtime_env, submission_id=submission_id,
                          metadata={"tau_run": plan["run_id"], "tau_attempt": str(info["attempt"])})
    except Exception as exc:  # the Jobs API refused: a bad working_dir, a runtime_env it cannot build
        message = f"the local Ray head refused the job: {str(exc).strip().splitlines()[-1]}"
        sup.log.tau(message)
        return _failed(info, message)
    sup.log.tau(f"submitted Ray job {submission_id}: {ray_plan['entrypoint']}")
    child = ({} if head.proc is None else  # an external head is not ours to signal
             {"pid": head.proc.pid, "pgid": head.proc.pid, "start_ticks": oom.start_ticks(head.proc.pid)})
    sup.run.transition("Running", f"attempt {info['attempt']}: Ray job {submission_id} PENDING", child=child,
                       attempt=info["attempt"], started_at=info["started_at"],
                       ray={**head.record(), "submission_id": submission_id, "job_state": "PENDING"})
    driver_log = DriverLog(head, submission_id, sup, client)
    try:
        state, cancelled, oom_killed, peak = _follow(sup, client, submission_id, head)
    finally:
        driver_log.finish()
    return _outcome(sup, client, submission_id, info, state, cancelled, oom_killed, peak)


def _set_job_state(sup: Supervisor, state: str) -> None:
    def change(record: dict[str, Any]) -> None:
        record.setdefault("ray", {})["job_state"] = state

    sup.run.update(change)


def _follow(sup: Supervisor, client: Any, submission_id: str, head: local_ray.RayHead) -> tuple[str, bool, bool, int]:
    limit = sup.plan.get("memory_limit")
    last, stop_sent, oom_killed, peak = "PENDING", None, False, 0
    while True:
        try:
            state = str(client.get_job_status(submission_id).value)
        except Exception as exc:
            if head.proc is not None and head.proc.poll() is not None:
                sup.log.tau(f"the local Ray head exited (code {head.proc.returncode}) while the job ran")
                return "FAILED", stop_sent is not None, oom_killed, peak
            sup.log.tau(f"could not read the Ray job status ({exc}); retrying")
            time.sleep(1.0)
            continue
        if state != last:
            last = state
            _set_job_state(sup, state)
            sup.log.tau(f"Ray job {submission_id} {state}")
        if state in TERMINAL_JOB_STATES:
            return state, stop_sent is not None, oom_killed, peak
        now = time.monotonic()
        if limit:
            rss = (oom.group_rss(head.proc.pid) if head.proc else 0) \
                + sum(oom.group_rss(p) for p in _driver_groups(client, submission_id))
            peak = max(peak, rss)
            if rss > limit and not oom_killed:
                oom_killed = True
                sup.log.tau(f"resident memory {oom.format_bytes(rss)} exceeds the limit {oom.format_bytes(limit)}: "
                            "stopping the Ray job (OOMKilled)")
                client.stop_job(submission_id)
        if sup._cancel_asked() and stop_sent is None and not oom_killed:
            stop_sent = now
            sup.log.tau(f"cancel requested: stopping Ray job {submission_id}")
            try:
                client.stop_job(submission_id)
            except Exception as exc:
                sup.log.tau(f"stopping the Ray job failed ({exc}); stopping the head")
                return "STOPPED", True, oom_killed, peak
        elif stop_sent is not None and now - stop_sent >= sup._grace() + 5:
            sup.log.tau("the Ray job is still running after the grace period: stopping the head")
            return "STOPPED", True, oom_killed, peak
        time.sleep(POLL)


def _driver_groups(client: Any, submission_id: str) -> list[int]:
    try:
        pid = client.get_job_info(submission_id).driver_info.pid
        return [int(pid)] if pid else []
    except Exception:
        return []


def _outcome(sup: Supervisor, client: Any, submission_id: str, info: dict[str, Any], state: str,
             cancelled: bool, oom_killed: bool, peak: int) -> dict[str, Any]:
    try:
        details = client.get_job_info(submission_id)
        exit_code, ray_message = details.driver_exit_code, str(details.message or "")
    except Exception:
        exit_code, ray_message = None, ""
    limit = sup.plan.get("memory_limit")
    if state == "SUCCEEDED":
        returncode = 0
    elif exit_code is not None:
        returncode = int(exit_code)
        if 128 < returncode < 128 + 65:  # the job's shell reports a driver killed by signal N as 128 + N
            returncode = -(returncode - 128)
    else:
        returncode = -15 if cancelled else 1
    memory_error = any(b"MemoryError" in line for line in sup.log.tail)
    result, reason, message = oom.classify_exit(returncode, cancelled=cancelled, oom_killed=oom_killed,
                                                memory_error=memory_error, limit=limit, peak_rss=peak)
    if result == "Failed" and not oom_killed:
        code = f"exit code {exit_code}" if exit_code is not None else "no exit code"
        last = ray_message.strip().splitlines()[-1] if ray_message.strip() else ""
        job = f"Ray job {submission_id} FAILED ({code}): {last}"
        message = job if reason == "Unknown" else f"{message}; {job}"
    info.update(finished_at=now_iso(), exit_code=exit_code if state != "SUCCEEDED" else 0, signal=None,
                peak_rss=peak, state=result, reason=reason, message=message.rstrip(": "),
                ray_job={"submission_id": submission_id, "state": state})
    return info

