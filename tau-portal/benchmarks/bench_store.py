#!/usr/bin/env python
"""Experiment-store benchmarks, with MLflow's SQLite tracking store side by side.

Run standalone: ``python tau-portal/benchmarks/bench_store.py``.

* ``TAU_BENCH_SCALE`` (default 1.0) scales every size; ``0.1`` is a quick smoke run.
* ``TAU_BENCH_MLFLOW_PYTHON`` is the interpreter that has ``mlflow`` installed (default: this
  one).  MLflow is a bench-only dependency: keep it out of the product's environment.
* ``TAU_BENCH_DIR`` keeps the generated data there instead of a temp directory.

Each figure is printed as ``name: value unit (target ...)``.  The machine's load average is
printed too: the store's work is CPU-bound, so wall-clock throughput on a shared machine
understates it; ``...-cpu`` lines give points per CPU-second.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

SCALE = float(os.environ.get("TAU_BENCH_SCALE", "1") or 1)
RUNS, METRICS = 10, 10
STEPS = max(100, int(100_000 * SCALE))
MLFLOW_POINTS = max(10_000, int(1_000_000 * SCALE))
LATEST_RUNS = max(20, int(1000 * SCALE))
SEARCH_RUNS = max(200, int(10_000 * SCALE))
MLFLOW_PY = os.environ.get("TAU_BENCH_MLFLOW_PYTHON", sys.executable)


def report(name: str, value: float | str, unit: str = "", target: str = "") -> None:
    text = f"{value:,.1f}" if isinstance(value, float) else str(value)
    line = f"{name}: {text}{' ' + unit if unit else ''}"
    if target:
        line += f" (target {target})"
    print(line, flush=True)


def generate(directory: Path, runs: int, steps: int, metrics: int) -> list[Path]:
    """One JSONL history per run in the documented ``_step``/``_timestamp`` chunk format."""
    import polars as pl

    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for r in range(runs):
        step = pl.int_range(0, steps, eager=True).alias("_step")
        cols = [step, (1_760_000_000.0 + step.cast(pl.Float64) * 0.5).alias("_timestamp")]
        cols.append((1.0 / (step.cast(pl.Float64) + 1.0 + r)).alias("loss"))
        for m in range(1, metrics):
            cols.append(((step.cast(pl.Float64) * (m + 1) + r) % 997 / 997.0).alias(f"metric_{m:02d}"))
        path = directory / f"run-{r:02d}.jsonl"
        pl.DataFrame(cols).write_ndjson(path)
        files.append(path)
    return files


IMPORT_CHILD = textwrap.dedent("""
    import json, resource, sys, time
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import import_jsonl
    import os, tempfile
    import polars, pyarrow.compute, pyarrow.json, pyarrow.parquet
    root, files = sys.argv[1], sys.argv[2:]
    # warm the process (imports, first-use initialisation) on a throwaway store, as a long-lived
    # importer such as the offload sidecar is; the cold-start cost is reported separately
    warm_dir = tempfile.mkdtemp()
    with open(os.path.join(warm_dir, "w.jsonl"), "w") as fh:
        fh.write("".join('{"_step": %d, "_timestamp": 1760000000.5, "loss": 0.5}\\n' % i for i in range(100)))
    warm, _ = ExperimentStore.init(os.path.join(warm_dir, "store"), project="warm")
    t_cold = time.perf_counter()
    import_jsonl(warm, run="warm", history=[os.path.join(warm_dir, "w.jsonl")])
    cold = time.perf_counter() - t_cold
    store, _ = ExperimentStore.init(root, project="bench")  # creates, or attaches to a sibling's store
    t0, c0 = time.perf_counter(), time.process_time()
    rows = 0
    for i, f in enumerate(files):
        rows += import_jsonl(store, run=f"run-{i:02d}", history=[f], experiment="bench")["rows"]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rows": rows, "wall": wall, "cpu": cpu, "peak_mb": peak, "cold": cold}))
