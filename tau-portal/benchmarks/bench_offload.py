#!/usr/bin/env python
"""Metrics offload sidecar throughput, next to the one-shot JSONL import of the same data (same run).

Run standalone: ``python tau-portal/benchmarks/bench_offload.py``.

* ``TAU_BENCH_SCALE`` (default 1.0) scales the data (1.0: 40 chunks x 2,500 steps x 10 metrics = 1 M points).
* ``TAU_BENCH_KUSTO=0`` skips the Kusto leg (it starts Azurite and the loopback endpoint from tau_testing); the
  leg ships the first ``KUSTO_CHUNKS`` chunks only (its per-point cost is ~20x the store's: the whole set would
  make ``nox -s bench`` last many minutes).

Figures (``name: value unit``), each measured in this process on this machine:

* ``jsonl-import``: ``experiment import jsonl`` of every chunk in one call (the baseline);
* ``offload->store``: the sidecar's pass (strict online validation, a chunk copy, one idempotent import and a
  durable checkpoint per chunk) into a fresh store; target >= 200k points/s;
* ``offload->kusto``: the same pass shipping through the Kusto telemetry sink only (typed events +
  projection, spooled, queued to Azurite), then ``...+drain``: until the loopback endpoint has ingested it all;
* ``offload->adx-mon``: the same pass remote-writing only (Prometheus remote write, 5,000 series a request) to
  the loopback adx-mon receiver, which decodes every request and appends its rows before it answers
  (``TAU_BENCH_REMOTE_WRITE=0`` skips it); ``remote-write encode``: building and compressing the requests alone.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

SCALE = float(os.environ.get("TAU_BENCH_SCALE", "1") or 1)
CHUNKS, METRICS, KUSTO_CHUNKS = 40, 10, 8
STEPS = max(50, int(2_500 * SCALE))


def report(name: str, value: float | str, unit: str = "", target: str = "") -> None:
    text = f"{value:,.0f}" if isinstance(value, float) else str(value)
    print(f"{name}: {text}{' ' + unit if unit else ''}{f' (target {target})' if target else ''}", flush=True)


def generate(history: Path) -> int:
    history.mkdir(parents=True, exist_ok=True)
    for c in range(CHUNKS):
        lines = []
        for s in range(c * STEPS, (c + 1) * STEPS):
            row: dict[str, Any] = {"_step": s, "_timestamp": 1760000000.0 + s / 10}
            row.update({f"m{j}": (s * 31 + j) % 1000 / 7.0 for j in range(METRICS)})
            lines.append(json.dumps(row))
        (history / f"chunk-{c:04d}.jsonl").write_text("\n".join(lines) + "\n")
    return CHUNKS * STEPS * METRICS


def timed(fn: Any) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def offload_options(work: Path, name: str, history: Path, *, store: bool, kusto_url: str = "",
                    remote_write_url: str = "") -> Any:
    from taugrid_portal.offload import KustoTarget, OffloadOptions
    from taugrid_portal.remote_write import RemoteWriteOptions

    return OffloadOptions(out=work / name / "out", history=(str(history / "*.jsonl"),), run="bench", project="bench",
                          experiment="bench", store=work / name / "store" if store else None,
                          kusto=KustoTarget(kusto_url) if kusto_url else None,
                          remote_write=RemoteWriteOptions(remote_write_url) if remote_write_url else None)


def run_offload(opts: Any) -> Any:
    from taugrid_portal import offload

    targets = offload.open_targets(opts)
    try:
        offload.watch(opts, targets, lambda *a: None)
    finally:
        targets.close()
    return targets


def bench_store(work: Path, history: Path, points: int) -> None:
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.importer import import_jsonl

    store, _ = ExperimentStore.init(work / "baseline-store", project="bench")
    wall, cpu = timed(lambda: import_jsonl(store, run="bench", history=[str(history / "*.jsonl")], project="bench",
                                           experiment="bench", copy_history=False))
    store.close()
    report("jsonl-import (baseline, one call)", points / wall, "points/s")
    report("jsonl-import-cpu", points / cpu, "points/CPU-s")
    wall, cpu = timed(lambda: run_offload(offload_options(work, "store", history, store=True)))
    report(f"offload->store ({CHUNKS} chunks, checkpoint per chunk)", points / wall, "points/s", ">= 200,000")
    report("offload->store-cpu", points / cpu, "points/CPU-s")


def bench_kusto(work: Path, full: Path, chunk_points: int) -> None:
    from tau_core.hookspecs import Register, hookimpl
    from tau_core.kql import schema_commands
    from tau_core.plugins import Host, set_host
    from tau_testing.kusto import StaticToken, start_kusto

    registered = Host.create().registry("telemetry_sinks")["kusto"].load()

    class LoopbackToken:  # the loopback endpoint's token; a cluster uses workload identity
        @hookimpl
        def tau_register_telemetry_sinks(self, register: Register) -> None:
            register("kusto", lambda *a, **o: registered(*a, credential=StaticToken(), **o), priority=10)

    history = work / "kusto-history"
    history.mkdir()
    for path in sorted(full.glob("*.jsonl"))[:KUSTO_CHUNKS]:
        os.link(path, history / path.name)
    points = chunk_points * KUSTO_CHUNKS
    previous = set_host(Host.create(extra_plugins=[("bench-token", LoopbackToken())]))
    kusto = start_kusto(work / "azurite")
    try:
        for command in schema_commands("all"):
            kusto.client().execute_mgmt("Metrics", command)
        wall, cpu = timed(lambda: run_offload(offload_options(work, "kusto", history, store=False,
                                                              kusto_url=kusto.query_url)))
        report(f"offload->kusto (queued to Azurite, {KUSTO_CHUNKS} batches)", points / wall, "points/s")
        report("offload->kusto-cpu", points / cpu, "points/CPU-s")
        drain_wall, _ = timed(kusto.drain)
        rows = len(kusto.store.rows("TauExpMetricEventsV1"))
        report("offload->kusto+drain (until ingested)", points / (wall + drain_wall), "points/s")
        report("kusto rows ingested", f"{rows:,} of {points:,}")
    finally:
        kusto.stop()
        set_host(previous)


def _subset(full: Path, target: Path) -> Path:
    target.mkdir()
    for path in sorted(full.glob("*.jsonl"))[:KUSTO_CHUNKS]:
        os.link(path, target / path.name)
    return target


def bench_remote_write(work: Path, full: Path, chunk_points: int) -> None:
    from tau_core.promwrite import encode
    from tau_testing.kusto import start_kusto
    from taugrid_portal.remote_write import SeriesLabels

    history = _subset(full, work / "rw-history")
    points = chunk_points * KUSTO_CHUNKS
    labels = SeriesLabels(project="bench", experiment_id="bench", run_group_id="default", run_id="bench",
                          source="stellar-online", metric_file_id="0" * 24, metric_file_path=str(history))
    items = [labels.point(f"m{i % METRICS}", i, i / 7, 1760000000000 + i) for i in range(chunk_points)]
    wall, _ = timed(lambda: [encode(items[i:i + 5000]) for i in range(0, len(items), 5000)])
    report("remote-write encode (series -> snappy protobuf)", chunk_points / wall, "series/s")
    adxmon = start_kusto(work / "adxmon", queued=False)
    try:
        wall, cpu = timed(lambda: run_offload(offload_options(work, "rw", history, store=False,
                                                              remote_write_url=adxmon.remote_write_url)))
        report(f"offload->adx-mon (remote write, {KUSTO_CHUNKS} chunks)", points / wall, "points/s")
        report("offload->adx-mon-cpu (sidecar and receiver share this process)", points / cpu, "points/CPU-s")
        report("adx-mon rows appended", f"{len(adxmon.store.rows('ExperimentMetrics')):,} of {points:,} "
                                        f"in {adxmon.endpoint.adxmon.requests} requests")
    finally:
        adxmon.stop()


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="tau-bench-offload-"))
    try:
        points = generate(work / "history")
        report("points", f"{points:,} ({CHUNKS} chunks x {STEPS} steps x {METRICS} metrics)")
        report("load average", f"{os.getloadavg()[0]:.1f}")
        bench_store(work, work / "history", points)
        if os.environ.get("TAU_BENCH_KUSTO", "1") != "0":
            bench_kusto(work, work / "history", points // CHUNKS)
        if os.environ.get("TAU_BENCH_REMOTE_WRITE", "1") != "0":
            bench_remote_write(work, work / "history", points // CHUNKS)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
