"""The platform walkthrough's wall time, from a bare-nodes simulated cluster to the first run's success.

    python tau-plugins/tau-workspace/benchmarks/bench_walkthrough.py

Runs ``examples/platform-walkthrough/run.sh`` once (real Helm, real ``tau-controller run``, the simulator's
Kueue) and prints, from the step timestamps of that same run:

  walkthrough-to-first-success: empty cluster -> first run succeeded (target <= 60 s), next to its parts:
  the bare simulator start (baseline), `tau cluster install` to READY, workspace Ready, and the run itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tau_testing.binaries import ensure_binaries
from tau_testing.paths import repo_root

STEP = re.compile(r"^== \[(?P<t>[0-9.]+)s\] (?P<n>\d)\.")


def main() -> None:
    binaries = ensure_binaries()
    script = repo_root() / "examples" / "platform-walkthrough" / "run.sh"
    path = os.pathsep.join([str(Path(sys.executable).parent), str(binaries["helm"].parent), os.environ["PATH"]])
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PATH": path, "TAU_WALKTHROUGH_DIR": tmp, "HOME": tmp}
        start = time.perf_counter()
        result = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=900)
        wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"walkthrough failed:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
    steps = {int(m["n"]): float(m["t"]) for m in map(STEP.match, result.stdout.splitlines()) if m}
    first = float(re.search(r"first run succeeded after ([0-9.]+)s", result.stdout)[1])  # type: ignore[index]
    ready = float(re.search(r"workspace ready after ([0-9.]+)s", result.stdout)[1])  # type: ignore[index]
    print(f"walkthrough-to-first-success: {first:.1f} s (target <= 60 s; baseline bare simulator start: "
          f"{steps[1] - steps[0]:.1f} s)")
    print(f"  install to READY: {steps[2] - steps[1]:.1f} s; workspace Ready: {ready - steps[2]:.1f} s; "
          f"connect + run to success: {first - steps[3]:.1f} s")
    print(f"walkthrough-total: {wall:.1f} s (including refusals and uninstall)")


if __name__ == "__main__":
    main()
