"""Controller figures against the simulator (run by ``nox -s bench``; targets from issue 11).

* time from creating a TauWorkspace (its ClusterQueue exists) to ``Ready`` — target <= 2 s; baseline: one
  create + read round trip through the same simulator;
* API requests per steady-state resync of one Ready workspace — target <= 10; with 50 workspaces (1 primary,
  49 blocked by the single-active rule), requests per minute in steady state (measured over one real minute,
  next to the figure computed from the per-resync counts);
* controller RSS with 50 workspaces and 200 nodes — target <= 150 MB; baseline: a Python process that only
  imports kopf and the controller.
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

REPO = Path(os.environ.get("TAU_REPO") or Path(__file__).resolve().parents[2])
sys.path.insert(0, str(REPO / "tau-controller" / "tests"))

from ctrl_platform import install_platform, workspace  # noqa: E402

from tau_controller.runtime import Controller, Options  # noqa: E402
from tau_core import keys  # noqa: E402
from tau_core.kube import KubeSession, run  # noqa: E402
from tau_testing.sim import SimCluster  # noqa: E402
from tau_testing.sim.controllers import install_default_controllers  # noqa: E402

TAU = keys.API_VERSION
USER = "tau-core-controller"


def _cluster(nodes: int = 1) -> SimCluster:
    cluster = SimCluster(clock="fake", auto_settle=True)
    install_default_controllers(cluster)
    cluster.start()
    install_platform(cluster, gpu_nodes=nodes, cpu_nodes=1)
    cluster.add_user(USER, ["system:masters"])
    return cluster


def _phase(cluster: SimCluster, name: str) -> str | None:
    return ((cluster.store.get(TAU, "TauWorkspace", "tau-system", name) or {}).get("status") or {}).get("phase")


def _controller(cluster: SimCluster, tmp: Path) -> Controller:
    path = cluster.write_kubeconfig(tmp / "kubeconfig", user=USER)
    return Controller(Options(kubeconfig=str(path), health_address="0", metrics_address="0")).start_thread()


def _wait(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark condition not met")
        time.sleep(0.005)


async def _roundtrip(path: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe", "namespace": "tau-system"}}
    async with await KubeSession.connect(kubeconfig=path) as s:
        await s.create("/api/v1/namespaces/tau-system/configmaps", body)
        await s.get("/api/v1/namespaces/tau-system/configmaps/probe")


def time_to_ready(tmp: Path, runs: int = 3) -> tuple[list[float], list[float]]:
    ready, baseline = [], []
    for i in range(runs):
        cluster = _cluster()
        controller = _controller(cluster, tmp / f"r{i}")
        try:
            started = time.monotonic()
            cluster.store.create(workspace())
            _wait(lambda c=cluster: _phase(c, "aurora") == "Ready")
            ready.append(time.monotonic() - started)
            started = time.monotonic()
            run(_roundtrip, str(tmp / f"r{i}" / "kubeconfig"))  # the same HTTP stack the controller uses
            baseline.append(time.monotonic() - started)
        finally:
            controller.stop()
            cluster.stop()
    return ready, baseline


def _quiesce(cluster: SimCluster, quiet: float = 1.0, timeout: float = 60.0) -> None:
    """Wait until the controller has sent nothing for ``quiet`` seconds (the reconciles of setup are done)."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        count = sum(1 for r in cluster.requests.entries if r.user == USER)
        if count != last:
            last, since = count, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.05)


def _resync(cluster: SimCluster, controller: Controller, name: str) -> int:
    _quiesce(cluster)
    counter = controller.metrics.reconciles.labels("workspace", "success")
    before_count, before = counter._value.get(), len([r for r in cluster.requests.entries if r.user == USER])
    controller._loop.call_soon_threadsafe(controller.enqueue, "workspace", name)
    _wait(lambda: counter._value.get() > before_count)
    time.sleep(0.2)
    return len([r for r in cluster.requests.entries if r.user == USER]) - before


def steady_state(tmp: Path, workspaces: int = 50, nodes: int = 200) -> dict[str, float]:
    cluster = _cluster(nodes)
    controller = _controller(cluster, tmp / "steady")
    try:
        cluster.store.create(workspace())
        _wait(lambda: _phase(cluster, "aurora") == "Ready")
        ready_resync = _resync(cluster, controller, "aurora")
        for i in range(1, workspaces):
            cluster.store.create(workspace(f"ws-{i:02d}"))
        _wait(lambda: all(_phase(cluster, f"ws-{i:02d}") == "Degraded" for i in range(1, workspaces)), 120)
        time.sleep(0.5)
        blocked_resync = _resync(cluster, controller, "ws-01")
        watches = sum(1 for r in cluster.requests.entries if r.user == USER and r.verb == "watch")
        # + the retry sweep: one cluster-wide LIST of retry Events every 5 minutes
        per_minute = ready_resync / 5 + blocked_resync * 2 * (workspaces - 1) + watches / 5 + 1 / 5
        # and measured: every request the controller sends during one real minute of steady state
        start = sum(1 for r in cluster.requests.entries if r.user == USER)
        time.sleep(60)
        measured = sum(1 for r in cluster.requests.entries if r.user == USER) - start
        rss = _rss(cluster, tmp)
    finally:
        controller.stop()
        cluster.stop()
    return {"ready_resync": ready_resync, "blocked_resync": blocked_resync, "per_minute": per_minute,
            "measured_minute": measured, "watches": watches, **rss}


def _rss_of(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _rss(cluster: SimCluster, tmp: Path) -> dict[str, float]:
    """RSS of a real ``tau-controller run`` process once it has reconciled every workspace, and a baseline."""
    path = cluster.write_kubeconfig(tmp / "rss-kubeconfig", user=USER)
    proc = subprocess.Popen([sys.executable, "-m", "tau_controller", "run", "--kubeconfig", str(path),
                             "--health-probe-bind-address", "0", "--metrics-bind-address", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = subprocess.Popen([sys.executable, "-c", "import kopf, tau_controller.runtime, time; time.sleep(60)"])
    try:
        before = len(cluster.requests.entries)
        _wait(lambda: sum(1 for r in cluster.requests.entries[before:] if r.verb == "watch") >= 10, 60)
        time.sleep(5)  # initial listing of 200 nodes and 50 workspaces, and their reconciles
        return {"rss_mb": _rss_of(proc.pid), "baseline_rss_mb": _rss_of(base.pid)}
    finally:
        for p in (proc, base):
            p.terminate()
            p.wait(30)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ready, baseline = time_to_ready(Path(tmp))
        runs = ", ".join(f"{r:.3f}" for r in ready)
        print(f"time to Ready:           median {statistics.median(ready):.3f} s (runs {runs}); "
              f"target <= 2 s; baseline create+get round trip {statistics.median(baseline) * 1000:.1f} ms")
        figures = steady_state(Path(tmp))
        print(f"requests per resync:     Ready workspace {figures['ready_resync']}, blocked workspace "
              f"{figures['blocked_resync']}; target <= 10")
        print(f"steady state, 50 ws:     {figures['measured_minute']} requests in one measured minute; computed "
              f"~{figures['per_minute']:.0f} requests/min (1 Ready every 5 min, 49 blocked every 30 s, "
              f"{figures['watches']} watch streams renewed every 5 min, 1 retry sweep every 5 min)")
        print(f"RSS, 50 ws + 200 nodes:  {figures['rss_mb']:.0f} MB; target <= 150 MB; baseline (imports only) "
              f"{figures['baseline_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
