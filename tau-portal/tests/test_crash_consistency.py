"""Crash consistency (issue 19, D16): 50 SIGKILLs at random points of imports of various sizes.

A killed writer may leave staged files and placed-but-unindexed metric files. The next writer
(or ``experiment fsck``) recovers under the writer lock; afterwards the index and the files
agree exactly, and re-importing every history is idempotent.

Runtime is kept modest for CI: imports are small (50-2,000 rows), and the writers are forked
from one pre-imported zygote process (no fresh interpreter per kill). Half of the kills wait
for a metric file to be placed and then strike within a few milliseconds, which is the window
between placement and commit where orphans are born; the other half strike at a random time.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from taugrid_portal.store import ExperimentStore
from taugrid_portal.store.writes import import_jsonl

KILLS = 50

ZYGOTE = textwrap.dedent("""
    import os, sys
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import import_jsonl
    import polars, pyarrow.json  # imported, not used: no worker threads exist when we fork
    root = sys.argv[1]
    print("ready", flush=True)
    for line in sys.stdin:
        run, hist = line.split()
        pid = os.fork()
        if pid == 0:
            try:
                store = ExperimentStore.open(root)
                import_jsonl(store, run=run, history=[hist])
                store.close()
                os._exit(0)
            except BaseException:
                os._exit(3)
        print(pid, flush=True)
        os.waitpid(pid, 0)
        print("reaped", flush=True)
""")


def _history(path: Path, rows: int, metrics: int, seed: int) -> Path:
    rng = random.Random(seed)
    with path.open("w") as fh:
        for s in range(rows):
            fh.write(json.dumps({"_step": s, **{f"m{k}": rng.random() for k in range(metrics)}}) + "\n")
    return path


def _metric_files(root: Path) -> set[Path]:
    base = root / "metrics"
    return {p for p in base.rglob("*.parquet")} if base.is_dir() else set()


def _orphans(root: Path) -> list[str]:
    store = ExperimentStore.open(root)
    try:
        return store.orphans()
    finally:
        store.close()


def test_random_sigkills_then_recovery_leave_index_and_files_in_agreement(tmp_path: Path) -> None:
    rng = random.Random(19)
    root = tmp_path / "store"
    ExperimentStore.init(root, project="crash")[0].close()
    sizes = [(50, 4), (300, 8), (1_000, 2), (400, 40), (2_000, 1)]
    histories = [(f"run-{i}", _history(tmp_path / f"h{i}.jsonl", rows, metrics, i))
                 for i, (rows, metrics) in enumerate(sizes)]
    zygote = subprocess.Popen([sys.executable, "-c", ZYGOTE, str(root)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, bufsize=1)
    assert zygote.stdin is not None and zygote.stdout is not None
    killed = orphaned = 0
    try:
        assert zygote.stdout.readline().strip() == "ready"
        for i in range(KILLS):
            run, hist = histories[rng.randrange(len(histories))]
            before = _metric_files(root)
            zygote.stdin.write(f"{run}-k{i} {hist}\n")
            pid = int(zygote.stdout.readline())
            if i % 2 == 0:  # strike right after a metric file is placed
                deadline = time.monotonic() + 30
                while _metric_files(root) == before and time.monotonic() < deadline:
                    time.sleep(0.0005)
                time.sleep(rng.uniform(0, 0.004))
            else:
                time.sleep(rng.uniform(0, 0.15))
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
            assert zygote.stdout.readline().strip() == "reaped"
            if i % 2 == 0:
                orphaned += bool(_orphans(root))
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=60)
    assert killed >= KILLS // 2, f"only {killed} kills landed"
    print(f"crash-consistency: {killed} kills, {orphaned} left orphans for the next writer")

    # recovery by the next write (no fsck): every import below runs under the writer lock
    store = ExperimentStore.open(root)
    with store:
        for run, hist in histories:
            assert import_jsonl(store, run=run, history=[str(hist)])["action"] in ("imported", "reused")
        assert store.fsck() == []  # the writes already recovered everything
        assert store.orphans() == []
        referenced = {r["path"] for r in store.query("SELECT path FROM metric_files")}
        assert all((root / p).is_file() for p in referenced)
        assert {p.relative_to(root).as_posix() for p in _metric_files(root)} == referenced
        assert not [p for p in (root / ".staging").iterdir()] if (root / ".staging").is_dir() else True
        for run, hist in histories:  # idempotent re-import
            assert import_jsonl(store, run=run, history=[str(hist)])["action"] == "reused"
        for (run, _), (rows, metrics) in zip(histories, sizes, strict=True):
            counts = {s["metric_name"]: s["count"] for s in store.summaries([run])}
            assert counts == {f"m{k}": rows for k in range(metrics)}


def test_fsck_removes_orphans_left_before_recovery_existed(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store, _ = ExperimentStore.init(root, project="crash")
    with store:
        import_jsonl(store, run="r1", history=[str(_history(tmp_path / "h.jsonl", 20, 2, 0))])
        [indexed] = [r["path"] for r in store.query("SELECT path FROM metric_files")]
        orphan = (root / indexed).with_name("jsonl-deadbeef0000.parquet")
        orphan.write_bytes((root / indexed).read_bytes())
        history_orphan = root / "artifacts" / "r1" / "jsonl" / "0123456789ab-lost.jsonl"
        history_orphan.write_text("{}\n")
        assert store.orphans() == sorted([orphan.relative_to(root).as_posix(),
                                          history_orphan.relative_to(root).as_posix()])
    r = subprocess.run([sys.executable, "-c", "from taugrid_portal.cli import main; main()", "experiment", "fsck",
                        "--store", str(root), "-o", "json"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "NO_COLOR": "1"})
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["removed"]) == 2
    assert not orphan.exists() and not history_orphan.exists() and (root / indexed).is_file()
