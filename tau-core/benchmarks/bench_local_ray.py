"""A local ``engine: rayjob`` run on a real Ray head (issue 22): start-up and memory.

* ``rayjob-first-line``: from starting ``tau run job --local`` to the driver's first line in the run's log
  (head start + Jobs API submission + runtime env + driver start + log copy);
* baseline ``ray-job-submit-warm``: ``ray job submit`` of the same entrypoint to an already-running head,
  to the first line on its stdout;
* baseline ``ray-start-cold-plus-submit``: ``ray start --head`` (daemonised) and then ``ray job submit``;
* ``rayjob-first-line-session-head``: ``tau run job --local`` with ``TAU_LOCAL_RAY_ADDRESS`` set to that
  already-running head (no head start), beside the warm ``ray job submit``;
* ``rayjob-peak-rss``: the peak of the summed RSS of the run's head, driver and supervisor, against the
  peak RSS of the same script run as plain ``python``.

Runnable standalone: ``python tau-core/benchmarks/bench_local_ray.py`` (``TAU_BENCH_RUNS`` sets the sample size;
each sample starts a Ray head, a few seconds on two cores).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tau_core.backends.local import ray as local_ray

RUNS = int(os.environ.get("TAU_BENCH_RUNS", "2"))
BIN = Path(sys.executable).parent
TAU = str(BIN / "tau") if (BIN / "tau").exists() else shutil.which("tau") or "tau"
RAY = str(BIN / "ray") if (BIN / "ray").exists() else shutil.which("ray") or "ray"
SCRIPT = "import time\nprint('first line', flush=True)\nx = bytearray(50 * 1024 * 1024)\ntime.sleep(3)\n"
CONFIG = "name: job\nengine: rayjob\nentrypoint: ../script.py\ncompute:\n  workers: 1\n  gpus_per_worker: 0\n"


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tau_sample(project: Path, home: Path, extra: dict[str, str] | None = None) -> tuple[float, int]:
    env = {**os.environ, "TAU_DATA_DIR": str(home), "NO_COLOR": "1", **(extra or {})}
    before = set((home / "runs").glob("*")) if (home / "runs").is_dir() else set()
    start = time.perf_counter()
    subprocess.run([TAU, "run", "job", "--local"], cwd=project, env=env, check=True, capture_output=True)
    run = next(iter(set((home / "runs").glob("*")) - before))
    end = _first(run)
    first = (end - start) * 1000
    peak, sup = 0, None
    while not (run / "output.log").read_text().rstrip().endswith("run succeeded"):
        if sup is None:
            sup = (json.loads((run / "run.json").read_text()).get("supervisor") or {}).get("pid")
        total = sum(rss_kib(pid) for pid in local_ray.head_processes(run)) + (rss_kib(sup) if sup else 0)
        peak = max(peak, total)
        time.sleep(0.1)
    return first, peak


def _first(run: Path) -> float:
    deadline = time.perf_counter() + 180
    while time.perf_counter() < deadline:
        try:
            lines = (run / "output.log").read_text().splitlines()
        except OSError:
            lines = []
        if any(line.endswith(" first line") for line in lines):
            return time.perf_counter()
        time.sleep(0.01)
    raise RuntimeError(f"no first line in {run / 'output.log'}")


def plain_peak(project: Path) -> int:
    proc = subprocess.Popen([sys.executable, str(project / "script.py")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    time.sleep(2)
    peak = rss_kib(proc.pid, "VmHWM")
    proc.wait()
    return peak


def submit_ms(address: str, project: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen([RAY, "job", "submit", "--address", address, "--working-dir", str(project), "--",
                             sys.executable, "script.py"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "first line":
            break
    elapsed = (time.perf_counter() - start) * 1000
    proc.wait()
    return elapsed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cold_ms(project: Path, work: Path) -> float:
    """``ray start --head`` (daemonised, token auth, 127.0.0.1 dashboard) then ``ray job submit``."""
    marker_dir = work / f"cold-{time.monotonic_ns()}"
    marker_dir.mkdir()
    token = marker_dir / local_ray.TOKEN_FILE
    token.write_text(os.urandom(16).hex())
    token.chmod(0o600)
    temp_root = local_ray.short_temp_root()
    dash = free_port()
    env = {**os.environ, **local_ray.auth_env(token), local_ray.MARKER: str(marker_dir)}
    start = time.perf_counter()
    subprocess.run([RAY, "start", "--head", f"--port={free_port()}", "--dashboard-host=127.0.0.1",
                    f"--dashboard-port={dash}", f"--ray-client-server-port={free_port()}",
                    f"--dashboard-agent-listen-port={free_port()}", "--min-worker-port=0", "--max-worker-port=0",
                    f"--temp-dir={temp_root}", "--num-cpus=2", "--disable-usage-stats"], env=env, check=True,
                   capture_output=True)
    try:
        return (time.perf_counter() - start) * 1000 + submit_ms(f"http://127.0.0.1:{dash}", project, env)
    finally:
        local_ray.clean_up_after(marker_dir, {"temp_root": str(temp_root)})


def warm_ms(project: Path, work: Path) -> tuple[list[float], list[float]]:
    """``ray job submit`` to a running head, and ``tau run --local`` to it through TAU_LOCAL_RAY_ADDRESS."""
    run_dir = work / "warm"
    run_dir.mkdir()
    head = local_ray.start_head(run_dir, 2, lambda _m: None)
    try:
        env = {**os.environ, **local_ray.auth_env(run_dir / local_ray.TOKEN_FILE)}
        submit_ms(head.dashboard, project, env)  # the first job on a fresh head warms its job agent
        warm = [submit_ms(head.dashboard, project, env) for _ in range(RUNS)]
        extra = {**local_ray.auth_env(run_dir / local_ray.TOKEN_FILE), local_ray.ADDRESS_ENV: head.dashboard}
        session = [tau_sample(project, work / "home-session", extra)[0] for _ in range(RUNS)]
        return warm, session
    finally:
        local_ray.stop_head(head)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="tau-bench-ray-"))
    try:
        project = work / "project"
        (project / "tau").mkdir(parents=True)
        (project / "script.py").write_text(SCRIPT)
        (project / "tau" / "job.yaml").write_text(CONFIG)
        samples = [tau_sample(project, work / "home") for _ in range(RUNS)]
        warm, session = warm_ms(project, work)
        cold = [cold_ms(project, work) for _ in range(RUNS)]
        plain = max(plain_peak(project) for _ in range(RUNS))
        first = statistics.median(s[0] for s in samples)
        print(f"rayjob-first-line: median {first:.0f} ms over {RUNS} run(s) (tau run job --local -> driver's first "
              "line in the run log)")
        print(f"  baseline ray-job-submit-warm: median {statistics.median(warm):.0f} ms (already-running head)")
        print(f"  baseline ray-start-cold-plus-submit: median {statistics.median(cold):.0f} ms")
        print(f"rayjob-first-line-session-head: median {statistics.median(session):.0f} ms (tau run job --local "
              f"with TAU_LOCAL_RAY_ADDRESS) vs ray-job-submit-warm {statistics.median(warm):.0f} ms")
        peak = max(s[1] for s in samples)
        print(f"rayjob-peak-rss: {peak / 1024:.0f} MiB (head + driver + supervisor) vs plain python "
              f"{plain / 1024:.0f} MiB ({peak / max(plain, 1):.1f}x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
