"""The process kubelet: runs a pod's containers as real local processes instead of following a ``PodScript``.

Switch it on for a cluster with :func:`enable_process_kubelet` (all pods whose images match, or those a
``match`` callable picks; a pod runs as processes only when every container names its ``command``, else the
scripted kubelet keeps it). Each container's ``command`` + ``args`` run through the host's ``sh`` (``sh -c
'exec "$@"'``) with the env and volumes of :mod:`tau_testing.sim.process_spec`; stdout and stderr go line by
line into the cluster's log book (``kubectl logs`` reads them); the exit code comes back as the container's
``terminated`` state (``Completed``/``Error``), and a container whose processes exceed its memory limit is
killed with SIGKILL by a watchdog and reported ``OOMKilled`` (137). Init containers run one after the other
first. A deleted pod's processes get SIGTERM (the leader only, as PID 1 of a container does) and SIGKILL to
the whole process group after the pod's grace period (capped by ``max_grace``).

Threads, like the rest of the simulator: one waiter per process, one reader per stream, one OOM watchdog.
What it does not isolate is in ``tau_testing/sim/README.md``: it is not a container.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from tau_testing.sim.controllers import _util as u
from tau_testing.sim.process_spec import HostContainer, VolumeRoots, host_container, runnable, volume_dirs

__all__ = ["ProcessKubelet", "enable_process_kubelet", "process_kubelet_of"]

OOM_EXIT = 137
START_ERROR_EXIT = 128
WATCH_INTERVAL = 0.1


@dataclass
class Proc:
    """One run of one container."""

    name: str
    host: HostContainer | None
    popen: subprocess.Popen[bytes] | None = None
    started: datetime | None = None
    finished: datetime | None = None
    exit_code: int | None = None
    reason: str | None = None
    message: str = ""
    restarts: int = 0
    last: dict[str, Any] | None = None
    ended_at: float = 0.0  # time.monotonic() of the exit: restarts wait a real second, whatever the clock
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class PodRun:
    """Every container process of one pod."""

    uid: str
    namespace: str
    name: str
    pod_dir: Path
    volumes: dict[str, Path]
    inits: list[str]
    mains: list[str]
    restart_policy: str
    grace: float = 30.0
    sidecars: list[str] = field(default_factory=list)  # init containers with restartPolicy Always
    procs: dict[str, Proc] = field(default_factory=dict)
    announced: set[str] = field(default_factory=set)
    stopping: bool = False


class ProcessKubelet:
    """The process runtime one cluster uses (see the module docstring)."""

    def __init__(self, cluster: Any, *, images: Iterable[str] = ("*",),
                 match: Callable[[dict[str, Any]], bool] | None = None, root: str | Path | None = None,
                 claims: Mapping[str, str | Path] | None = None, max_grace: float = 30.0) -> None:
        self.cluster = cluster
        self.images = list(images)
        self.match = match
        self._own_root = root is None
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="tau-sim-kubelet-"))
        self.roots = VolumeRoots(self.root, {k: Path(v) for k, v in (claims or {}).items()})
        self.max_grace = max_grace
        self.runs: dict[str, PodRun] = {}
        self.started: list[tuple[str, str]] = []  # (namespace, pod) of every pod run as processes, in order
        self._lock = threading.RLock()
        self._closed = False
        self._watchdog: threading.Thread | None = None

    # -- which pods ---------------------------------------------------------------------------------------

    def claims_pod(self, pod: dict[str, Any]) -> bool:
        """True when this runtime runs ``pod`` (matching image or ``match``, and every container has a command)."""
        if pod["metadata"]["uid"] in self.runs:
            return True
        spec = pod.get("spec") or {}
        containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
        if not containers or not all(runnable(c) for c in containers):
            return False
        if self.match is not None:
            return bool(self.match(pod))
        return any(fnmatch.fnmatchcase(str(c.get("image", "")), pat) for c in containers for pat in self.images)

    # -- reconcile ----------------------------------------------------------------------------------------

    def sync(self, cluster: Any, pod: dict[str, Any], node: dict[str, Any] | None) -> bool:
        """Start what should run now and write the pod's status; True when anything was written."""
        from tau_testing.sim.kubelet_status import record_starts, status_of

        with self._lock:
            if self._closed:
                return False
            run = self.runs.get(pod["metadata"]["uid"])
            if run is None:
                run = self._prepare(cluster, pod)
            status = status_of(cluster, pod, run, node, u.now(cluster))
            self._advance(cluster, {**pod, "status": status}, run)
            status = status_of(cluster, pod, run, node, u.now(cluster))
            changed = u.write_status_if_changed(cluster, pod, status)
            changed |= record_starts(cluster, pod, run)
            return changed

    def _prepare(self, cluster: Any, pod: dict[str, Any]) -> PodRun:
        spec = pod.get("spec") or {}
        ns, name = u.key(pod)
        pod_dir = self.roots.pod_dir(pod)
        pod_dir.mkdir(parents=True, exist_ok=True)
        run = PodRun(pod["metadata"]["uid"], ns, name, pod_dir, volume_dirs(cluster, pod, self.roots),
                     [c["name"] for c in spec.get("initContainers") or []],
                     [c["name"] for c in spec.get("containers") or []],
                     str(spec.get("restartPolicy") or "Always"), self.grace_of(pod),
                     [c["name"] for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"])
        self.runs[run.uid] = run
        self.started.append((ns, name))
        return run

    def _advance(self, cluster: Any, pod: dict[str, Any], run: PodRun) -> None:
        if run.stopping:
            return
        mains_done = bool(run.mains) and all(
            (p := run.procs.get(m)) is not None and p.exit_code is not None
            and not _restarts(run.restart_policy, p.exit_code) for m in run.mains)
        for init in run.inits:
            proc = run.procs.get(init)
            if proc is None:
                self._start(cluster, pod, run, init)
                if init not in run.sidecars:
                    return
                continue
            if init in run.sidecars:  # a native sidecar keeps running (restarted) until the main containers end
                if mains_done:
                    self._stop_sidecar(run, proc)
                elif proc.exit_code is not None:
                    self._restart(cluster, pod, run, proc)
                continue
            if proc.exit_code is None:
                return
            if proc.exit_code != 0:
                if run.restart_policy != "Never":
                    self._restart(cluster, pod, run, proc)
                return
        for main in run.mains:
            proc = run.procs.get(main)
            if proc is None:
                self._start(cluster, pod, run, main)
            elif proc.exit_code is not None and _restarts(run.restart_policy, proc.exit_code):
                self._restart(cluster, pod, run, proc)

    def _stop_sidecar(self, run: PodRun, proc: Proc) -> None:
        """The main containers ended: SIGTERM the sidecar, SIGKILL its group after the grace period."""
        if proc.popen is None or proc.done.is_set() or proc.reason == "Stopping":
            return
        proc.reason = "Stopping"

        def stop() -> None:
            assert proc.popen is not None
            try:
                proc.popen.send_signal(signal.SIGTERM)
            except OSError:
                return
            if not proc.done.wait(run.grace):
                _signal_group(proc.popen.pid, signal.SIGKILL)

        threading.Thread(target=stop, name=f"sim-proc-stop-{run.name}-{proc.name}", daemon=True).start()

    def _container(self, pod: dict[str, Any], name: str) -> dict[str, Any]:
        spec = pod.get("spec") or {}
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            if c["name"] == name:
                return dict(c)
        raise LookupError(name)

    def _start(self, cluster: Any, pod: dict[str, Any], run: PodRun, name: str, restarts: int = 0,
               last: dict[str, Any] | None = None) -> None:
        now = u.now(cluster)
        host = host_container(cluster, pod, self._container(pod, name), run.volumes, run.pod_dir)
        proc = Proc(name, host, started=now, restarts=restarts, last=last)
        run.procs[name] = proc
        try:
            proc.popen = subprocess.Popen(  # the pod's own command, by design
                ["sh", "-c", 'exec "$@"', "sh", *host.argv], env=host.env, cwd=host.cwd,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            proc.exit_code, proc.reason, proc.finished = START_ERROR_EXIT, "StartError", now
            proc.message = f"process kubelet could not start the command: {exc}"
            proc.done.set()
            return
        threading.Thread(target=self._wait, args=(run, proc), name=f"sim-proc-{run.name}-{name}",
                         daemon=True).start()
        if host.memory_limit is not None:
            self._ensure_watchdog()

    def _restart(self, cluster: Any, pod: dict[str, Any], run: PodRun, proc: Proc) -> None:
        if time.monotonic() - proc.ended_at < 1:
            return  # a one-second pause between restarts (no CrashLoopBackOff growth); a later reconcile restarts
        logs = getattr(cluster, "logs", None)
        if logs is not None:
            logs.restart(run.namespace, run.name, proc.name)
        run.announced.discard(proc.name)
        from tau_testing.sim.kubelet_status import terminated_state

        self._start(cluster, pod, run, proc.name, proc.restarts + 1, terminated_state(proc))

    # -- process threads ----------------------------------------------------------------------------------

    def _wait(self, run: PodRun, proc: Proc) -> None:
        assert proc.popen is not None
        readers = [threading.Thread(target=self._pump, args=(run, proc.name, stream), daemon=True)
                   for stream in (proc.popen.stdout, proc.popen.stderr) if stream is not None]
        for reader in readers:
            reader.start()
        code = proc.popen.wait()
        _signal_group(proc.popen.pid, signal.SIGKILL)  # PID 1 ended: the rest of the "container" goes with it
        for reader in readers:
            reader.join(timeout=5)
        proc.finished, proc.ended_at = u.now(self.cluster), time.monotonic()
        if proc.reason != "OOMKilled":
            proc.exit_code = code if code >= 0 else 128 - code
            proc.reason = "Completed" if proc.exit_code == 0 else "Error"
        else:
            proc.exit_code = OOM_EXIT
        logs = getattr(self.cluster, "logs", None)
        if logs is not None:
            logs.mark_terminated(run.namespace, run.name, proc.name)
        proc.done.set()
        self._poke()

    def _pump(self, run: PodRun, container: str, stream: IO[bytes]) -> None:
        logs = getattr(self.cluster, "logs", None)
        for raw in iter(stream.readline, b""):
            if logs is not None and not run.stopping:
                logs.append(run.namespace, run.name, container, raw.decode("utf-8", "replace").rstrip("\n"))
        stream.close()

    def _poke(self) -> None:
        """A process ended: with a fake clock nothing else would notice, so settle here."""
        if self._closed or not getattr(self.cluster.clock, "is_fake", False):
            return
        try:
            self.cluster.settle()
        except Exception as exc:  # reported the way the background runner reports
            self.cluster.settle_errors.append(exc)

    def _ensure_watchdog(self) -> None:
        with self._lock:
            if self._watchdog is None or not self._watchdog.is_alive():
                self._watchdog = threading.Thread(target=self._watch_memory, name="sim-proc-oom", daemon=True)
                self._watchdog.start()

    def _watch_memory(self) -> None:
        from tau_testing.sim.kubelet_status import group_rss

        while not self._closed:
            with self._lock:
                limited = [p for r in self.runs.values() for p in r.procs.values()
                           if p.popen is not None and p.exit_code is None and p.host is not None
                           and p.host.memory_limit is not None and p.reason != "OOMKilled"]
            if not limited:
                return
            usage = group_rss({p.popen.pid for p in limited if p.popen is not None})
            for proc in limited:
                assert proc.popen is not None and proc.host is not None and proc.host.memory_limit is not None
                if usage.get(proc.popen.pid, 0) > proc.host.memory_limit:
                    proc.reason, proc.message = "OOMKilled", ""
                    _signal_group(proc.popen.pid, signal.SIGKILL)
            time.sleep(WATCH_INTERVAL)

    # -- stopping -----------------------------------------------------------------------------------------

    def reap(self, alive: set[str]) -> None:
        """Stop the processes of every pod not in ``alive`` (deleted, or being deleted)."""
        with self._lock:
            gone = [uid for uid in self.runs if uid not in alive]
            for uid in gone:
                run = self.runs.pop(uid)
                if not run.stopping:
                    run.stopping = True
                    threading.Thread(target=self._terminate, args=(run,), name=f"sim-proc-stop-{run.name}",
                                     daemon=True).start()

    def forget_terminal(self, uid: str) -> None:
        with self._lock:
            run = self.runs.get(uid)
            if run is not None and all(p.done.is_set() for p in run.procs.values()):
                del self.runs[uid]

    def _terminate(self, run: PodRun, grace: float | None = None) -> None:
        live = [p for p in run.procs.values() if p.popen is not None and not p.done.is_set()]
        for proc in live:
            assert proc.popen is not None
            try:
                proc.popen.send_signal(signal.SIGTERM)
            except OSError:
                pass
        deadline = time.monotonic() + (run.grace if grace is None else grace)
        for proc in live:
            proc.done.wait(max(0.0, deadline - time.monotonic()))
        for proc in live:
            if proc.popen is not None and not proc.done.is_set():
                _signal_group(proc.popen.pid, signal.SIGKILL)

    def grace_of(self, pod: dict[str, Any]) -> float:
        value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        return min(self.max_grace, float(30 if value is None else value))

    def shutdown(self) -> None:
        """Kill every process now (the cluster stops) and remove the directories this runtime created."""
        self._closed = True
        with self._lock:
            runs = list(self.runs.values())
            self.runs.clear()
        for run in runs:
            run.stopping = True
            self._terminate(run, grace=0.5)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)


def _restarts(policy: str, code: int) -> bool:
    return policy == "Always" or (policy == "OnFailure" and code != 0)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


def enable_process_kubelet(cluster: Any, **options: Any) -> ProcessKubelet:
    """Run the cluster's pods as local processes from now on (options: see :class:`ProcessKubelet`)."""
    runtime = ProcessKubelet(cluster, **options)
    cluster.process_kubelet = runtime
    return runtime


def process_kubelet_of(cluster: Any) -> ProcessKubelet | None:
    runtime = getattr(cluster, "process_kubelet", None)
    return runtime if isinstance(runtime, ProcessKubelet) else None
