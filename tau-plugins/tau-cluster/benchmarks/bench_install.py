"""``tau cluster install`` figures, each next to a baseline measured in the same run.

    python tau-plugins/tau-cluster/benchmarks/bench_install.py

Prints:
  dry-run-wall:        `tau cluster install --dry-run` process wall time (median of 3), and the bare
                       `helm template --include-crds` of the same chart (the baseline: Helm's share)
  objects-per-kind:    what the dry run rendered
  install-to-ready:    `tau cluster install` (two Helm passes + readiness) against the simulated cluster,
                       next to one bare `helm upgrade --install --wait` of the same chart (target <= 30 s)

The umbrella uses local stand-ins for Kueue/KubeRay (tau_testing.charts), and the Tau controller is the
test stand-in that publishes a Ready TauCluster status (the real controller is a separate distribution).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tau_testing.binaries import ensure_binaries
from tau_testing.charts import DaemonSetStatus, TauClusterStandIn, build_test_umbrella, helm_env
from tau_testing.sim import SimCluster
from tau_testing.sim.controllers import install_default_controllers
from tau_testing.sim.controllers.scheduler import add_node

TAU = [sys.executable, "-c", "from tau_core.cli import main; main()"]


def timed(command: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{command[:4]} failed: {result.stderr[-1000:]}")
    return elapsed, result


def cluster() -> SimCluster:
    sim = SimCluster(clock="fake", auto_settle=True, tls=True)
    install_default_controllers(sim)
    sim.add_controller("daemonsets", DaemonSetStatus())
    sim.add_controller("tau-controller-stand-in", TauClusterStandIn())
    sim.start()
    add_node(sim, "node-1", cpu="16", memory="64Gi")
    return sim


def main() -> None:
    helm = ensure_binaries()["helm"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        chart = build_test_umbrella(work, helm)
        env = {**helm_env(work), "PATH": f"{helm.parent}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1"}
        bare = [timed([str(helm), "template", "taugrid", str(chart), "-n", "tau-system", "--include-crds"], env)[0]
                for _ in range(3)]
        runs = [timed([*TAU, "cluster", "install", "--dry-run", "--chart", str(chart), "-o", "json"], env)
                for _ in range(3)]
        kinds = json.loads(runs[-1][1].stdout)["render"]["kinds"]
        print(f"dry-run-wall: {statistics.median(r[0] for r in runs) * 1000:.0f} ms "
              f"(baseline helm template: {statistics.median(bare) * 1000:.0f} ms)")
        print(f"objects-per-kind: {json.dumps(kinds)} (total {sum(kinds.values())})")
        sim = cluster()
        try:
            env_sim = {**env, "KUBECONFIG": str(sim.kubeconfig_path)}
            wall, _ = timed([*TAU, "cluster", "install", "--chart", str(chart), "--timeout", "5m"], env_sim)
        finally:
            sim.stop()
        baseline_sim = cluster()
        try:
            env_base = {**env, "KUBECONFIG": str(baseline_sim.kubeconfig_path)}
            base, _ = timed([str(helm), "upgrade", "--install", "taugrid", str(chart), "-n", "tau-system",
                             "--create-namespace", "--wait", "--timeout", "5m", "--server-side=true",
                             "--force-conflicts"], env_base)
        finally:
            baseline_sim.stop()
        print(f"install-to-ready: {wall:.1f} s (target <= 30 s; baseline one helm upgrade --install --wait: "
              f"{base:.1f} s)")


if __name__ == "__main__":
    main()
