"""Schema versioning: older stores migrate forward, newer stores are refused with a hint."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tau_core.errors import ConfigError
from taugrid_portal.store import ExperimentStore
from taugrid_portal.store.writes import record_run


def _manifest(root, version):
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.json").write_text(json.dumps({
        "schema_version": version, "kind": "tau.exp.store", "project": "legacy",
        "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z",
    }))


def test_v0_store_with_hypotheses_and_questions_migrates_to_v6(tmp_path):
    root = tmp_path / "old"
    _manifest(root, "")
    conn = sqlite3.connect(root / "index.sqlite")
    conn.executescript("""
        CREATE TABLE hypotheses (hypothesis_id TEXT PRIMARY KEY, text TEXT);
        CREATE TABLE questions (question_id TEXT PRIMARY KEY, project TEXT NOT NULL, text TEXT NOT NULL,
                                created_at TEXT NOT NULL);
        CREATE TABLE run_groups (run_group_id TEXT PRIMARY KEY, project TEXT NOT NULL, name TEXT NOT NULL,
                                 question_id TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
        CREATE TABLE runs (run_id TEXT PRIMARY KEY, project TEXT NOT NULL, run_group_id TEXT NOT NULL,
                           hypothesis_id TEXT, question_id TEXT, state TEXT NOT NULL, created_at TEXT NOT NULL,
                           index_version TEXT NOT NULL);
        CREATE INDEX idx_runs_hypothesis ON runs(hypothesis_id);
        CREATE TABLE stellar_workspaces (target TEXT, project TEXT, name TEXT);
        INSERT INTO questions VALUES ('does-lr-matter', 'legacy', 'Does the LR matter?', '2025-01-01T00:00:00Z');
        INSERT INTO run_groups VALUES ('arm-a', 'legacy', 'arm-a', 'does-lr-matter', '2025-01-01T00:00:00Z',
                                       '2025-01-01T00:00:00Z');
        INSERT INTO run_groups VALUES ('arm-b', 'legacy', 'arm-b', NULL, '2025-01-01T00:00:00Z',
                                       '2025-01-01T00:00:00Z');
        INSERT INTO runs VALUES ('r1', 'legacy', 'arm-a', 'h1', NULL, 'succeeded', '2025-01-02T00:00:00Z', 'v0');
        INSERT INTO runs VALUES ('r2', 'legacy', 'arm-b', NULL, NULL, 'failed', '2025-01-03T00:00:00Z', 'v0');
    """)
    conn.commit()
    conn.close()
    (root / "append-log").mkdir()
    legacy_log = root / "append-log" / "runs.jsonl"
    legacy_log.write_text('{"run_id": "r1"}\n{"run_id": "r2"}\n')

    store = ExperimentStore.open(root)
    assert any("expstore.v0 -> expstore.v1" in w and "expstore.v6 -> expstore.v7" in w for w in store.warnings)
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["schema_version"] == "expstore.v7" and manifest["project"] == "legacy"
    tables = {r["name"] for r in store.query("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"hypotheses", "questions", "run_experiments", "stellar_workspaces"}.isdisjoint(tables)
    assert {"stellar_dashboards", "metric_summaries", "artifacts"} <= tables
    cols = {r["name"] for r in store.query("PRAGMA table_info(runs)")}
    assert "hypothesis_id" not in cols and "question_id" not in cols and "experiment_id" in cols
    runs = {r.run_id: r for r in store.runs()}
    assert runs["r1"].experiment_id == "does-lr-matter" and runs["r2"].experiment_id == ""
    [exp] = [e for e in store.experiments() if e["source"] == "question"]
    assert (exp["experiment_id"], exp["name"]) == ("does-lr-matter", "Does the LR matter?")
    assert store.resolve_target("does-lr-matter").run_ids == ["r1"]
    # the migrated store is fully writable, and opening it again is a no-op
    record_run(store, "r3", project="legacy", group="arm-b", metrics={"loss": 0.5})
    lines = legacy_log.read_text().splitlines()
    assert lines[:2] == ['{"run_id": "r1"}', '{"run_id": "r2"}'] and json.loads(lines[2])["run_id"] == "r3"
    store.close()
    again = ExperimentStore.open(root)
    assert again.warnings == [] and len(again.runs()) == 3


def test_v3_store_gets_dashboards_table(tmp_path):
    root = tmp_path / "v3"
    _manifest(root, "expstore.v3")
    conn = sqlite3.connect(root / "index.sqlite")
    conn.executescript("CREATE TABLE stellar_workspaces (target TEXT, project TEXT, name TEXT);")
    conn.close()
    store = ExperimentStore.open(root)
    tables = {r["name"] for r in store.query("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "stellar_dashboards" in tables and "stellar_workspaces" not in tables
    assert store.warnings == ["migrated experiment store schema: expstore.v3 -> expstore.v4, expstore.v4 -> "
                              "expstore.v5, expstore.v5 -> expstore.v6, expstore.v6 -> expstore.v7"]


def test_newer_store_is_refused_with_upgrade_hint(tmp_path):
    root = tmp_path / "future"
    _manifest(root, "expstore.v9")
    sqlite3.connect(root / "index.sqlite").close()
    with pytest.raises(ConfigError, match=r"'expstore\.v9' is not one this taugrid-portal understands") as err:
        ExperimentStore.open(root)
    assert "pip install -U taugrid-portal" in (err.value.hint or "")
    assert json.loads((root / "manifest.json").read_text())["schema_version"] == "expstore.v9"


def test_wrong_kind_is_refused(tmp_path):
    root = tmp_path / "other"
    root.mkdir()
    (root / "manifest.json").write_text(json.dumps({"schema_version": "expstore.v5", "kind": "something.else"}))
    with pytest.raises(ConfigError, match="unsupported experiment store kind"):
        ExperimentStore.open(root)


def test_metric_files_without_summaries_are_backfilled(tmp_path):
    """Files indexed by an older writer that kept no summaries get them on migration."""
    from datetime import UTC, datetime

    import polars as pl

    from taugrid_portal.store import schema as store_schema

    root = tmp_path / "v4"
    _manifest(root, "expstore.v4")
    rel = "metrics/project=legacy/group=g/run=r1/old.parquet"
    (root / rel).parent.mkdir(parents=True)
    pl.DataFrame({
        "project": ["legacy"] * 4, "run_group_id": ["g"] * 4, "run_id": ["r1"] * 4,
        "metric_name": ["loss", "loss", "loss", "acc"], "step": [0, 1, 2, 2],
        "wall_time": [datetime(2025, 1, 1, tzinfo=UTC)] * 4, "value": [1.0, 0.5, float("nan"), 0.7],
        "unit": [None] * 4, "source": ["old"] * 4, "split": [None] * 4, "tags": ["{}"] * 4,
    }).write_parquet(root / rel)
    conn = sqlite3.connect(root / "index.sqlite")
    for name in store_schema.TABLES:
        conn.execute(store_schema.table_sql(name))
    conn.execute("INSERT INTO runs(run_id, project, run_group_id, state, created_at, index_version) VALUES "
                 "('r1', 'legacy', 'g', 'succeeded', '2025-01-01T00:00:00Z', 'expstore.v4')")
    conn.execute("INSERT INTO metric_files(file_id, path, format, schema_version, project, run_group_id, run_id, "
                 "row_count, created_at) VALUES ('old-1', ?, 'parquet', 'tau.metrics.scalar.v2', 'legacy', 'g', "
                 "'r1', 4, '2025-01-01T00:00:00Z')", [rel])
    conn.execute("INSERT INTO metric_files(file_id, path, format, schema_version, run_id, created_at) VALUES "
                 "('gone', 'metrics/missing.parquet', 'parquet', 'tau.metrics.scalar.v2', 'r1', "
                 "'2025-01-02T00:00:00Z')")
    conn.commit()
    conn.close()
    store = ExperimentStore.open(root)
    sums = {s["metric_name"]: s for s in store.summaries(["r1"])}
    assert (sums["loss"]["count"], sums["loss"]["non_finite_count"], sums["loss"]["latest_step"]) == (3, 1, 1)
    assert sums["loss"]["latest_value"] == 0.5 and sums["acc"]["latest_value"] == 0.7
    assert any("skipped unreadable metric file metrics/missing.parquet" in w for w in store.warnings)
    assert store.run("r1").success_reasons == ["loss has 1 non-finite values"]


def test_v5_store_with_metric_files_migrates_to_v6_and_charts_read_the_raw_history(tmp_path, write_history):
    """A v5 store (no display copies) opens as v6; its charts come from the raw files, and a new
    import into it gets a display copy."""
    from taugrid_portal.stellar.snapshot import build_snapshot
    from taugrid_portal.store.writes import import_jsonl

    root = tmp_path / "v5"
    store, _ = ExperimentStore.init(root, project="legacy")
    import_jsonl(store, run="old", history=[str(write_history(tmp_path / "old.jsonl", steps=500))], experiment="e")
    before = build_snapshot(store, "e", max_points=40)
    store.close()
    # turn it back into what expstore.v5 wrote: no metric_display table, v5 in manifest and index
    conn = sqlite3.connect(root / "index.sqlite")
    conn.execute("DROP TABLE metric_display")
    conn.execute("UPDATE schema_meta SET value = 'expstore.v5' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    manifest = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**manifest, "schema_version": "expstore.v5"}))

    store = ExperimentStore.open(root)
    assert store.warnings == ["migrated experiment store schema: expstore.v5 -> expstore.v6, expstore.v6 -> expstore.v7"]
    assert json.loads((root / "manifest.json").read_text())["schema_version"] == "expstore.v7"
    assert store.query("SELECT COUNT(*) AS n FROM metric_display") == [{"n": 0}]
    after = build_snapshot(store, "e", max_points=40)
    assert after["charts"] == before["charts"]
    import_jsonl(store, run="new", history=[str(write_history(tmp_path / "new.jsonl", steps=500))], experiment="e")
    assert store.query("SELECT DISTINCT run_id FROM metric_display") == [{"run_id": "new"}]
    store.close()
