"""The local execution backend (issue 7): start-up overhead and the quickstart's wall time.

* ``local-first-line-overhead``: median time from starting ``tau run job --local`` to the script's
  first line of output appearing in the run's log, minus the same for ``python script.py`` run
  directly (start to first line on its stdout).  Target <= 300 ms.
* ``local-backend-submit-first-line``: the same measured from ``LocalBackend.submit`` in-process,
  i.e. the backend's own share (supervisor start + process start + log capture).
* ``quickstart-wall-time``: ``tau run train --local`` in examples/quickstart until the run is terminal
  and its evidence (store import, terminal marker, Stellar page) is written.  Target <= 60 s.

Runnable standalone: ``python tau-core/benchmarks/bench_local.py`` (``TAU_BENCH_RUNS`` sets the sample size).
Byte-code writing is switched on for the measured processes (``PYTHONDONTWRITEBYTECODE`` is dropped) and
one warm-up run precedes the samples, so the figures match an installed CLI rather than a cold compile.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = int(os.environ.get("TAU_BENCH_RUNS", "7"))
REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TAU = str(BIN / "tau") if (BIN / "tau").exists() else shutil.which("tau") or "tau"
SCRIPT = "print('first line', flush=True)\n"
CONFIG = "name: job\nengine: job\nentrypoint: ../script.py\ncompute:\n  gpus: 0\nruntime:\n  image: python:3.12-slim\n"


def first_log_line(runs_root: Path, marker: str, timeout: float = 30.0) -> float:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        for log in runs_root.glob("*/output.log"):
            try:
                if marker in log.read_text():
                    return time.perf_counter()
            except OSError:
                pass
        time.sleep(0.002)
    raise RuntimeError(f"no '{marker}' in {runs_root} within {timeout}s")


def direct_ms(project: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(project / "script.py")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    elapsed = (time.perf_counter() - start) * 1000
    proc.wait()
    return elapsed


def tau_ms(project: Path, home: Path) -> float:
    env = {**os.environ, "TAU_DATA_DIR": str(home), "NO_COLOR": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen([TAU, "run", "job", "--local"], cwd=project, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        end = first_log_line(home / "runs", "first line")
    except RuntimeError:
        proc.wait()
        raise RuntimeError(f"tau run --local failed: {proc.stderr.read() if proc.stderr else ''}") from None
    proc.wait()
    return (end - start) * 1000


def backend_ms(project: Path, home: Path) -> float:
    os.environ["TAU_DATA_DIR"] = str(home)
    from tau_core.backends.local.backend import LocalBackend
    from tau_core.lifecycle import SubmitRequest

    request = SubmitRequest(name="job", config={"entrypoint": "../script.py"}, objects=[], context={},
                            config_path=project / "tau" / "job.yaml")
    start = time.perf_counter()
    LocalBackend().submit(request)
    end = first_log_line(home / "runs", "first line")
    return (end - start) * 1000


def wait_terminal(home: Path, timeout: float = 120.0) -> dict:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        for record in (home / "runs").glob("*/run.json"):
            try:
                data = json.loads(record.read_text())
            except (OSError, ValueError):
                continue
            if data.get("evidence_done"):
                return data
        time.sleep(0.05)
    raise RuntimeError("the quickstart did not finish")


def main() -> None:
    # measure what users get: byte-code cached after the first run (one warm-up run below writes it)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="tau-bench-local-") as tmp:
        root = Path(tmp)
        project = root / "project"
        (project / "tau").mkdir(parents=True)
        (project / "script.py").write_text(SCRIPT)
        (project / "tau" / "job.yaml").write_text(CONFIG)
        tau_ms(project, root / "home-warm-up")
        direct = [direct_ms(project) for _ in range(RUNS)]
        via_tau = [tau_ms(project, root / f"home-tau-{i}") for i in range(RUNS)]
        via_backend = [backend_ms(project, root / f"home-backend-{i}") for i in range(RUNS)]
        d, t, b = statistics.median(direct), statistics.median(via_tau), statistics.median(via_backend)
        print(f"python-direct-first-line: {d:.1f} ms (median of {RUNS})")
        print(f"tau-run-local-first-line: {t:.1f} ms (median of {RUNS})")
        print(f"local-first-line-overhead: {t - d:.1f} ms (target <= 300 ms)")
        print(f"local-backend-submit-first-line: {b:.1f} ms = {b - d:.1f} ms over direct (backend share)")

        home = root / "home-quickstart"
        env = {**os.environ, "TAU_DATA_DIR": str(home), "NO_COLOR": "1"}
        start = time.perf_counter()
        subprocess.run([TAU, "run", "train", "--local"], cwd=REPO / "examples" / "quickstart", env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        record = wait_terminal(home)
        wall = time.perf_counter() - start
        print(f"quickstart-wall-time: {wall:.1f} s (target <= 60 s; state {record.get('state')})")


if __name__ == "__main__":
    main()
