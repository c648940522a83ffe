"""The connected commands against kubectl on the same simulated objects, as whole processes.

    python tau-core/benchmarks/bench_connected.py            # 9 rounds per pair
    TAU_BENCH_RUNS=15 python tau-core/benchmarks/bench_connected.py

Each pair runs interleaved (tau, kubectl, tau, kubectl, ...) against one TLS simulator whose
kubeconfig brings its own CA, so both sides see the same load.  Per pair it prints the medians of
process CPU (user+system) and wall time, and the CPU ratio:

  status:  `tau run status NAME -n NS`  vs `kubectl get job NAME -n NS`      (target CPU <= 6x)
  list:    `tau run list -n NS`         vs `kubectl get jobs,rayjobs -n NS`
  logs:    `tau logs NAME -n NS`        vs `kubectl logs job/NAME -n NS`
  help:    `tau --help`                 vs `python -c "import click"`       (target wall <= 2x)

and the floor under the connected commands: the CPU of `python -c pass`, of importing click, and of
importing aiohttp (with and without its default SSL contexts' CA loading), next to `tau run status`.
Targets: status CPU ratio <= 6x and wall <= 600 ms on an idle 2-core machine (the load average is
printed: on a loaded machine both sides slow down, the ratio less than the wall time).
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tau_testing.paths import tools_dir
from tau_testing.sim import SimCluster
from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario
from tau_testing.sim.scripts import PodScript, scripts_of

RUNS = int(os.environ.get("TAU_BENCH_RUNS", "9"))
PY = sys.executable
TAU = [PY, "-c", "from tau_core.cli import main; main()"]
JOB = "bench-job"
LABELS = {"kueue.x-k8s.io/queue-name": "jobqueue", "tau.azure.com/managed-by": "tau"}


def _job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(LABELS),
                         "annotations": {"tau.azure.com/submission-id": "b" * 24}},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "ghcr.io/acme/train:1.0",
                                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}


def _kubectl() -> str:
    found = tools_dir() / "kubectl"
    if found.is_file():
        return str(found)
    path = shutil.which("kubectl")
    if path is None:
        raise SystemExit("kubectl not found: run `python -m tau_testing.binaries` first")
    return path


def _measure(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(CPU ms, wall ms, stdout) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[-6:])} failed ({out.returncode}): {out.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return cpu, wall, out.stdout


def compare(label: str, ours: list[str], theirs: list[str], env: dict[str, str], their_name: str,
            target: str = "") -> float:
    """Interleaved medians of ``ours`` and ``theirs``; prints one line and returns our median CPU."""
    _measure(ours, env)  # warm-up: byte-code and page cache
    _measure(theirs, env)
    samples: dict[str, list[tuple[float, float]]] = {"ours": [], "theirs": []}
    for _ in range(RUNS):
        samples["ours"].append(_measure(ours, env)[:2])
        samples["theirs"].append(_measure(theirs, env)[:2])
    cpu = {k: statistics.median(c for c, _ in v) for k, v in samples.items()}
    wall = {k: statistics.median(w for _, w in v) for k, v in samples.items()}
    print(f"{label}: tau CPU {cpu['ours']:.0f} ms, wall {wall['ours']:.0f} ms | {their_name} CPU "
          f"{cpu['theirs']:.0f} ms, wall {wall['theirs']:.0f} ms | CPU ratio {cpu['ours'] / cpu['theirs']:.2f}x, "
          f"wall ratio {wall['ours'] / wall['theirs']:.2f}x{target}")
    return cpu["ours"]


def floor(env: dict[str, str]) -> None:
    """What the Python side cannot avoid: the interpreter, click, aiohttp."""
    probes = {
        "python -c pass": [PY, "-c", "pass"],
        "import click": [PY, "-c", "import click"],
        "import aiohttp (its CA loading deferred, as tau does)":
            [PY, "-c", "from tau_core.lazy_imports import import_aiohttp_connector; import_aiohttp_connector()"],
        "import aiohttp (as shipped: loads the system CA bundle twice)": [PY, "-c", "import aiohttp"],
        "kubernetes_asyncio's full package import (what tau avoids)": [PY, "-c", "import kubernetes_asyncio.client"],
    }
    for label, cmd in probes.items():
        _measure(cmd, env)
        cpu = statistics.median(_measure(cmd, env)[0] for _ in range(RUNS))
        print(f"  floor: {label}: CPU {cpu:.0f} ms")


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-connected-"))
    cluster = SimCluster(tls=True)  # kubectl sends bearer tokens over TLS only; the kubeconfig brings the CA
    cluster.start()
    try:
        TauGridScenario.install(cluster, tmp / "volume")
        kubeconfig = cluster.write_kubeconfig(tmp / "kube" / "config", user="researcher")
        scripts_of(cluster).add({"job-name": JOB}, PodScript(
            pull_seconds=5, run_seconds=100, logs=[f"step {i} loss {1 / (i + 1):.4f}" for i in range(200)]))
        cluster.store.create(_job(JOB))
        cluster.advance(30)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TAU_") and k != "PYTHONDONTWRITEBYTECODE"}
        env.update({"KUBECONFIG": str(kubeconfig), "NO_COLOR": "1", "HOME": str(tmp),
                    "TAU_CONFIG_DIR": str(tmp / "config")})
        kubectl = _kubectl()
        print(f"{RUNS} interleaved runs per pair; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        before = cluster.requests.total
        _measure([*TAU, "run", "status", JOB, "-n", NAMESPACE], env)
        print(f"status-requests-job: {cluster.requests.total - before} (one `tau run status` of a Job; was 4)")
        status = compare("status", [*TAU, "run", "status", JOB, "-n", NAMESPACE],
                         [kubectl, "get", "job", JOB, "-n", NAMESPACE], env, "kubectl get job",
                         " (target CPU <= 6x, wall <= 600 ms idle)")
        compare("list", [*TAU, "run", "list", "-n", NAMESPACE],
                [kubectl, "get", "jobs,rayjobs", "-n", NAMESPACE], env, "kubectl get jobs,rayjobs")
        compare("logs", [*TAU, "logs", JOB, "-n", NAMESPACE],
                [kubectl, "logs", f"job/{JOB}", "-n", NAMESPACE], env, "kubectl logs")
        compare("help", [*TAU, "--help"], [PY, "-c", "import click"], env, "import click",
                " (target wall <= 2x)")
        print(f"  `tau run status` CPU {status:.0f} ms, of which:")
        floor(env)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
