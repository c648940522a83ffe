"""`tau workspace connection` API requests: cold cache (first verification) next to a warm cache (pinned, fresh).

    python tau-plugins/tau-workspace/benchmarks/bench_connection.py

Runs against the simulated TauGrid cluster in this process (real HTTP, real client) and prints the number of
API requests and the wall time of each connect.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

from tau_testing.sim import SimCluster
from tau_testing.sim.scenarios.taugrid import RESEARCHER, TauGridScenario

DESCRIPTOR = """\
schema: tau.workspace.connection.v1
workspace: aurora
cluster:
  contextName: {context}
  systemNamespace: tau-system
access:
  method: kubeconfig
authorization:
  mode: workspace-rbac
  requiredRole: tau-researcher-v1
requirements:
  minTauVersion: 0.1.0
"""


def main() -> None:
    from tau_core.workspace import connect, load_descriptor
    from tau_core.workspace.connection import ConnectionStore

    cluster = SimCluster(clock="fake").start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            TauGridScenario.install(cluster, root / "volume")
            kubeconfig = cluster.write_kubeconfig(root / "kube" / "config", user=RESEARCHER)
            repo = root / "repo"
            (repo / "tau").mkdir(parents=True)
            subprocess.run(["git", "init", "-q", str(repo)], check=True)
            path = repo / "tau" / "workspace.connection.yaml"
            path.write_text(DESCRIPTOR.format(context=cluster.context_for(RESEARCHER)))
            env = {**os.environ, "KUBECONFIG": str(kubeconfig), "TAU_CONFIG_DIR": str(root / "config")}
            store = ConnectionStore(root / "config")
            figures = []
            for label in ("cold", "warm"):
                cluster.requests.clear()
                start = time.perf_counter()
                connect(load_descriptor(path), confirm=lambda *_: True, env=env, store=store)
                figures.append((label, len(cluster.requests.entries), (time.perf_counter() - start) * 1000))
    finally:
        cluster.stop()
    (_, cold_n, cold_ms), (_, warm_n, warm_ms) = figures
    print(f"connection-cold-cache: {cold_n} API requests, {cold_ms:.0f} ms "
          f"(baseline warm cache: {warm_n} requests, {warm_ms:.0f} ms)")


if __name__ == "__main__":
    main()
