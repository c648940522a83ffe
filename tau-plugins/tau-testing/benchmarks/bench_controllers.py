"""Benchmark: how fast the simulated controllers move Jobs through Kueue, the scheduler and the kubelet.

Run standalone: ``python bench_controllers.py``. Prints one ``name: value unit (target ...)`` line per figure.
"""

from __future__ import annotations

import time

JOBS = 100


def main() -> None:
    from tau_testing.sim import SimCluster
    from tau_testing.sim.controllers import add_node, install_default_controllers, kit

    cluster = SimCluster(clock="fake")
    install_default_controllers(cluster)
    for i in range(4):
        add_node(cluster, f"node-{i}", cpu="64", memory="256Gi")
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "100", "memory": "400Gi"})])
    for i in range(JOBS):
        cluster.store.create(kit.job(f"job-{i:03d}", cpu="1", memory="1Gi"))

    start = time.perf_counter()
    rounds = cluster.settle()
    admit = time.perf_counter() - start

    start = time.perf_counter()
    cluster.advance(5)
    finish = time.perf_counter() - start

    jobs = cluster.store.list("batch/v1", "Job", "team")
    complete = sum(1 for j in jobs if kit.condition(j, "Complete"))
    if complete != JOBS:
        raise SystemExit(f"only {complete}/{JOBS} Jobs completed")
    start = time.perf_counter()
    idle_rounds = cluster.settle()
    idle = time.perf_counter() - start

    print(f"settle-{JOBS}-jobs-admitted-and-started: {admit * 1000:.1f} ms in {rounds} rounds (target <= 3000 ms)")
    print(f"advance-{JOBS}-jobs-to-completion: {finish * 1000:.1f} ms (target <= 3000 ms)")
    print(f"idle-settle-pass-{JOBS}-finished-jobs: {idle * 1000:.1f} ms in {idle_rounds} round(s) (target <= 250 ms)")
    print(f"objects-stored: {cluster.store.count()} objects")


if __name__ == "__main__":
    main()
