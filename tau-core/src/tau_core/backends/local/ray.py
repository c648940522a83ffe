"""A real local Ray for an ``engine: rayjob`` run (the ``tau[ray]`` extra).

One Ray head per run, owned by the run's supervisor:

* ``ray start --head --block`` in its own process group, with ``PR_SET_PDEATHSIG`` so it goes when the
  supervisor goes, even on ``kill -9``;
* Ray's temp root is a short per-run directory under the system temp (``/tmp/tau-ray-`` plus 8 random characters): the
  plasma store and raylet sockets live below it, and AF_UNIX socket paths are limited to 107 bytes,
  so it can never sit under the run directory.  Its location is recorded in the run record;
* token authentication (``RAY_AUTH_MODE=token``) with a token generated for the head and kept 0600 in
  ``ray-auth-token`` beside the run record (Ray reads it through ``RAY_AUTH_TOKEN_PATH``);
* the Jobs API (the dashboard) listens on 127.0.0.1 only.  Ray itself maps a loopback
  ``--node-ip-address`` to the machine's address (``services.resolve_ip_for_localhost``), so the GCS
  and raylet listen there, and every call to them needs the token;
* every free port is chosen here (GCS, dashboard, client server, dashboard agent; worker ports are
  left to the kernel), so concurrent runs never collide on Ray's fixed defaults;
* the head advertises the logical CPUs the run asks for (head + workers), oversubscribing a small
  machine with a note, and no GPUs unless the machine has them.

With ``TAU_LOCAL_RAY_ADDRESS`` set (the Jobs API URL of a head that is already running, e.g. one started
with ``ray start --head`` for a working session), no head is started: every run submits to that head and
leaves it running.  Its token, if it wants one, comes from Ray's own ``RAY_AUTH_TOKEN``/``RAY_AUTH_TOKEN_PATH``.

The job itself is submitted through the Jobs API by :mod:`tau_core.backends.local.ray_job`.
"""

from __future__ import annotations

import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tau_core.errors import ConfigError
from tau_core.lifecycle.base import Phase

START_TIMEOUT = 120.0
TOKEN_FILE = "ray-auth-token"
HEAD_LOG = "ray-head.log"
#: in the environment of every process of a run's head (and its job drivers): the run directory
MARKER = "TAU_LOCAL_RAY_RUN"
RAY_INSTALL = "pip install 'tau[ray]'"
#: the Jobs API URL of an already-running head to submit to instead of starting one per run
ADDRESS_ENV = "TAU_LOCAL_RAY_ADDRESS"
_MAX_TEMP_BASE = 24  # characters: leaves room for Ray's session_<date>_<pid>/sockets/plasma_store


@dataclass
class RayHead:
    """The run's own head (``proc`` set) or an existing one it only submits to (``proc`` None)."""

    proc: subprocess.Popen[bytes] | None
    temp_root: Path | None
    dashboard: str
    gcs_port: int | None
    token_file: Path | None
    num_cpus: int | None

    @property
    def external(self) -> bool:
        return self.proc is None

    def alive(self) -> bool:
        return self.proc is None or self.proc.poll() is None

    def record(self) -> dict[str, Any]:
        if self.proc is None:
            return {"dashboard": self.dashboard, "external": True, "temp_root": None, "num_cpus": None}
        return {"temp_root": str(self.temp_root), "dashboard": self.dashboard, "gcs_port": self.gcs_port,
                "head_pid": self.proc.pid, "num_cpus": self.num_cpus, "token_file": str(self.token_file)}


def external_address(env: Mapping[str, str]) -> str | None:
    """``TAU_LOCAL_RAY_ADDRESS`` checked: an http(s) URL of a Jobs API, or None when unset."""
    from urllib.parse import urlparse

    value = (env.get(ADDRESS_ENV) or "").strip().rstrip("/")
    if not value:
        return None
    url = urlparse(value)
    if url.scheme not in ("http", "https") or not url.hostname or not url.port:
        raise ConfigError(f"{ADDRESS_ENV}={value!r} is not the URL of a Ray Jobs API",
                          hint=f"use the head's dashboard address, e.g. {ADDRESS_ENV}=http://127.0.0.1:8265, "
                               "or unset it to start a head per run")
    return value


def attach_head(address: str) -> RayHead:
    return RayHead(proc=None, temp_root=None, dashboard=address, gcs_port=None, token_file=None, num_cpus=None)


def ray_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None


# -- planning (at submit) -----------------------------------------------------------------------------


def _cpus(value: Any) -> float:
    text = str(value).strip()
    try:
        return float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    except ValueError:
        raise ConfigError(f"CPU quantity {value!r} is not valid",
                          hint="use a number of cores or millicores (500m)") from None


