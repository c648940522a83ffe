"""Benchmark: ``taugrid-portal experiment stellar -o html`` on a large experiment.

Default size: 100 runs x 10 metrics x 10,000 steps (10 M points), imported from JSONL into a
real store. Targets: <= 2 s wall for the command, <= 5 MB page, first chart painted in headless
Chromium within 1.5 s (``window.stellar.firstChartAt``, a ``performance.now()`` mark our page
script sets after the first uPlot draw).

Run standalone: ``python tau-portal/benchmarks/bench_stellar.py``. Sizes for a smoke run:
``TAU_BENCH_STELLAR_RUNS``, ``TAU_BENCH_STELLAR_METRICS``, ``TAU_BENCH_STELLAR_STEPS``; repeats:
``TAU_BENCH_STELLAR_REPEAT`` (default 3, the median is reported). The generated store is cached
under ``TAU_BENCH_STELLAR_CACHE`` (default: the system temp dir) and reused when present.
Chromium: ``/usr/bin/chromium`` (``TAU_CHROMIUM`` overrides); never downloaded.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = int(os.environ.get("TAU_BENCH_STELLAR_RUNS", "100"))
METRICS = int(os.environ.get("TAU_BENCH_STELLAR_METRICS", "10"))
STEPS = int(os.environ.get("TAU_BENCH_STELLAR_STEPS", "10000"))
REPEAT = int(os.environ.get("TAU_BENCH_STELLAR_REPEAT", "3"))
CACHE = Path(os.environ.get("TAU_BENCH_STELLAR_CACHE", tempfile.gettempdir()))
CHROMIUM = os.environ.get("TAU_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
TARGET_WALL_S = 2.0
TARGET_PAGE_MB = 5.0
TARGET_PAINT_MS = 1500.0


def build_store(root: Path) -> float:
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import import_jsonl, init_experiment

    started = time.perf_counter()
    tmp = root.with_name(root.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    store, _ = ExperimentStore.init(tmp, project="bench")
    names = ["loss", "eval/accuracy"] + [f"train/metric_{m:02d}" for m in range(max(0, METRICS - 2))]
    names = names[:METRICS]
    history_dir = tmp.parent / (tmp.name + "-history")
    history_dir.mkdir(parents=True, exist_ok=True)
    with store:
        init_experiment(store, "bench-sweep", project="bench")
        for r in range(RUNS):
            path = history_dir / f"run-{r:03d}.jsonl"
            with path.open("w", encoding="utf-8") as fh:
                for s in range(STEPS):
                    row = {"_step": s, "_timestamp": 1760000000.0 + s}
                    for k, name in enumerate(names):
                        row[name] = round(1.0 / (1.0 + s * (r + 1) / 500.0) + 0.05 * math.sin(s / 37.0 + k + r), 6)
                    fh.write(json.dumps(row) + "\n")
            import_jsonl(store, run=f"run-{r:03d}", history=[str(path)], experiment="bench-sweep",
                         group=f"arm-{r % 4}", copy_history=False)
            path.unlink()
    shutil.rmtree(history_dir, ignore_errors=True)
    os.replace(tmp, root)
    return time.perf_counter() - started


def time_command(store: Path, out: Path) -> tuple[list[float], list[float]]:
    code = "import sys; from taugrid_portal.cli import main; main(sys.argv[1:])"
    cmd = [sys.executable, "-c", code, "experiment", "stellar", "bench-sweep", "-o", "html", "--out", str(out),
           "--store", str(store)]
    walls, cpus = [], []
    for _ in range(REPEAT):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        if proc.returncode != 0:
            raise SystemExit(f"stellar -o html failed ({proc.returncode}): {proc.stderr.strip()}")
    return walls, cpus


def in_process_breakdown(store_path: Path) -> tuple[float, float]:
    from taugrid_portal.stellar.html import render_html
    from taugrid_portal.stellar.snapshot import build_snapshot
    from taugrid_portal.store import ExperimentStore

    with ExperimentStore.open(store_path) as store:
        t0 = time.perf_counter()
        snap = build_snapshot(store, "bench-sweep")
        t1 = time.perf_counter()
        render_html(snap)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def first_paint(page_path: Path) -> tuple[float, float]:
    if not os.path.isfile(CHROMIUM):
        raise SystemExit(f"{CHROMIUM} is missing; install it with `apt-get install -y chromium`")
    from playwright.sync_api import sync_playwright

    paints, readies = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            for _ in range(REPEAT):
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                errors: list[str] = []
                page.on("pageerror", lambda e, sink=errors: sink.append(str(e)))
                page.goto(page_path.as_uri())
                page.wait_for_function("() => window.stellar && window.stellar.firstChartAt !== null", timeout=60000)
                paints.append(page.evaluate("window.stellar.firstChartAt"))
                page.wait_for_function("() => window.stellar.ready === true", timeout=120000)
                readies.append(page.evaluate("performance.now()"))
                if errors:
                    raise SystemExit(f"page errors: {errors}")
                page.close()
        finally:
            browser.close()
    return statistics.median(paints), statistics.median(readies)


def main() -> None:
    points = RUNS * METRICS * STEPS
    from taugrid_portal.store import SCHEMA_VERSION

    # the store layout version is part of the cache key: a store cached by an older release
    # would be migrated on open but lack what newer imports write (e.g. display copies)
    store = CACHE / f"tau-bench-stellar-{SCHEMA_VERSION}-{RUNS}x{METRICS}x{STEPS}"
    if not (store / "manifest.json").is_file():
        print(f"building store: {RUNS} runs x {METRICS} metrics x {STEPS} steps = {points:,} points ...",
              file=sys.stderr)
        built = build_store(store)
        print(f"store-build: {built:.1f} s (not part of the targets)", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "stellar.html"
        load_before = os.getloadavg()[0]
        walls, cpus = time_command(store, page)
        size_mb = page.stat().st_size / 1e6
        snap_s, render_s = in_process_breakdown(store)
        paint_ms, ready_ms = first_paint(page)
    wall = statistics.median(walls)
    print(f"# stellar -o html: {RUNS} runs x {METRICS} metrics x {STEPS} steps ({points:,} points), "
          f"median of {REPEAT}; {os.cpu_count()} CPUs, 1-min load average {load_before:.1f} at start")
    print(f"stellar-html-wall: {wall * 1000:.0f} ms (target <= {TARGET_WALL_S * 1000:.0f} ms)"
          f"{'' if wall <= TARGET_WALL_S else '  MISSED'}")
    print(f"stellar-html-size: {size_mb:.2f} MB (target <= {TARGET_PAGE_MB:.0f} MB)"
          f"{'' if size_mb <= TARGET_PAGE_MB else '  MISSED'}")
    print(f"stellar-first-chart-paint: {paint_ms:.0f} ms (target <= {TARGET_PAINT_MS:.0f} ms)"
          f"{'' if paint_ms <= TARGET_PAINT_MS else '  MISSED'}")
    print(f"stellar-html-cpu: {statistics.median(cpus) * 1000:.0f} ms user+sys, all threads (no target)")
    print(f"stellar-all-charts-ready: {ready_ms:.0f} ms (no target)")
    print(f"stellar-snapshot-build: {snap_s * 1000:.0f} ms (in-process, no target)")
    print(f"stellar-html-render: {render_s * 1000:.0f} ms (in-process, no target)")


if __name__ == "__main__":
    main()
