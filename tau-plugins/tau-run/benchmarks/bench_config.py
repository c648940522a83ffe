"""Run-config benchmarks: process wall time of `tau run validate` and of an offline client dry-run,
and in-process parse+validate+render throughput.

Run standalone: python tau-plugins/tau-run/benchmarks/bench_config.py
Processes run with bytecode caching enabled (as in a normal installation) after one warm-up run.
On a shared machine wall time follows the load; the CPU figures (and their excess over
`tau --help`, the host's own start-up) are the steadier comparison.
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

KIND = ("name: kind-smoke\nengine: job\nentrypoint: train.sh\nimage: bash:5.2\ncompute:\n  gpus: 0\n"
        "  cpu_request: 100m\n  memory_request: 64Mi\npolicy:\n  namespace: ray\n  queue: kind-cpu\n"
        "  lane: training\nexperiment:\n  project: kind-smoke\n  name: job\n")
RUNS = 11


def _tau() -> list[str]:
    exe = shutil.which("tau", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "tau_core.cli"]


def _project() -> Path:
    root = Path(tempfile.mkdtemp(prefix="tau-bench-"))
    (root / ".git").mkdir()
    (root / "tau").mkdir()
    (root / "tau" / "train.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "tau" / "smoke.yaml").write_text(KIND)
    return root


def median_wall(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(median wall ms, median CPU ms of the child) over RUNS runs after a warm-up."""
    import resource

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=True)  # warm-up (bytecode caches)
    walls, cpus = [], []
    for _ in range(RUNS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000


def throughput(root: Path, seconds: float = 2.0) -> tuple[tuple[float, float], tuple[float, float]]:
    """((wall, cpu) rate of validate+render from a parsed document, same for parse+validate+render).

    Parsing goes through ``parse_yaml`` (the fast path for plain YAML; positions are parsed only
    when a problem has to be reported)."""
    os.chdir(root)
    from tau_core.config.loader import parse_yaml
    from tau_core.config.resolve import RunOptions, resolve_offline
    from tau_core.config.validate import validate_document
    from tau_core.rendering import render

    resolution = resolve_offline(RunOptions(target="smoke", cwd=root, env={}))
    base_request = resolution.request
    text = (root / "tau" / "smoke.yaml").read_text()
    doc = parse_yaml(text, "tau/smoke.yaml")
    base_dir = root / "tau"
    render(base_request)  # loads the renderer plugin once

    def once(parse: bool) -> None:
        d = parse_yaml(text, "tau/smoke.yaml") if parse else doc
        v = validate_document(d, base_dir=base_dir)
        req = base_request
        req.config = v.normalized
        req.config_hash = v.config_hash
        render(req)

    rates = []
    for parse in (False, True):
        count, start, cpu = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - start < seconds:
            once(parse)
            count += 1
        rates.append((count / (time.perf_counter() - start), count / max(time.process_time() - cpu, 1e-9)))
    return rates[0], rates[1]


def main() -> None:
    root = _project()
    try:
        tau = _tau()
        baseline_ms = median_wall([*tau, "--help"], root)
        validate_ms = median_wall([*tau, "run", "validate", "-c", "tau/smoke.yaml"], root)
        dry_ms = median_wall([*tau, "run", "smoke", "--dry-run=client"], root)
        rate, rate_parse = throughput(root)
    finally:
        os.chdir("/")
        shutil.rmtree(root, ignore_errors=True)
    print(f"load-average-1m: {os.getloadavg()[0]:.2f} (wall figures inflate when the machine is busy)")
    print(f"tau-help-wall-median: {baseline_ms[0]:.1f} ms, cpu {baseline_ms[1]:.1f} ms (baseline: host start-up)")
    print(f"run-validate-wall-median: {validate_ms[0]:.1f} ms (target <= 250 ms)")
    print(f"run-validate-cpu-median: {validate_ms[1]:.1f} ms (informational)")
    print(f"run-validate-cpu-over-help: {validate_ms[1] - baseline_ms[1]:.1f} ms (informational)")
    print(f"run-dry-run-client-wall-median: {dry_ms[0]:.1f} ms (target <= 350 ms)")
    print(f"run-dry-run-client-cpu-median: {dry_ms[1]:.1f} ms (informational)")
    print(f"run-dry-run-client-cpu-over-help: {dry_ms[1] - baseline_ms[1]:.1f} ms (informational)")
    print(f"parse-validate-render-throughput: {rate_parse[0]:.0f} configs/s (target >= 1000 configs/s)")
    print(f"parse-validate-render-throughput-cpu: {rate_parse[1]:.0f} configs/cpu-s (informational)")
    print(f"validate-render-throughput: {rate[0]:.0f} configs/s (informational; from a parsed document)")
    print(f"validate-render-throughput-cpu: {rate[1]:.0f} configs/cpu-s (informational)")


if __name__ == "__main__":
    main()