def logical_cpus(get: Callable[[str], Any]) -> int:
    """What the run asks for: head + workers x CPUs per worker, or for a Tune sweep its concurrent trials
    (one CPU for each trial function + its workers); at least the machine's cores."""
    workers = int(get("compute.workers") or 1)
    per_worker = get("compute.worker_cpu_request") or get("compute.worker_cpu_limit") \
        or get("compute.cpu_request") or get("compute.cpu_limit") or 1
    head = get("compute.head_cpu_request") or get("compute.head_cpu_limit") or 1
    asked = math.ceil(_cpus(head) + workers * _cpus(per_worker) - 1e-9)
    if str(get("execution.launcher") or "") == "ray-tune":  # each running trial: its function + its workers
        trials = int(get("execution.max_concurrent_trials") or 1)
        asked = max(asked, math.ceil(trials * (1 + workers * _cpus(per_worker)) - 1e-9))
    return max(asked, os.cpu_count() or 1)


def machine_gpus() -> int:
    """NVIDIA GPUs visible here (device nodes), 0 when there are none."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    return len([p for p in Path("/dev").glob("nvidia[0-9]*")])


def requested_gpus(get: Callable[[str], Any]) -> tuple[str, int]:
    for field in ("compute.gpus_per_worker", "compute.gpus", "compute.gpu_count"):
        value = get(field)
        if value not in (None, "", 0, "0"):
            return field, int(value)
    return "", 0


def check_gpus(get: Callable[[str], Any], target: str) -> None:
    field, wanted = requested_gpus(get)
    if wanted and machine_gpus() == 0:
        raise ConfigError(
            f"{field}={wanted}: target '{target}' asks for GPUs and this machine has none, so the local Ray "
            "head cannot place its workers",
            hint=f"run a CPU target, or set {field}: 0 in a copy of the config for --local "
                 "(the cluster run keeps its GPUs)")


def plan_ray(get: Callable[[str], Any], *, target: str, python: str, cwd: Path, argv: list[str],
             entry: Path, address: str | None = None) -> dict[str, Any]:
    """The ``ray`` section of a local plan: head size, entrypoint and runtime_env, like the cluster RayJob."""
    check_gpus(get, target)
    launcher = str(get("execution.launcher") or "ray-train")
    working_dir = None
    module = None
    if get("run.working_dir"):
        working_dir = cwd
        rel = entry.relative_to(cwd) if entry.is_relative_to(cwd) else None
        if rel is None or rel.suffix != ".py":
            raise ConfigError(f"entrypoint {entry} must be a .py file inside run.working_dir {cwd}",
                              hint="run.working_dir is relative to the config file's directory")
        module = ".".join(rel.with_suffix("").parts)
    import shlex

    if launcher == "ray-tune":
        core = f"{shlex.quote(python)} -m tau_core.backends.local.ray_tune"
    elif module:
        core = f"{shlex.quote(python)} -m {module}"
    else:
        core = shlex.join(argv)
    entrypoint = core if working_dir else f"cd {shlex.quote(str(cwd))} && {core}"
    tune: dict[str, str] = {}
    if launcher == "ray-tune":
        import json

        tune = {"TAU_TUNE_TRAIN_PATH": "" if module else str(entry), "TAU_TUNE_TRAIN_MODULE": module or "",
                "TAU_TUNE_METRIC": str(get("execution.metric") or ""),
                "TAU_TUNE_MODE": str(get("execution.mode") or "min"),
                "TAU_TUNE_NUM_SAMPLES": str(get("execution.num_samples") or 1),
                "TAU_TUNE_MAX_CONCURRENT_TRIALS": str(get("execution.max_concurrent_trials") or 1),
                "TAU_TUNE_PARAM_SPACE": json.dumps(get("execution.configs") or {}, sort_keys=True,
                                                   separators=(",", ":"))}
    excludes = [str(e) for e in (get("run.working_dir_excludes") or [])]
    return {"num_cpus": logical_cpus(get), "entrypoint": entrypoint, "launcher": launcher,
            "working_dir": str(working_dir) if working_dir else None, "excludes": excludes, "env": tune,
            "pip": [str(p) for p in (get("runtime.pip") or [])], "address": address}


# -- the head --------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def short_temp_root() -> Path:
    """A fresh ``tau-ray-`` + 8 random characters directory under the system temp (``/tmp`` when that path is long)."""
    base = tempfile.gettempdir()
    if len(base) > _MAX_TEMP_BASE or not os.access(base, os.W_OK):
        base = "/tmp"
    return Path(tempfile.mkdtemp(prefix="tau-ray-", dir=base))


def auth_env(token_file: Path) -> dict[str, str]:
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file)}


def _die_with_parent() -> None:
    """In the head's ``ray start``: SIGTERM when the supervisor dies, however it dies."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class HeadStartCancelled(RuntimeError):
    pass


