"""AKS access costs (issue: workspace administration and AKS access).

Against the loopback Entra and ARM fakes with the simulator as the AKS API server (tau_testing.azure):

* `tau workspace connection` cold (first use: approval, device-code sign-in, ARM, verification) and warm
  (a cached connection, as `tau run` activates it): requests to Entra, to ARM and to the API server;
* `tau workspace token` (the exec plugin, one fresh process, token from the msal cache): median wall time
  next to `tau --version` measured in the same run (the process start-up both pay).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = int(os.environ.get("TAU_BENCH_RUNS", "10"))


def median_ms(args: list[str], env: dict[str, str]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def counts(aks: object, entra_before: int, arm_before: int, api_before: int) -> str:
    entra = len(aks.entra.requests) - entra_before  # type: ignore[attr-defined]
    arm = len(aks.arm.requests) - arm_before  # type: ignore[attr-defined]
    api = aks.cluster.requests.total - api_before  # type: ignore[attr-defined]
    return f"entra={entra} arm={arm} api-server={api}"


def main() -> None:
    from tau_testing.azure import start_aks_stand_in

    tau = str(Path(sys.executable).parent / "tau")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env_overrides: dict[str, str | None] = {}
        aks = start_aks_stand_in(root / "volume", env_overrides)
        try:
            repo = root / "repo"
            (repo / "tau").mkdir(parents=True)
            subprocess.run(["git", "init", "-q", str(repo)], check=True)
            (repo / "tau" / "workspace.connection.yaml").write_text(aks.descriptor())
            env = {**os.environ, **{k: v for k, v in env_overrides.items() if v is not None},
                   "TAU_CONFIG_DIR": str(root / "config"), "KUBECONFIG": str(root / "none"), "HOME": tmp}
            marks = (len(aks.entra.requests), len(aks.arm.requests), aks.cluster.requests.total)
            subprocess.run([tau, "workspace", "connection", str(repo)], input="y\n", text=True, env=env,
                           check=True, capture_output=True)
            print(f"connection-cold: {counts(aks, *marks)}")
            marks = (len(aks.entra.requests), len(aks.arm.requests), aks.cluster.requests.total)
            code = ("from tau_core.workspace import load_descriptor, connect;"
                    f"c = connect(load_descriptor(__import__('pathlib').Path({str(repo / 'tau')!r}) / "
                    "'workspace.connection.yaml'), confirm=lambda *a: False); assert c.cached")
            subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
            print(f"connection-warm (cached, as tau run activates it): {counts(aks, *marks)}")
            baseline = median_ms([tau, "--version"], env)
            token = median_ms([tau, "workspace", "token", "--tenant-id", aks.tenant], env)
            print(f"tau-version-baseline: {baseline:.1f} ms (median of {RUNS})")
            print(f"exec-plugin (tau workspace token, cached): {token:.1f} ms = {token / baseline:.2f}x baseline")
        finally:
            aks.stop()


if __name__ == "__main__":
    main()
