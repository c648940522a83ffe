"""Real processes: concurrent writers lose nothing; a writer killed with SIGKILL leaves a sound store."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from taugrid_portal.store import ExperimentStore
from taugrid_portal.store.writes import import_jsonl

pytestmark = pytest.mark.realclock  # concurrent processes and threads on one store

WRITER_SCRIPT = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import import_jsonl
    root, worker, hist, runs, go = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), Path(sys.argv[5])
    os.environ["TAU_EXP_LOCK_TIMEOUT"] = "60"
    store = ExperimentStore.open(root)
    while not go.exists():  # start both writers together
        time.sleep(0.001)
    for i in range(runs):
        # every worker writes its own runs and also appends chunks to one shared run
        import_jsonl(store, run=f"w{worker}-r{i}", history=[f"{hist}/w{worker}-{i}.jsonl"], group=f"g{worker}")
        import_jsonl(store, run="shared", history=[f"{hist}/shared-{worker}-{i}.jsonl"], group="shared")
    store.close()
""")


def assert_sound(root: Path) -> sqlite3.Connection:
    """The index is intact, every referenced file exists with its digest, nothing unreferenced is visible."""
    conn = sqlite3.connect(root / "index.sqlite")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    referenced = set()
    for path, digest in conn.execute("SELECT path, digest FROM metric_files"):
        referenced.add(path)
        assert hashlib.sha256((root / path).read_bytes()).hexdigest() == digest, path
    for uri, digest in conn.execute("SELECT uri, digest FROM artifacts WHERE uri LIKE 'artifacts/%'"):
        referenced.add(uri)
        assert "sha256:" + hashlib.sha256((root / uri).read_bytes()).hexdigest() == digest, uri
    visible = set()
    for base in ("metrics", "artifacts"):
        for dirpath, _dirs, files in os.walk(root / base):
            visible.update(os.path.relpath(os.path.join(dirpath, f), root) for f in files)
    assert visible <= referenced, f"unreferenced files: {sorted(visible - referenced)}"
    for name, size in conn.execute("SELECT name, size FROM append_log_offsets"):
        assert (root / "append-log" / name).stat().st_size >= size
    return conn


def test_two_processes_write_at_once_and_lose_nothing(tmp_path, write_history):
    root = tmp_path / "store"
    ExperimentStore.init(root, project="demo")[0].close()
    hist = tmp_path / "hist"
    runs = 3
    for w in range(2):
        for i in range(runs):
            write_history(hist / f"w{w}-{i}.jsonl", steps=200 + i)
            write_history(hist / f"shared-{w}-{i}.jsonl", steps=10, start=1000 * w + 10 * i)
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER_SCRIPT, str(root), str(w), str(hist), str(runs), str(go)],
                              stderr=subprocess.PIPE, text=True) for w in range(2)]
    time.sleep(0.5)
    go.touch()
    for p in procs:
        _out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    conn = assert_sound(root)
    store = ExperimentStore.open(root)
    ids = {r.run_id for r in store.runs()}
    assert ids == {"shared"} | {f"w{w}-r{i}" for w in range(2) for i in range(runs)}
    sums = {(s["run_id"], s["metric_name"]): s for s in store.summaries()}
    for w in range(2):
        for i in range(runs):
            assert sums[(f"w{w}-r{i}", "loss")]["count"] == 200 + i
    shared = sums[("shared", "loss")]
    assert shared["count"] == 2 * runs * 10
    assert (shared["min_step"], shared["max_step"]) == (0, 1000 + 10 * runs - 1)
    assert conn.execute("SELECT COUNT(*) FROM metric_files").fetchone()[0] == 4 * runs
    mirrored = (root / "append-log" / "metric_files.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["file_id"] for x in mirrored) == sorted(
        r[0] for r in conn.execute("SELECT file_id FROM metric_files"))
    assert len(store.series(["shared"], "loss")) == 2 * runs * 10


KILL_SCRIPT = textwrap.dedent("""
    import sys
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import import_jsonl
    s = ExperimentStore.open(sys.argv[1])
    r = import_jsonl(s, run="victim", history=sys.argv[2:])
    print(r["action"], flush=True)
""")


