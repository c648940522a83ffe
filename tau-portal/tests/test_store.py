"""The store's on-disk layout, read API, insert-only records, idempotency and resolution."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from tau_core.errors import ConflictError, NotFoundError, UsageError
from taugrid_portal.store import METRIC_SCHEMA_COLUMNS, SCHEMA_VERSION, ExperimentStore, resolve_store
from taugrid_portal.store.writes import import_jsonl, init_experiment, parse_artifact, record_run


def test_layout_manifest_wal_and_parquet_schema(store, store_dir, write_history, tmp_path):
    hist = write_history(tmp_path / "h.jsonl", steps=50)
    result = import_jsonl(store, run="r1", history=[str(hist)], experiment="exp1")
    manifest = json.loads((store_dir / "manifest.json").read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION == "expstore.v7"
    assert manifest["kind"] == "tau.exp.store"
    conn = sqlite3.connect(store_dir / "index.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    meta = dict(conn.execute("SELECT key, value FROM schema_meta"))
    assert meta["metric_schema_version"] == "tau.metrics.scalar.v2"
    assert meta["metric_schema_columns"] == ",".join(METRIC_SCHEMA_COLUMNS)
    parquet = store_dir / result["metric_file"]
    assert parquet.is_file() and "experiment=exp1" in result["metric_file"]
    df = pl.read_parquet(parquet)
    assert df.columns == list(METRIC_SCHEMA_COLUMNS)
    assert df.height == 100  # 50 steps x 2 metrics
    row = conn.execute("SELECT digest, row_count, min_step, max_step FROM metric_files").fetchone()
    assert row[0] == hashlib.sha256(parquet.read_bytes()).hexdigest()
    assert row[1:] == (100, 0, 49)
    mirror = (store_dir / "append-log" / "runs.jsonl").read_text().splitlines()
    assert json.loads(mirror[0])["run_id"] == "r1"
    art = store.artifacts("r1")[0]
    copy = store.artifact_path(art["artifact_id"])
    assert copy.read_bytes() == hist.read_bytes()
    assert art["digest"] == "sha256:" + hashlib.sha256(hist.read_bytes()).hexdigest()


def test_read_api_runs_series_summaries_target(store, write_history, tmp_path):
    for i, group in enumerate(["arm-a", "arm-a", "arm-b"]):
        hist = write_history(tmp_path / f"h{i}.jsonl", steps=20 + i)
        import_jsonl(store, run=f"run-{i}", history=[str(hist)], experiment="sweep", group=group)
    runs = store.runs(experiment="sweep")
    assert {r.run_id for r in runs} == {"run-0", "run-1", "run-2"}
    assert all(r.lifecycle_state == "succeeded" and r.successful for r in runs)
    assert store.runs(group="arm-b")[0].run_id == "run-2"
    assert store.metric_names(["run-0"]) == ["accuracy", "loss"]
    s = store.series(["run-0", "run-2"], "loss")
    assert s.columns == ["run_id", "step", "value", "wall_time"]
    assert s.filter(pl.col("run_id") == "run-2").height == 22
    assert s["step"].to_list()[:3] == [0, 1, 2]
    sums = {(x["run_id"], x["metric_name"]): x for x in store.summaries()}
    loss = sums[("run-1", "loss")]
    assert (loss["count"], loss["min_step"], loss["max_step"], loss["latest_step"]) == (21, 0, 20, 20)
    assert loss["latest_value"] == pytest.approx(1 / 21) and loss["max_value"] == 1.0
    t = store.resolve_target("arm-a")
    assert (t.type, sorted(t.run_ids)) == ("run_group", ["run-0", "run-1"])
    assert store.resolve_target("run-2").type == "run"
    assert store.resolve_target("sweep").type == "experiment"
    with pytest.raises(NotFoundError) as err:
        store.resolve_target("swep")
    assert "sweep" in (err.value.hint or "")


def test_import_is_idempotent_and_explicit_key_conflicts(store, store_dir, write_history, tmp_path, visible_files):
    hist = write_history(tmp_path / "h.jsonl", steps=30)
    first = import_jsonl(store, run="r1", history=[str(hist)], idempotency_key="key-1")
    files = visible_files(store_dir)
    again = import_jsonl(store, run="r1", history=[str(hist)], idempotency_key="key-1")
    assert (first["reused"], again["reused"], again["action"]) == (False, True, "reused")
    assert visible_files(store_dir) == files
    assert store.summaries(["r1"])[0]["count"] == 30
    hist.write_text(hist.read_text() + json.dumps({"_step": 99, "loss": 0.1}) + "\n")
    with pytest.raises(ConflictError, match="key-1"):
        import_jsonl(store, run="r1", history=[str(hist)], idempotency_key="key-1")
    # default keys derive from the request, so a changed history is a new, additive import
    more = import_jsonl(store, run="r1", history=[str(hist)])
    assert more["action"] == "imported"
    assert {s["metric_name"]: s["count"] for s in store.summaries(["r1"])}["loss"] == 61
    dry = import_jsonl(store, run="r1", history=[str(hist)], dry_run=True)
    assert dry["action"] == "reused" and dry["dry_run"]


def test_records_are_insert_only(store, write_history, tmp_path):
    hist = write_history(tmp_path / "h.jsonl", steps=5)
    import_jsonl(store, run="r1", history=[str(hist)], owner="alice")
    with pytest.raises(ConflictError, match="run 'r1' already exists with different metadata"):
        import_jsonl(store, run="r1", history=[str(write_history(tmp_path / "h2.jsonl", steps=6))], owner="bob")
    record_run(store, "t1", tags={"lr": "0.1"}, metrics={"eval/accuracy": 0.9})
    with pytest.raises(ConflictError, match="tag run/t1 'lr'"):
        record_run(store, "t1", tags={"lr": "0.2"})
    same = record_run(store, "t1", tags={"lr": "0.1"}, metrics={"eval/accuracy": 0.9})
    assert same["reused"] is True
    keyed = record_run(store, "t2", metrics={"x": 1.0}, idempotency_key="k")
    assert keyed["created_run"] and record_run(store, "t2", metrics={"x": 1.0}, idempotency_key="k")["reused"]
    with pytest.raises(ConflictError, match="idempotency key 'k' was used for a different request"):
        record_run(store, "t2", metrics={"x": 2.0}, idempotency_key="k")
    assert init_experiment(store, "exp", project="demo")["reused"] is False
    assert init_experiment(store, "exp", project="demo")["reused"] is True
    with pytest.raises(ConflictError, match="experiment 'exp'"):
        init_experiment(store, "exp", project="demo", description="changed")


def test_failed_index_write_rolls_back_files_and_mirrors(store, store_dir, write_history, tmp_path, visible_files):
    import_jsonl(store, run="r1", history=[str(write_history(tmp_path / "a.jsonl", steps=5))])
    before_files = visible_files(store_dir)
    before_logs = {p.name: p.read_bytes() for p in (store_dir / "append-log").iterdir()}
    # a trigger makes the summary insert fail after the metric file row and the artifact were written
    conn = sqlite3.connect(store_dir / "index.sqlite")
    conn.execute("CREATE TRIGGER boom BEFORE INSERT ON metric_summary_files BEGIN "
                 "SELECT RAISE(ABORT, 'disk on fire'); END")
    conn.commit()
    with pytest.raises(Exception, match="nothing was changed"):
        import_jsonl(store, run="r2", history=[str(write_history(tmp_path / "b.jsonl", steps=7))])
    assert visible_files(store_dir) == before_files
    assert {p.name: p.read_bytes() for p in (store_dir / "append-log").iterdir()} == before_logs
    assert [r.run_id for r in store.runs()] == ["r1"]
    assert not list((store_dir / ".staging").iterdir())


def test_store_resolution_order(tmp_path):
    env = {"TAU_EXP_STORE": str(tmp_path / "a"), "TAU_EXP_STORE_ROOT": str(tmp_path / "root"),
           "TAU_CONTEXT": "ctx", "TAU_TEAM": "team", "TAU_PROJECT": "proj"}
    assert resolve_store(str(tmp_path / "x"), env) == tmp_path / "x"
    assert resolve_store(None, env) == tmp_path / "a"
    del env["TAU_EXP_STORE"]
    assert resolve_store(None, env) == tmp_path / "root" / "ctx" / "team" / "proj"
    with pytest.raises(UsageError, match="missing TAU_TEAM"):
        resolve_store(None, {**env, "TAU_TEAM": ""})
    with pytest.raises(UsageError, match="single path segment"):
        resolve_store(None, {**env, "TAU_PROJECT": ".."})
    empty = {"TAU_DATA_DIR": str(tmp_path / "data")}
    with pytest.raises(UsageError, match="--store is required"):
        resolve_store(None, empty)
    # after a local run (tau run --local), its store is the default
    local = tmp_path / "data" / "expstore"
    local.mkdir(parents=True)
    (local / "manifest.json").write_text("{}")
    assert resolve_store(None, empty) == local


def test_ids_and_artifact_paths_cannot_escape(store, store_dir, tmp_path):
    with pytest.raises(UsageError, match=r"run '\.\./x' is invalid"):
        record_run(store, "../x")
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    art = parse_artifact(json.dumps({"uri": str(outside), "name": "secret.txt"}), "r1")
    record_run(store, "r1", artifacts=[art])
    [row] = store.artifacts("r1")
    assert row["digest"].startswith("sha256:") and row["size_bytes"] == 6 and row["type"] == "log"
    with pytest.raises(UsageError, match="escapes the experiment store root"):
        store.artifact_path(row["artifact_id"])
    link_dir = store_dir / "artifacts" / "r1"
    link_dir.mkdir(parents=True)
    (link_dir / "link.txt").symlink_to(outside)
    art2 = parse_artifact("log:link.txt=artifacts/r1/link.txt", "r1")
    record_run(store, "r1", artifacts=[art2])
    with pytest.raises(UsageError, match="escapes"):
        store.artifact_path(art2["artifact_id"])


def test_open_errors_are_clear(tmp_path):
    with pytest.raises(NotFoundError, match="does not exist") as err:
        ExperimentStore.open(tmp_path / "nope")
    assert "experiment init" in (err.value.hint or "")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFoundError, match=r"has no manifest\.json"):
        ExperimentStore.open(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text("{not json")
    with pytest.raises(Exception, match=r"manifest\.json: cannot read"):
        ExperimentStore.open(bad)


def test_writer_lock_times_out_with_a_clear_error(store, monkeypatch):
    from taugrid_portal.store.lock import WriterLock

    other = WriterLock(Path(store.root), timeout=0.3)
    other.acquire()
    try:
        monkeypatch.setenv("TAU_EXP_LOCK_TIMEOUT", "0.3")
        blocked = ExperimentStore.open(store.root)
        with pytest.raises(ConflictError, match=r"timed out after 0\.3s waiting for the experiment store writer lock"):
            record_run(blocked, "r9")
        blocked.close()
    finally:
        other.release()
    assert record_run(store, "r9")["created_run"]