def start_head(run_path: Path, num_cpus: int, say: Callable[[str], None],
               cancelled: Callable[[], bool] = lambda: False) -> RayHead:
    """Start the run's Ray head and wait until its Jobs API answers (or ``cancelled()``)."""
    if not ray_installed():
        raise RuntimeError(f"engine: rayjob needs Ray, which is not installed ({RAY_INSTALL})")
    token_file = run_path / TOKEN_FILE
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32))
    os.chmod(token_file, 0o600)
    temp_root = short_temp_root()
    port, dash, client, agent = (_free_port() for _ in range(4))
    argv = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", f"--port={port}",
            "--node-ip-address=127.0.0.1", "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}",
            f"--ray-client-server-port={client}", f"--dashboard-agent-listen-port={agent}",
            "--min-worker-port=0", "--max-worker-port=0", f"--temp-dir={temp_root}", f"--num-cpus={num_cpus}",
            f"--num-gpus={machine_gpus()}", "--disable-usage-stats"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env.update(auth_env(token_file))
    env.update({MARKER: str(run_path), "RAY_USAGE_STATS_ENABLED": "0"})
    os.environ.update(auth_env(token_file))  # this process talks to the head through the Jobs API
    cores = os.cpu_count() or 1
    if num_cpus > cores:
        say(f"note: the local Ray head advertises {num_cpus} logical CPUs (what the run asks for) on "
            f"{cores} cores: tasks oversubscribe this machine")
    with open(run_path / HEAD_LOG, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                process_group=0, preexec_fn=_die_with_parent)
    head = RayHead(proc=proc, temp_root=temp_root, dashboard=f"http://127.0.0.1:{dash}",
                   gcs_port=port, token_file=token_file, num_cpus=num_cpus)
    say(f"starting a local Ray head: Jobs API {head.dashboard}, {num_cpus} CPUs, temp root {temp_root}")
    try:
        _wait_ready(head, run_path / HEAD_LOG, cancelled)
    except BaseException:
        stop_head(head)
        raise
    return head


def _wait_ready(head: RayHead, log: Path, cancelled: Callable[[], bool]) -> None:
    import urllib.request

    assert head.proc is not None and head.token_file is not None
    headers = {"Authorization": f"Bearer {head.token_file.read_text().strip()}"}
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if cancelled():
            raise HeadStartCancelled("cancelled while the local Ray head was starting")
        if head.proc.poll() is not None:
            raise RuntimeError(f"the local Ray head exited with code {head.proc.returncode} (see {log})")
        try:
            req = urllib.request.Request(f"{head.dashboard}/api/version", headers=headers)
            with urllib.request.urlopen(req, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"the local Ray head's Jobs API did not answer within {START_TIMEOUT:.0f}s (see {log})")


def head_processes(run_path: Path | str) -> list[int]:
    """Live processes that belong to the Ray head of the run at ``run_path`` (by the environment marker)."""
    needle = f"{MARKER}={run_path}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes() + b"\0"
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ and state != "Z":
            found.append(int(entry.name))
    return found


def sweep(run_path: Path | str) -> None:
    """SIGKILL whatever is left of a run's head (job drivers run in their own sessions)."""
    for pid in head_processes(run_path):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def clean_up_after(run_path: Path, ray_record: Mapping[str, Any]) -> None:
    """What a lost supervisor left behind: its head's processes (job drivers included) and the temp root."""
    sweep(run_path)
    temp_root = Path(str(ray_record.get("temp_root") or ""))
    if temp_root.name.startswith("tau-ray-") and temp_root.is_dir():
        shutil.rmtree(temp_root, ignore_errors=True)


def stop_head(head: RayHead) -> None:
    """SIGTERM the head's process group, SIGKILL after 5 s, then every straggler; remove the temp root.
    An external head (``TAU_LOCAL_RAY_ADDRESS``) is not the run's: it stays."""
    if head.proc is None or head.token_file is None or head.temp_root is None:
        return
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(head.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            head.proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    run_path = head.token_file.parent
    deadline = time.monotonic() + 10.0
    while head_processes(run_path) and time.monotonic() < deadline:
        sweep(run_path)
        time.sleep(0.1)
    shutil.rmtree(head.temp_root, ignore_errors=True)


def pip_note(packages: list[str]) -> str:
    return (f"runtime.pip ({', '.join(packages)}) is not installed locally: the run uses this Python "
            "environment")


_PHASE_STATES = {"PENDING": "pending", "RUNNING": "active", "SUCCEEDED": "done", "FAILED": "warning",
                 "STOPPED": "warning"}


def status_phase(ray: Any) -> Phase | None:
    """The ``Ray job`` phase of ``tau run status``: the job's state on the run's head."""
    if not isinstance(ray, dict) or not ray.get("submission_id"):
        return None
    job_state = str(ray.get("job_state") or "PENDING")
    where = (f"on the Ray head at {ray.get('dashboard')} ({ADDRESS_ENV})" if ray.get("external") else
             f"on the local head {ray.get('dashboard')} ({ray.get('num_cpus')} CPUs, temp root {ray.get('temp_root')})")
    return Phase("Ray job", _PHASE_STATES.get(job_state, "pending"), f"{ray['submission_id']} {job_state} {where}")


def job_env(plan_env: Mapping[str, str], attempt_env: Mapping[str, str]) -> dict[str, str]:
    """runtime_env.env_vars: the config's and tau's variables (the head already has the rest of the environment)."""
    return {k: str(v) for k, v in attempt_env.items() if k in plan_env or k.startswith("TAU_")}