""")

MLFLOW_CHILD = textwrap.dedent("""
    import json, sys, time, logging, warnings
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    args = json.loads(sys.argv[1])
    try:
        import mlflow
        from mlflow.entities import Metric
        from mlflow.tracking import MlflowClient
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        sys.exit(0)
    client = MlflowClient(tracking_uri="sqlite:///" + args["db"])
    out = {"mlflow_version": mlflow.__version__}
    if args["mode"] == "log":
        exp = client.create_experiment("bench-log")
        run = client.create_run(exp).info.run_id
        steps, metrics = args["steps"], args["metrics"]
        names = ["loss"] + [f"metric_{m:02d}" for m in range(1, metrics)]
        t0 = time.perf_counter()
        batch = []
        ts = 1760000000000
        for s in range(steps):
            for i, n in enumerate(names):
                v = 1.0 / (s + 1.0) if i == 0 else ((s * (i + 1)) % 997) / 997.0
                batch.append(Metric(n, v, ts + s * 500, s))
                if len(batch) == 1000:
                    client.log_batch(run, metrics=batch)
                    batch = []
        if batch:
            client.log_batch(run, metrics=batch)
        out.update(points=steps * metrics, wall=time.perf_counter() - t0)
    else:
        exp = client.create_experiment("bench-latest")
        for r in range(args["runs"]):
            run = client.create_run(exp).info.run_id
            client.log_batch(run, metrics=[Metric("loss", 1.0 / (s + 1 + r), 1760000000000 + s, s)
                                           for s in range(args["steps"])]
                             + [Metric("accuracy", s / args["steps"], 1760000000000 + s, s)
                                for s in range(args["steps"])])
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            runs = client.search_runs([exp], max_results=args["runs"])
            latest = {r.info.run_id: r.data.metrics["loss"] for r in runs}
            times.append(time.perf_counter() - t0)
        out.update(runs=len(latest), seconds=sorted(times)[1])
    print(json.dumps(out))
