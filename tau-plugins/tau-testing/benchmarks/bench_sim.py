"""Simulated API server benchmarks: start-up time, GET throughput and memory with 10,000 stored objects.

Run standalone: python tau-plugins/tau-testing/benchmarks/bench_sim.py
The load generator runs in a separate process (aiohttp, keep-alive, 8 concurrent workers) so that client and
server do not share a GIL.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import textwrap
import time

STARTUP_RUNS = 5
LOAD_SECONDS = 3.0


def startup_in_process() -> tuple[float, float]:
    """(first cluster in this process, median of later ones) in seconds, construction + server start."""
    from tau_testing.sim import SimCluster

    times = []
    for _ in range(STARTUP_RUNS):
        t0 = time.perf_counter()
        cluster = SimCluster()
        cluster.start()
        times.append(time.perf_counter() - t0)
        cluster.stop()
    return times[0], statistics.median(times[1:])


def startup_fresh_process() -> float:
    """Median wall time of a fresh interpreter importing the simulator and starting one cluster."""
    code = textwrap.dedent("""
        import time
        t0 = time.perf_counter()
        from tau_testing.sim import SimCluster
        c = SimCluster(); c.start()
        print(time.perf_counter() - t0)
        c.stop()
    """)
    samples = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        samples.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(samples)


LOAD = textwrap.dedent("""
    import asyncio, sys, time, aiohttp
    url, token, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    async def worker(session, deadline, counts):
        while time.perf_counter() < deadline:
            async with session.get(url, headers={"Authorization": "Bearer " + token}) as r:
                await r.read()
                counts[r.status] = counts.get(r.status, 0) + 1
    async def main():
        counts = {}
        async with aiohttp.ClientSession() as session:
            async with session.get(url, headers={"Authorization": "Bearer " + token}) as r:
                await r.read()
            t0 = time.perf_counter()
            deadline = t0 + seconds
            await asyncio.gather(*(worker(session, deadline, counts) for _ in range(8)))
            elapsed = time.perf_counter() - t0
        import json; print(sum(counts.values()) / elapsed, json.dumps({str(k): v for k, v in counts.items()}))
    asyncio.run(main())
""")


def get_throughput(user: str = "admin") -> tuple[float, dict[str, int]]:
    """GET requests/s for ``user`` (admin bypasses RBAC; alice is authorized by a RoleBinding)."""
    from tau_testing.sim import SimCluster

    cluster = SimCluster()
    cluster.store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bench", "namespace":
                                                                                 "default"}, "data": {"k": "v"}})
    cluster.store.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                          "metadata": {"name": "alice-view", "namespace": "default"},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                      "name": "view"},
                          "subjects": [{"kind": "User", "name": "alice"}]})
    cluster.start()
    try:
        url = f"{cluster.url}/api/v1/namespaces/default/configmaps/bench"
        out = subprocess.run([sys.executable, "-c", LOAD, url, cluster.tokens[user], str(LOAD_SECONDS)],
                             capture_output=True, text=True, check=True)
        rate_text, counts_text = out.stdout.strip().split(" ", 1)
        return float(rate_text), json.loads(counts_text)
    finally:
        cluster.stop()


def memory_with_objects(count: int = 10_000) -> tuple[float, float]:
    """(RSS increase in MiB, seconds to create) for ``count`` pods, measured in a fresh process."""
    code = textwrap.dedent(f"""
        import time
        def rss():
            for line in open("/proc/self/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        from tau_testing.sim import SimCluster
        c = SimCluster()
        before = rss()
        t0 = time.perf_counter()
        for i in range({count}):
            c.store.create({{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": f"pod-{{i}}",
                "namespace": "default", "labels": {{"app": "bench", "index": str(i)}}}},
                "spec": {{"containers": [{{"name": "main", "image": "busybox:1.36",
                "resources": {{"requests": {{"cpu": "100m", "memory": "64Mi"}}}}}}]}}}})
        elapsed = time.perf_counter() - t0
        print(rss() - before, elapsed)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    mib, seconds = out.stdout.strip().split()
    return float(mib), float(seconds)


def main() -> int:
    first, later = startup_in_process()
    print(f"sim-startup-first-in-process: {first * 1000:.1f} ms (target < 1000 ms)")
    print(f"sim-startup-warm: {later * 1000:.1f} ms (target < 1000 ms)")
    fresh = startup_fresh_process()
    print(f"sim-startup-fresh-process (import + start): {fresh * 1000:.1f} ms (target < 1000 ms)")
    rate, counts = get_throughput()
    print(f"sim-get-throughput: {rate:.0f} requests/s (target >= 500 requests/s; statuses {counts})")
    rbac_rate, rbac_counts = get_throughput("alice")
    print(f"sim-get-throughput-rbac-user: {rbac_rate:.0f} requests/s (RBAC evaluated per request; "
          f"statuses {rbac_counts})")
    mib, seconds = memory_with_objects()
    print(f"sim-rss-10000-pods: {mib:.1f} MiB (created in {seconds:.2f} s)")
    ok = later < 1.0 and fresh < 1.0 and rate >= 500
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
