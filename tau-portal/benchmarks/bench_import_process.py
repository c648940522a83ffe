#!/usr/bin/env python
"""Whole-process JSONL import: ``taugrid-portal experiment import jsonl`` on a 1 M-point history.

The figure users feel is the whole command, interpreter start and imports included, so every
sample is a fresh process (after ``experiment init``, which is not counted).  Printed next to
baselines measured in the same run: ``python -c 'import polars'`` (the floor any polars-based
importer pays) and ``taugrid-portal --help``.

Each figure is the median of ``TAU_BENCH_REPEAT`` (default 5) processes:

* ``wall``: elapsed time; on a loaded machine it overstates the cost, so the load average is printed;
* ``cpu``: user + system time of the process (all its threads);
* ``peak-rss``: the process's maximum resident set.

With ``PYTHONDONTWRITEBYTECODE`` set (some shells and CI images set it) an editable install
recompiles every source module in each process; installed wheels ship bytecode.  So the import is
measured twice: as the environment is, and with bytecode cached (``PYTHONPYCACHEPREFIX`` in the
bench's temporary directory, written by one warm-up run).

``TAU_BENCH_SCALE`` (default 1.0) scales the history (1.0 = 100k steps x 10 metrics = 1 M points).
Target: >= 1,000,000 points/s for the whole process and peak RSS <= 200 MB.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCALE = float(os.environ.get("TAU_BENCH_SCALE", "1") or 1)
REPEAT = int(os.environ.get("TAU_BENCH_REPEAT", "5") or 5)
STEPS, METRICS = max(1000, int(100_000 * SCALE)), 10
PORTAL = str(Path(sys.executable).with_name("taugrid-portal"))


def report(name: str, value: float | str, unit: str = "", target: str = "") -> None:
    text = f"{value:,.1f}" if isinstance(value, float) else str(value)
    print(f"{name}: {text}{' ' + unit if unit else ''}{f' (target {target})' if target else ''}", flush=True)


GENERATE = """
import sys
import polars as pl
steps, metrics, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
step = pl.int_range(0, steps, eager=True).alias("_step")
cols = [step, (1_760_000_000.0 + step.cast(pl.Float64) * 0.5).alias("_timestamp"),
        (1.0 / (step.cast(pl.Float64) + 1.0)).alias("loss")]
cols += [((step.cast(pl.Float64) * (m + 1)) % 997 / 997.0).alias(f"metric_{m:02d}") for m in range(1, metrics)]
pl.DataFrame(cols).write_ndjson(path)
"""


def generate(path: Path) -> int:
    """``STEPS`` rows of ``_step``, ``_timestamp`` and ``METRICS`` metrics (the documented chunk format).

    Written by a child process: this process stays small, so the children it forks start small
    and their peak RSS is their own.
    """
    subprocess.run([sys.executable, "-c", GENERATE, str(STEPS), str(METRICS), str(path)], check=True)
    return STEPS * METRICS


def measure(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """(wall s, cpu s, peak RSS MB) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def median_of(samples: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    return tuple(statistics.median(s[i] for s in samples) for i in range(3))  # type: ignore[return-value]


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="tau-bench-import-"))
    try:
        history = work / "history.jsonl"
        points = generate(history)
        report("load-average", f"{os.getloadavg()[0]:.2f} (1 min, {os.cpu_count()} cores)")
        report("import-process-file", f"{history.stat().st_size / 1e6:,.1f} MB, {points:,} points")
        baselines = {
            "baseline-python-import-polars": [sys.executable, "-c", "import polars"],
            "baseline-portal-help": [PORTAL, "--help"],
        }
        for name, argv in baselines.items():
            wall, cpu, rss = median_of([measure(argv) for _ in range(REPEAT)])
            report(name, f"{wall * 1000:,.0f} ms wall, {cpu * 1000:,.0f} ms cpu, {rss:,.0f} MB peak RSS")
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        series = [("import-process", dict(os.environ))]
        if os.environ.get("PYTHONDONTWRITEBYTECODE"):
            series.append(("import-process-bytecode-cached", cached))
        for label, env in series:
            import_series(work, history, points, label, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def import_series(work: Path, history: Path, points: int, label: str, env: dict[str, str]) -> None:
    """``REPEAT`` imports, each into a fresh store, after one warm-up (which writes any bytecode)."""
    samples = []
    for i in range(REPEAT + 1):
        store = work / f"store-{i}"
        subprocess.run([PORTAL, "experiment", "init", "bench", "--store", str(store)], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sample = measure([PORTAL, "experiment", "import", "jsonl", "--store", str(store), "--run", "r",
                          "--history", str(history), "-o", "json"], env)
        if i:
            samples.append(sample)
        shutil.rmtree(store)
    wall, cpu, rss = median_of(samples)
    report(f"{label}-wall", wall * 1000, "ms")
    report(f"{label}-cpu", cpu * 1000, "ms")
    report(f"{label}-rate", points / wall, "points/s (whole process, wall)", ">= 1,000,000")
    report(f"{label}-rate-cpu", points / cpu, "points per CPU-second (whole process)", ">= 1,000,000")
    report(f"{label}-peak-rss", rss, "MB", "<= 200")


if __name__ == "__main__":
    main()