""")


def run_mlflow(args: dict) -> dict:
    try:
        proc = subprocess.run([MLFLOW_PY, "-c", MLFLOW_CHILD, json.dumps(args)], capture_output=True, text=True,
                              timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def bench_import(work: Path) -> float:
    files = generate(work / "hist", RUNS, STEPS, METRICS)
    size = sum(f.stat().st_size for f in files)
    proc = subprocess.run([sys.executable, "-c", IMPORT_CHILD, str(work / "store-import"), *map(str, files)],
                          capture_output=True, text=True, check=True)
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    points = res["rows"]
    report("jsonl-import-points", f"{points:,}", f"points ({RUNS} runs x {METRICS} metrics x {STEPS:,} steps, "
           f"{size / 1e6:,.0f} MB JSONL)")
    report("jsonl-import-throughput", points / res["wall"], "points/s", ">= 1,000,000 points/s")
    report("jsonl-import-throughput-cpu", points / res["cpu"], "points per CPU-second")
    report("jsonl-import-peak-rss", res["peak_mb"], "MB")
    report("jsonl-import-first-call-overhead", res["cold"] * 1000, "ms (one-time imports in a fresh process)")
    # the same 10 runs imported by two writer processes at once into one store (the writer lock
    # serializes only the short commit, so independent runs import in parallel)
    workers = 2
    store = work / "store-import-parallel"
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", IMPORT_CHILD.replace('run=f"run-{i:02d}"',
                                                                          f'run=f"run-{w}-{{i:02d}}"'),
                               str(store), *map(str, files[w::workers])], stdout=subprocess.PIPE, text=True)
             for w in range(workers)]
    results = []
    for p in procs:
        out, _ = p.communicate()
        results.append(json.loads(out.strip().splitlines()[-1]))
    wall = time.perf_counter() - t0
    rows = sum(r["rows"] for r in results)
    report("jsonl-import-throughput-2-writers", rows / max(r["wall"] for r in results),
           f"points/s (two writer processes into one store; {rows / wall:,.0f} points/s including "
           "process start-up)")
    return points / res["wall"]


def bench_vs_mlflow(work: Path) -> None:
    steps = MLFLOW_POINTS // METRICS
    [f] = generate(work / "hist-1m", 1, steps, METRICS)
    proc = subprocess.run([sys.executable, "-c", IMPORT_CHILD, str(work / "store-1m"), str(f)],
                          capture_output=True, text=True, check=True)
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    tau_rate = res["rows"] / res["wall"]
    report("tau-import-1m", tau_rate, f"points/s ({res['rows']:,} points, {res['wall'] * 1000:,.0f} ms)")
    ml = run_mlflow({"mode": "log", "db": str(work / "mlflow-log.db"), "steps": steps, "metrics": METRICS})
    if "error" in ml:
        report("mlflow-sqlite-log-batch", f"unavailable ({ml['error']})")
        report("tau-vs-mlflow-ingest-speedup", "n/a (mlflow unavailable)", "", ">= 50x")
        return
    ml_rate = ml["points"] / ml["wall"]
    report("mlflow-sqlite-log-batch", ml_rate, f"points/s (mlflow {ml['mlflow_version']}, log_batch of 1,000, "
           f"{ml['wall']:,.1f} s)")
    report("tau-vs-mlflow-ingest-speedup", tau_rate / ml_rate, "x", ">= 50x")


def bench_latest(work: Path) -> None:
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import write_records

    steps = 100
    store, _ = ExperimentStore.init(work / "store-latest", project="bench")
    for start in range(0, LATEST_RUNS, 250):
        recs = [{"run_id": f"run-{r:05d}", "metric_name": name, "step": s,
                 "value": 1.0 / (s + 1 + r) if name == "loss" else s / steps}
                for r in range(start, min(LATEST_RUNS, start + 250)) for name in ("loss", "accuracy")
                for s in range(steps)]
        write_records(store, recs)
    store.close()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        s = ExperimentStore.open(work / "store-latest")
        latest = {row["run_id"]: row["latest_value"] for row in s.summaries(metric="loss")}
        times.append(time.perf_counter() - t0)
        s.close()
    assert len(latest) == LATEST_RUNS
    tau_s = statistics.median(times)
    report("tau-latest-loss", tau_s * 1000, f"ms for {LATEST_RUNS:,} runs (open store + summary query)")
    ml = run_mlflow({"mode": "latest", "db": str(work / "mlflow-latest.db"), "runs": LATEST_RUNS, "steps": steps})
    if "error" in ml:
        report("mlflow-latest-loss", f"unavailable ({ml['error']})")
        report("tau-vs-mlflow-latest-speedup", "n/a (mlflow unavailable)", "", ">= 10x")
        return
    report("mlflow-latest-loss", ml["seconds"] * 1000, f"ms for {ml['runs']:,} runs (search_runs)")
    report("tau-vs-mlflow-latest-speedup", ml["seconds"] / tau_s, "x", ">= 10x")


def bench_search(work: Path) -> None:
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.search import search_runs
    from taugrid_portal.store.writes import write_records

    store, _ = ExperimentStore.init(work / "store-search", project="bench")
    steps = 20
    for start in range(0, SEARCH_RUNS, 500):
        recs = [{"run_id": f"run-{r:05d}", "run_group_id": f"arm-{r % 8}", "metric_name": name, "step": s,
                 "value": (1.0 / (s + 1) + (r % 100) / 100.0) if name == "loss" else s / steps,
                 "tags": {"seed": str(r % 5)}}
                for r in range(start, min(SEARCH_RUNS, start + 500)) for name in ("loss", "accuracy")
                for s in range(steps)]
        write_records(store, recs)
    store.close()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        s = ExperimentStore.open(work / "store-search")
        doc = search_runs(s, metric_filters=["loss@min<0.5"], limit=200)
        times.append(time.perf_counter() - t0)
        s.close()
    report("search-metric-filter", statistics.median(times) * 1000,
           f"ms over {SEARCH_RUNS:,} runs ({doc['total']:,} matches, first 200 returned)", "<= 300 ms")
    exe = shutil.which("taugrid-portal") or str(Path(sys.executable).with_name("taugrid-portal"))
    if Path(exe).exists():
        t0 = time.perf_counter()
        subprocess.run([exe, "experiment", "search", "--metric-filter", "loss@min<0.5", "--store",
                        str(work / "store-search"), "-o", "json"], capture_output=True, check=True)
        report("search-metric-filter-cli", (time.perf_counter() - t0) * 1000,
               "ms end to end (process start, imports, search, JSON output)")


def main() -> None:
    keep = os.environ.get("TAU_BENCH_DIR")
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="tau-bench-store-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        load = os.getloadavg()
        report("machine", f"{os.cpu_count()} cpus, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
               f"scale {SCALE:g}")
        bench_import(work)
        bench_vs_mlflow(work)
        bench_latest(work)
        bench_search(work)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
