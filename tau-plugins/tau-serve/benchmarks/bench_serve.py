"""Serving benchmarks.

1. Process wall (and child CPU) time of an offline ``tau serve deploy --dry-run=client`` with a workload-profile
   snapshot, next to ``tau run --dry-run=client`` of a small job config measured in the same run (the baseline).
2. API requests per ``tau serve status`` refresh against the simulated TauGrid cluster, counted from the
   simulator's request log (target: at most 4), for a ready and a not-yet-ready service.

Run standalone: python tau-plugins/tau-serve/benchmarks/bench_serve.py
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
from typing import Any

import yaml

IMAGE = "registry.example.com/serve/llm@sha256:" + "a" * 64
RUN_CONFIG = ("name: smoke\nengine: job\nentrypoint: train.sh\nimage: bash:5.2\ncompute:\n  gpus: 0\n"
              "  cpu_request: 100m\n  memory_request: 64Mi\npolicy:\n  namespace: ray\n  queue: kind-cpu\n"
              "  lane: training\nexperiment:\n  project: smoke\n  name: job\n")
RUNS = 9
TARGET_REQUESTS = 4


def _tau() -> list[str]:
    exe = shutil.which("tau", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "tau_core.cli"]


def _workdir() -> Path:
    from tau_core.config.profiles import profile_set_hash
    from tau_testing.sim.scenarios.taugrid import objects

    root = Path(tempfile.mkdtemp(prefix="tau-serve-bench-"))
    (root / ".git").mkdir()
    (root / "tau").mkdir()
    (root / "tau" / "train.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "tau" / "smoke.yaml").write_text(RUN_CONFIG)
    cluster = next(o for o in objects() if o["kind"] == "TauCluster")
    profiles = cluster["status"]["workloadProfiles"]["profiles"]
    (root / "profiles.yaml").write_text(yaml.safe_dump({
        "apiVersion": "tau.azure.com/v1alpha1", "kind": "TauWorkloadProfileSnapshot", "tauClusterGeneration": 1,
        "profileSetHash": profile_set_hash(profiles), "profiles": profiles}))
    return root


def median_wall(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(median wall ms, median child CPU ms) over RUNS runs after a warm-up."""
    import resource

    subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=True)
    walls, cpus = [], []
    for _ in range(RUNS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000


def dry_run_walls() -> None:
    root = _workdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "TAU_CONTEXT")}
    env["KUBECONFIG"] = str(root / "no-kubeconfig")
    tau = _tau()
    serve = [*tau, "serve", "deploy", "llm", "--profile", "cpu-small", "--image", IMAGE, "-n", "aurora",
             "--checkpoint", "llm/step-100", "--dry-run=client", "--workload-profile-snapshot",
             str(root / "profiles.yaml")]
    rows = [("tau --help (host start-up)", [*tau, "--help"]),
            ("tau run smoke --dry-run=client (baseline)", [*tau, "run", "smoke", "--dry-run=client"]),
            ("tau serve deploy --dry-run=client (snapshot)", serve)]
    print(f"process wall/CPU, median of {RUNS} runs after a warm-up")
    for label, argv in rows:
        wall, cpu = median_wall(argv, root, env)
        print(f"  {label:<48} wall {wall:7.1f} ms   cpu {cpu:7.1f} ms")
    shutil.rmtree(root, ignore_errors=True)


def requests_per_refresh() -> None:
    from tau_testing.runner import TauCli
    from tau_testing.sim import SimCluster
    from tau_testing.sim.scenarios.taugrid import RESEARCHER, TauGridScenario

    tmp = Path(tempfile.mkdtemp(prefix="tau-serve-bench-"))
    cluster = SimCluster(clock="fake").start()
    try:
        TauGridScenario.install(cluster, tmp / "volume")
        kubeconfig = cluster.write_kubeconfig(tmp / "kube" / "config", user=RESEARCHER)
        env: dict[str, str | None] = {"KUBECONFIG": str(kubeconfig), "HOME": str(tmp), "TAU_CONTEXT": None,
                                      "TAU_CONFIG_DIR": str(tmp / "config"), "NO_COLOR": "1"}
        cli = TauCli(env=env)
        kuberay = [c for c in cluster.controllers.values() if type(c).__name__ == "KubeRayController"]
        for controller in kuberay:
            controller.enabled = False  # the service stays pending: the refresh also lists pods for hints
        deploy = cli("serve", "deploy", "llm", "--profile", "cpu-small", "--image", IMAGE, "-n", "aurora")
        assert deploy.exit_code == 0, deploy
        print(f"API requests per `tau serve status` refresh (target <= {TARGET_REQUESTS})")
        _count(cli, cluster, "not ready (pods listed for hints)")
        for controller in kuberay:
            controller.enabled = True
        cluster.advance(60)
        _count(cli, cluster, "ready")
    finally:
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _count(cli: Any, cluster: Any, label: str) -> None:
    counts = []
    for _ in range(5):
        cluster.requests.clear()
        result = cli("serve", "status", "llm", "-n", "aurora", "-o", "json")
        assert result.exit_code == 0, result
        counts.append(cluster.requests.total)
    worst = max(counts)
    verdict = "ok" if worst <= TARGET_REQUESTS else "OVER TARGET"
    print(f"  {label:<48} {worst} request(s) per refresh  [{verdict}]")


if __name__ == "__main__":
    dry_run_walls()
    requests_per_refresh()
