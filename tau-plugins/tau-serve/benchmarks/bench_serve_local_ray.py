"""Local Ray Serve (``tau serve deploy NAME --local --kind rayservice``): time to the first answer.

* ``serve-local-first-answer``: from starting ``tau serve deploy`` to the first HTTP 200 from the reported
  URL (a fresh Ray head, the Serve config applied, the replica up);
* baseline ``serve-apply-warm-head``: the same Serve config applied through the dashboard's Serve API to a
  head that is already running (Serve shut down between samples), to the first HTTP 200 (what the head
  start costs is the difference);
* ``serve-local-delete``: ``tau serve delete --local`` until it returns (the head and its processes gone).

Runnable standalone: ``python tau-plugins/tau-serve/benchmarks/bench_serve_local_ray.py`` (``TAU_BENCH_RUNS``
sets the sample size; each sample starts a Ray head, several seconds on two cores).
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tau_core.backends.local import ray as local_ray
from tau_serve import ray_local

RUNS = int(os.environ.get("TAU_BENCH_RUNS", "2"))
BIN = Path(sys.executable).parent
TAU = str(BIN / "tau") if (BIN / "tau").exists() else shutil.which("tau") or "tau"
APP = ("from ray import serve\n\n\n@serve.deployment\nclass Hello:\n    def __call__(self, request):\n"
       "        return 'hello'\n\n\napp = Hello.bind()\n")


def first_answer(url: str, started: float, timeout: float = 300.0) -> float:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return (time.perf_counter() - started) * 1000
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} never answered")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tau_sample(project: Path, home: Path, name: str) -> tuple[float, float]:
    env = {**os.environ, "TAU_DATA_DIR": str(home), "NO_COLOR": "1"}
    started = time.perf_counter()
    out = subprocess.run([TAU, "serve", "deploy", name, "--local", "--kind", "rayservice", "--import-path",
                          "hello:app"], cwd=project, env=env, check=True, capture_output=True, text=True).stdout
    url = out.split(" on ", 1)[1].split()[0] + "/"
    first = first_answer(url, started)
    started = time.perf_counter()
    subprocess.run([TAU, "serve", "delete", name, "--local", "--kind", "rayservice"], env=env, check=True,
                   capture_output=True)
    return first, (time.perf_counter() - started) * 1000


def warm_samples(project: Path, work: Path) -> list[float]:
    run_dir = work / "warm"
    run_dir.mkdir()
    saved = dict(os.environ)
    os.environ["PYTHONPATH"] = str(project)  # the head's replicas import hello:app from the project
    try:
        head = local_ray.start_head(run_dir, 4, lambda _m: None)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        record = head.record()
        port = free_port()  # Serve's HTTP options are fixed while it runs: one port, Serve shut down in between
        samples = []
        for _ in range(RUNS):
            started = time.perf_counter()
            ray_local.apply(record, ray_local.serve_config("hello:app", port))
            samples.append(first_answer(f"http://127.0.0.1:{port}/", started))
            ray_local.shutdown(record)
            while ray_local.application(record):
                time.sleep(0.2)
        return samples
    finally:
        local_ray.stop_head(head)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="tau-bench-serve-"))
    try:
        project = work / "project"
        project.mkdir()
        (project / "hello.py").write_text(APP)
        samples = [tau_sample(project, work / "home", f"hello{i}") for i in range(RUNS)]
        warm = warm_samples(project, work)
        print(f"serve-local-first-answer: median {statistics.median(s[0] for s in samples):.0f} ms over {RUNS} "
              "run(s) (tau serve deploy --local --kind rayservice -> first HTTP 200)")
        print(f"  baseline serve-apply-warm-head: median {statistics.median(warm):.0f} ms (Serve config applied "
              "to an already-running head -> first HTTP 200)")
        print(f"serve-local-delete: median {statistics.median(s[1] for s in samples):.0f} ms "
              "(tau serve delete --local, head and processes gone)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
