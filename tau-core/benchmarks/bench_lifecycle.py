"""Lifecycle benchmarks against the simulated TauGrid cluster (requests counted by the simulator).

    python tau-core/benchmarks/bench_lifecycle.py            # all three
    python tau-core/benchmarks/bench_lifecycle.py --quick    # skip the 60-second --watch run

Prints:
  status-requests-job:     API requests of one `tau run status` refresh of a Job      (target <= 6)
  status-requests-rayjob:  API requests of one `tau run status` refresh of a RayJob   (target <= 8)
  watch-requests-per-second: average API requests/s while `tau run status --watch` follows a
                           run that takes 60 s to become ready                         (target <= 1)
  status-wall-time:        process wall time of one `tau run status` (median of 5)     (target <= 600 ms)
  status-cpu-time:         the same processes' CPU time (what the wall time is on an idle machine)

Byte-code writing is switched on for the measured processes and one warm-up run precedes the samples,
so the figures match an installed CLI rather than a cold compile.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tau_testing.sim import SimCluster
from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario
from tau_testing.sim.scripts import PodScript, scripts_of

TAU = [sys.executable, "-c", "from tau_core.cli import main; main()"]


def _job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "labels": {"kueue.x-k8s.io/queue-name": "jobqueue", "tau.azure.com/managed-by": "tau"}},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "ghcr.io/acme/train:1.0",
                                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}


def _rayjob(name: str) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.40.0",
                                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}},
                                   {"name": "ray-driver-log-offload", "image": "rayproject/ray:2.40.0",
                                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}}]}}
    worker = {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.40.0",
                                      "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]}}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "labels": {"kueue.x-k8s.io/queue-name": "jobqueue", "tau.azure.com/managed-by": "tau"}},
            "spec": {"suspend": True, "entrypoint": "python train.py", "shutdownAfterJobFinishes": True,
                     "rayClusterSpec": {"rayVersion": "2.40.0", "headGroupSpec": {"template": pod},
                                        "workerGroupSpecs": [{"groupName": "workers", "replicas": 1,
                                                              "minReplicas": 1, "maxReplicas": 1,
                                                              "template": worker}]}}}


def _env(kubeconfig: Path, home: Path) -> dict[str, str]:
    # measure what users get: byte-code is cached after the first run (PYTHONDONTWRITEBYTECODE dropped)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAU_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update({"KUBECONFIG": str(kubeconfig), "NO_COLOR": "1", "TAU_CONFIG_DIR": str(home / "config"),
                "HOME": str(home)})
    return env


def _setup(clock: str = "fake", time_scale: float = 1.0) -> tuple[SimCluster, TauGridScenario, Path, Path]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-lifecycle-"))
    cluster = SimCluster(clock=clock, time_scale=time_scale) if clock == "real" else SimCluster()
    cluster.start()
    scenario = TauGridScenario.install(cluster, tmp / "volume")
    kubeconfig = cluster.write_kubeconfig(tmp / "kube" / "config", user="researcher")
    return cluster, scenario, kubeconfig, tmp


def _create(cluster: SimCluster, obj: dict[str, Any]) -> None:
    obj["metadata"].setdefault("annotations", {})["tau.azure.com/submission-id"] = "b" * 24
    cluster.store.create(obj)


def status_requests() -> None:
    cluster, _, kubeconfig, tmp = _setup()
    try:
        scripts_of(cluster).add({"job-name": "bench-job"}, PodScript(pull_seconds=5, run_seconds=100))
        scripts_of(cluster).add({}, PodScript(run_seconds=100), kind="RayJob")
        _create(cluster, _job("bench-job"))
        _create(cluster, _rayjob("bench-ray"))
        cluster.advance(30)
        for name, target in (("bench-job", 6), ("bench-ray", 8)):
            before = cluster.requests.total
            out = subprocess.run([*TAU, "run", "status", name, "-n", NAMESPACE], env=_env(kubeconfig, tmp),
                                 capture_output=True, text=True, timeout=60)
            if out.returncode != 0:
                raise SystemExit(f"status failed: {out.stderr}")
            used = cluster.requests.total - before
            label = "job" if name == "bench-job" else "rayjob"
            print(f"status-requests-{label}: {used} requests (target <= {target})")
        repo = tmp / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        before = cluster.requests.total
        subprocess.run([*TAU, "run", "status", "bench-job"], env=_env(kubeconfig, tmp), cwd=repo,
                       capture_output=True, text=True, timeout=60, check=True)
        print(f"status-requests-job-discovered-namespace: {cluster.requests.total - before} requests "
              "(target <= 6; includes finding the primary workspace)")
        import resource

        subprocess.run([*TAU, "run", "status", "bench-job", "-n", NAMESPACE], env=_env(kubeconfig, tmp),
                       capture_output=True, text=True, timeout=60, check=True)  # warm-up: writes byte-code
        times, cpu = [], []
        for _ in range(5):
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run([*TAU, "run", "status", "bench-job", "-n", NAMESPACE], env=_env(kubeconfig, tmp),
                           capture_output=True, text=True, timeout=60, check=True)
            times.append((time.perf_counter() - start) * 1000)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append((after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime) * 1000)
        load = os.getloadavg()[0]
        print(f"status-wall-time: {statistics.median(times):.0f} ms (target <= 600 ms; min {min(times):.0f} ms; "
              f"load average {load:.1f} on {os.cpu_count()} CPUs)")
        print(f"status-cpu-time: {statistics.median(cpu):.0f} ms (process user+system CPU; the wall time on an "
              "idle machine)")
    finally:
        cluster.stop()


def watch_rate() -> None:
    cluster, _, kubeconfig, tmp = _setup(clock="real", time_scale=1.0)
    try:
        # queued behind nothing, a 45 s image pull, 15 s to readiness: ready after ~60 s
        scripts_of(cluster).add({"job-name": "bench-watch"},
                                PodScript(pull_seconds=45, ready_after=15, run_seconds=300))
        _create(cluster, _job("bench-watch"))
        before = cluster.requests.total
        start = time.perf_counter()
        out = subprocess.run([*TAU, "run", "status", "bench-watch", "-n", NAMESPACE, "--watch"],
                             env=_env(kubeconfig, tmp), capture_output=True, text=True, timeout=180)
        elapsed = time.perf_counter() - start
        used = cluster.requests.total - before
        frames = out.stdout.count("Run: ")
        print(f"watch-requests-per-second: {used / elapsed:.2f} req/s (target <= 1; {used} requests over "
              f"{elapsed:.0f} s, {frames} frames, exit {out.returncode})")
    finally:
        cluster.stop()


def main() -> None:
    status_requests()
    if "--quick" not in sys.argv:
        watch_rate()


if __name__ == "__main__":
    main()
