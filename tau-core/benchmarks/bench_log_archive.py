"""Log archiving in the entrypoint wrapper (issue 18 item 5): what copying a container's stdout/stderr into
``<output>/logs/<pod>-<container>.log`` costs a program that writes 50 MB of stdout.

Three ways to run the same program, its stdout a pipe drained into a file by a copier in this process, as a
container runtime's shim drains a container's stdout into its log:

* ``direct``: ``python3 program.py`` with no wrapper at all (the baseline);
* ``wrapper``: the rendered ``bash -c`` wrapper without archiving (what the wrapper itself costs);
* ``archived``: the rendered wrapper with archiving (two ``tee -a`` through FIFOs, the rotation check);
* ``direct-to-file`` (reference only): no wrapper and no pipe, stdout straight into a file, which no
  container gets; against it the extra pipe hop of the archive shows as system time.

Two programs: ``writer`` does nothing but write 50 MB as fast as it can (the worst case: the extra copy is
all there is), ``trainer`` computes between its writes, 50 MB over a few seconds (closer to a training run).
Figures are medians of interleaved samples (``TAU_BENCH_RUNS``, default 5): wall time, and the CPU time
(user + system) of the whole process tree, which a loaded machine disturbs far less; the target is <= 2%
overhead of ``archived`` over ``direct``, judged on CPU time.
Runnable standalone: ``python tau-core/benchmarks/bench_log_archive.py``.
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

from tau_core import render_scripts as rs

RUNS = int(os.environ.get("TAU_BENCH_RUNS", "5"))
COPY_BUFFER = 32 * 1024  # containerd's shim copies a container's stdout with 32 KiB reads
TARGET = 2.0
MB = 50
WRITER = f"""
import sys
line = b"x" * 99 + b"\\n"
write = sys.stdout.buffer.write
for _ in range({MB} * 10_000):
    write(line)
"""
TRAINER = f"""
import sys
line = b"step metrics " + b"x" * 86 + b"\\n"
write = sys.stdout.buffer.write
for step in range(500):
    sum(i * i for i in range(40_000))  # the work between two bursts of output
    for _ in range({MB} * 20):
        write(line)
    sys.stdout.flush()
"""


def timed(argv: list[str], out: Path, env: dict[str, str], *, pipe: bool = True) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run whose stdout goes into a pipe that a copier drains into ``out``,
    as a container runtime's shim does (``pipe=False``: straight into the file); CPU counts the whole process
    tree and the copier."""
    before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    before_self = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    with out.open("wb") as sink:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE if pipe else sink, stderr=subprocess.DEVNULL, env=env)
        while proc.stdout is not None and (chunk := os.read(proc.stdout.fileno(), COPY_BUFFER)):
            sink.write(chunk)
        if proc.wait() != 0:
            raise RuntimeError(f"{argv[0]} exited {proc.returncode}")
    wall = time.perf_counter() - start
    after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    after_self = resource.getrusage(resource.RUSAGE_SELF)
    cpu = sum(getattr(after, f) - getattr(before, f) for after, before in
              ((after_children, before_children), (after_self, before_self)) for f in ("ru_utime", "ru_stime"))
    return wall, cpu


def measure(name: str, program: str, root: Path) -> None:
    script = root / f"{name}.py"
    script.write_text(program)
    core = f"{rs.q(sys.executable)} {rs.q(str(script))}"
    plain = rs.compose([], core, rs.Wrappers())
    archived = rs.compose([], core, rs.Wrappers(output=str(root / "output"), log_container="main"))
    env = {**os.environ, "TAU_POD_NAME": f"bench-{name}"}
    ways = {"direct": [sys.executable, str(script)], "wrapper": ["bash", "-c", plain],
            "archived": ["bash", "-c", archived], "direct-to-file": [sys.executable, str(script)]}
    wall: dict[str, list[float]] = {k: [] for k in ways}
    cpu: dict[str, list[float]] = {k: [] for k in ways}
    timed(ways["archived"], root / "warm.log", env)  # warm caches (page cache, python start-up)
    for _ in range(RUNS):
        for way, argv in ways.items():
            if way == "archived":
                shutil.rmtree(root / "output", ignore_errors=True)
            w, c = timed(argv, root / f"{way}.log", env, pipe=way != "direct-to-file")
            wall[way].append(w)
            cpu[way].append(c)
    archive = root / "output" / "logs" / f"bench-{name}-main.log"
    assert archive.stat().st_size == (root / "archived.log").stat().st_size, "the archive lost bytes"
    base_wall, base_cpu = statistics.median(wall["direct"]), statistics.median(cpu["direct"])
    for way in ways:
        w, c = statistics.median(wall[way]), statistics.median(cpu[way])
        over_wall, over_cpu = (w / base_wall - 1) * 100, (c / base_cpu - 1) * 100
        verdict = ""
        if way == "archived":
            verdict = f" (target <= {TARGET:g}% of CPU: {'met' if over_cpu <= TARGET else 'NOT met'})"
        print(f"log-archive-{name}-{way}: wall {w * 1000:.0f} ms ({over_wall:+.1f}% vs direct), "
              f"cpu {c * 1000:.0f} ms ({over_cpu:+.1f}% vs direct) for {MB} MB of stdout{verdict}")
    spread = (max(cpu["direct"]) - min(cpu["direct"])) / base_cpu * 100
    print(f"log-archive-{name}: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; the CPU time "
          f"of identical direct runs spread over {spread:.0f}% of their median, so differences below that are "
          "noise on this machine")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tau-bench-logs-") as tmp:
        root = Path(tmp)
        for name, program in (("writer", WRITER), ("trainer", TRAINER)):
            measure(name, program, root)


if __name__ == "__main__":
    main()
