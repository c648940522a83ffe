"""Hostile-input bounds and the hostile corpus (issue 19).

Prints, each next to a baseline measured in the same run:

* time and peak RSS to reject the 960 KB list config (480,000 items; target <= 1 s and <= 100 MB),
  baseline: validating a small valid config;
* time and peak RSS to import 3 rows x 10,000 metrics (target <= 2 s and <= 300 MB),
  baseline: importing 3 rows x 10 metrics;
* the hostile corpus: case count and total runtime (sequential), and the slowest cases.

Every figure is the median of fresh CLI processes (``os.wait4`` gives each one's own peak RSS);
imports after the first are idempotent re-imports, so the first (real) import is reported separately.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(os.environ.get("TAU_REPO") or Path(__file__).resolve().parents[2])
sys.path.insert(0, str(ROOT / "tests" / "hostile"))

import harness  # noqa: E402

TAU = "from tau_core.cli import main; main()"
PORTAL = "from taugrid_portal.cli import main; main()"


REPEAT = int(os.environ.get("TAU_BENCH_RUNS", "3"))


def measure(code: str, *args: str, cwd: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(seconds, peak RSS in MB, exit code): the median of ``REPEAT`` fresh CLI processes."""
    runs = sorted(_once(code, *args, cwd=cwd, env=env) for _ in range(REPEAT))
    return runs[len(runs) // 2]


def _once(code: str, *args: str, cwd: Path, env: dict[str, str]) -> tuple[float, float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    return seconds, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def line(label: str, figures: tuple[float, float, int], base: tuple[float, float, int], target: str) -> None:
    s, mb, code = figures
    print(f"{label}: {s:.2f} s, {mb:.0f} MB peak RSS, exit {code} "
          f"(baseline {base[0]:.2f} s, {base[1]:.0f} MB; {s - base[0]:+.2f} s over baseline; target {target})")


def bounds(tmp: Path) -> None:
    repo = tmp / "repo"
    (repo / "tau").mkdir(parents=True)
    (repo / "train.py").write_text("print('ok')\n")
    (repo / "tau" / "small.yaml").write_text("name: small\nengine: job\nentrypoint: ../train.py\ncompute:\n  gpus: 0\n")
    (repo / "tau" / "biglist.yaml").write_text("name: biglist\nitems: [" + ",".join("1" for _ in range(480_000)) + "]\n")
    env = {**os.environ, "NO_COLOR": "1", "TAU_DATA_DIR": str(tmp / "data"), "HOME": str(tmp)}
    size = (repo / "tau" / "biglist.yaml").stat().st_size
    base = measure(TAU, "run", "validate", "--config", "tau/small.yaml", cwd=repo, env=env)
    line(f"reject {size // 1024} KB list config (480,000 items)",
         measure(TAU, "run", "validate", "--config", "tau/biglist.yaml", cwd=repo, env=env), base, "<= 1 s, <= 100 MB")

    store = tmp / "store"
    env["TAU_EXP_STORE"] = str(store)
    subprocess.run([sys.executable, "-c", PORTAL, "experiment", "init", "bench"], env=env, check=True,
                   capture_output=True)
    for name, metrics in (("narrow", 10), ("wide", 10_000)):
        (tmp / f"{name}.jsonl").write_text("".join(
            json.dumps({"_step": s, **{f"metric_{i:05d}": s + i / 10 for i in range(metrics)}}) + "\n"
            for s in range(3)))
    measure(PORTAL, "version", cwd=tmp, env=env)  # warm the page cache for both
    base = _once(PORTAL, "experiment", "import", "jsonl", "--run", "narrow", "--history", str(tmp / "narrow.jsonl"),
                 cwd=tmp, env=env)
    line("import 3 rows x 10,000 metrics", _once(PORTAL, "experiment", "import", "jsonl", "--run", "wide",
                                                  "--history", str(tmp / "wide.jsonl"), cwd=tmp, env=env),
         base, "<= 2 s, <= 300 MB")


def corpus(tmp: Path) -> None:
    cases = harness.load_cases()
    start = time.perf_counter()
    sandbox = harness.build(tmp / "hostile" / "sandbox")
    setup = time.perf_counter() - start
    outcomes = [harness.run_case(c, sandbox) for c in cases]
    total = sum(o.seconds for o in outcomes)
    failed = [o.case.id for o in outcomes if o.problems]
    base = measure(TAU, "version", cwd=tmp, env={**os.environ, "NO_COLOR": "1"})[0]
    print(f"hostile corpus: {len(cases)} cases, {total:.1f} s total run sequentially "
          f"(mean {total / len(cases):.2f} s per case; baseline `tau version` {base:.2f} s), "
          f"sandbox setup {setup:.1f} s, {len(failed)} failing{': ' + ', '.join(failed) if failed else ''}")
    for o in sorted(outcomes, key=lambda o: -o.seconds)[:5]:
        print(f"  slowest: {o.case.id}: {o.seconds:.2f} s")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bounds(Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        corpus(Path(tmp))


if __name__ == "__main__":
    main()
