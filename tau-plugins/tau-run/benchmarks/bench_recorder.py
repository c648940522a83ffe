"""Lifecycle recorder: Kubernetes API requests per minute while 100 runs go from submitted to succeeded.

Run standalone: python tau-plugins/tau-run/benchmarks/bench_recorder.py

The recorder (tau_run.recorder, watch mode, its default 5 m watch renewal) watches a simulated TauGrid
cluster while 100 Jobs are admitted, run and finish (a fake clock advanced from this thread); rows go to an
in-memory writer, so only the API side is measured.  The baseline, measured in the same run against the same
cluster, is the reference recorder's loop: one list of each of the four kinds every 30 s.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

RUNS = 100
WINDOW = 30.0  # wall seconds the recorder watches while the runs progress
POLL_INTERVAL = 30.0


def _job(i: int, namespace: str) -> dict[str, Any]:
    from tau_core import keys

    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"bench-{i:03d}", "namespace": namespace,
                         "labels": {keys.KUEUE_QUEUE_NAME: "jobqueue", keys.MANAGED_BY: keys.MANAGED_BY_VALUE}},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "main", "image": "ghcr.io/acme/t:1",
                                                          "resources": {"requests": {"cpu": "10m"}}}]}}}}


async def _watching(kubeconfig: Path, namespace: str, sim: Any) -> tuple[int, int, int, int]:
    """(requests to start: lists + watches, requests during the window, rows, runs with a terminal row)."""
    from tau_core.kube import KubeSession
    from tau_run.recorder.derive import Scope
    from tau_run.recorder.loop import Recorder

    rows: list[Any] = []

    def write(batch: Any) -> dict[str, Any]:
        rows.extend(batch)
        return {"tag": "bench", "pending": 0, "error": ""}

    session = await KubeSession.connect(kubeconfig=str(kubeconfig))
    recorder = Recorder(session, Scope("bench", namespace), write, watch_timeout=300)
    task = asyncio.create_task(recorder.run())
    while not recorder.health.ready:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # the four watches are open
    started = session.requests
    stop = threading.Event()

    def drive() -> None:  # the runs progress: admitted, running, finished
        while not stop.is_set():
            sim.advance(2)
            time.sleep(0.5)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    await asyncio.sleep(WINDOW)
    stop.set()
    driver.join()
    during = session.requests - started
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await session.close()
    terminal = {r.durable_id for r in rows if r.state in ("succeeded", "failed")}
    return started, during, len(rows), len(terminal)


async def _polling_pass(kubeconfig: Path, namespace: str) -> int:
    """Requests of one pass of the reference's loop (list Jobs, RayJobs, Workloads, Pods)."""
    from tau_core.kube import KubeSession, api_path
    from tau_run.recorder.loop import KINDS

    session = await KubeSession.connect(kubeconfig=str(kubeconfig))
    for api, plural in KINDS.values():
        await session.list(api_path(api, plural, namespace=namespace))
    count = session.requests
    await session.close()
    return count


def main() -> None:
    from tau_testing.sim import SimCluster
    from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario

    with tempfile.TemporaryDirectory() as tmp:
        sim = SimCluster(clock="fake").start()
        try:
            TauGridScenario.install(sim, Path(tmp) / "volume", cpu_nodes=4)
            kubeconfig = sim.write_kubeconfig(Path(tmp) / "kubeconfig", user="admin")
            for i in range(RUNS):
                sim.store.create(_job(i, NAMESPACE))
            started, during, rows, finished = asyncio.run(_watching(kubeconfig, NAMESPACE, sim))
            per_pass = asyncio.run(_polling_pass(kubeconfig, NAMESPACE))
        finally:
            sim.stop()
    watch_per_min = during * 60.0 / WINDOW
    poll_per_min = per_pass * 60.0 / POLL_INTERVAL
    print(f"recorder, {RUNS} runs ({finished} finished in the window, {rows} rows recorded):")
    print(f"  watches : {started} requests to start (4 lists + 4 watches), then {watch_per_min:.1f} requests/min "
          f"over {WINDOW:.0f} s (watches renewed every 5 min: 0.8/min in steady state)")
    print(f"  baseline: polling every {POLL_INTERVAL:.0f} s = {per_pass} requests/pass = {poll_per_min:.1f} "
          "requests/min, whatever happens")


if __name__ == "__main__":
    main()