def _kill_during_import(root: Path, files: list[str], delay: float) -> int | None:
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(root), *files], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    staging = root / ".staging"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if staging.is_dir() and any(staging.iterdir()):
            break
        time.sleep(0.005)
    time.sleep(delay)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return proc.returncode


@pytest.mark.slow
def test_sigkill_mid_import_leaves_a_store_that_opens_and_accepts_the_rerun(tmp_path, write_history):
    root = tmp_path / "store"
    ExperimentStore.init(root, project="demo")[0].close()
    files = [str(write_history(tmp_path / f"h{i}.jsonl", steps=30_000, start=30_000 * i,
                               metrics=("loss", "accuracy", "lr", "grad_norm"))) for i in range(3)]
    killed = 0
    for delay in (0.0, 0.1, 0.4):
        code = _kill_during_import(root, files, delay)
        if code == -signal.SIGKILL:
            killed += 1
        assert_sound(root)
        store = ExperimentStore.open(root)
        if code == -signal.SIGKILL and not store.metric_files():
            assert store.runs() == []  # nothing half-committed: no run without its metrics
        store.close()
        if code != -signal.SIGKILL:
            break
    assert killed >= 1, "the import always finished before it could be killed"
    leftovers = list((root / ".staging").iterdir())
    store = ExperimentStore.open(root)
    first = import_jsonl(store, run="victim", history=files)
    assert first["action"] in ("imported", "reused")
    assert not [p for p in leftovers if p.exists()], "the next writer sweeps a dead writer's staging files"
    again = import_jsonl(store, run="victim", history=files)
    assert again["action"] == "reused"
    assert_sound(root)
    [loss] = store.summaries(["victim"], metric="loss")
    assert (loss["count"], loss["max_step"]) == (90_000, 89_999)
    assert len(store.metric_files(["victim"])) == 1


def test_threads_sharing_a_store_object_and_separate_objects(tmp_path):
    import threading

    from taugrid_portal.store.writes import record_run

    root = tmp_path / "store"
    shared = ExperimentStore.init(root, project="demo")[0]
    errors: list[BaseException] = []

    def work(i: int, own: bool) -> None:
        try:
            store = ExperimentStore.open(root) if own else shared
            for j in range(5):
                record_run(store, f"t{i}-{j}", metrics={"loss": 1.0 / (j + 1)}, step=j)
            store.ensure_summaries()
        except BaseException as exc:  # collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, i % 2 == 0)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(shared.runs()) == 20
    assert_sound(root)


def test_history_that_changes_during_import_is_refused_and_nothing_is_written(tmp_path, write_history, monkeypatch):
    """The artifact copy is taken after parsing; a file appended to in between is an error, not
    an artifact whose bytes differ from what was hashed and imported."""
    import pytest

    from tau_core.errors import ConfigError
    from taugrid_portal.store import importer as writes  # the importer reads the history

    hist = write_history(tmp_path / "live.jsonl", steps=50)
    original = writes.read_history

    def appending(path, **kwargs):
        stats = yield from original(path, **kwargs)
        with open(path, "a") as fh:  # the training job writes one more row
            fh.write('{"_step": 50, "loss": 0.1}\n')
        return stats

    monkeypatch.setattr(writes, "read_history", appending)
    store, _ = ExperimentStore.init(tmp_path / "store", project="p")
    with pytest.raises(ConfigError, match=r"live\.jsonl changed while it was being imported"):
        import_jsonl(store, run="r", history=[str(hist)])
    assert store.runs() == [] and store.metric_files() == []
    assert not any((tmp_path / "store" / ".staging").iterdir())
    monkeypatch.setattr(writes, "read_history", original)
    result = import_jsonl(store, run="r", history=[str(hist)])  # the finished file imports
    assert result["rows"] == 50 * 2 + 1
    [art] = store.artifacts("r")
    path = store.artifact_path(art["artifact_id"])
    assert path.read_bytes() == hist.read_bytes()
    assert art["digest"] == "sha256:" + hashlib.sha256(hist.read_bytes()).hexdigest()
