"""Run groups are scoped by project (issue 19, D13): one local store serves every project on a machine."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tau_core.errors import UsageError
from taugrid_portal.store import ExperimentStore
from taugrid_portal.store.writes import import_jsonl


def _history(path: Path, seed: int) -> str:
    path.write_text("".join(json.dumps({"_step": s, "loss": 1.0 / (1 + s + seed)}) + "\n" for s in range(5)))
    return str(path)


def test_three_projects_share_the_default_group_name(tmp_path: Path) -> None:
    store, _ = ExperimentStore.init(tmp_path / "store", project="quickstart")
    with store:
        for i, project in enumerate(("quickstart", "r2", "r3")):
            result = import_jsonl(store, run=f"{project}-run", history=[_history(tmp_path / f"{i}.jsonl", i)],
                                  project=project, group="default")
            assert result["rows"] == 5
        groups = store.query("SELECT project, run_group_id FROM run_groups ORDER BY project")
        assert groups == [{"project": p, "run_group_id": "default"} for p in ("quickstart", "r2", "r3")]
        runs = store.query("SELECT run_id, project, run_group_id FROM runs ORDER BY run_id")
        assert [(r["project"], r["run_group_id"]) for r in runs] == [("quickstart", "default"), ("r2", "default"),
                                                                     ("r3", "default")]
        assert store.resolve_target("r2-run").project == "r2"
        with pytest.raises(UsageError, match="several projects: quickstart, r2, r3"):
            store.resolve_target("default")


def test_a_v6_store_migrates_and_then_accepts_a_second_project(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store, _ = ExperimentStore.init(root, project="quickstart")
    with store:
        import_jsonl(store, run="q-run", history=[_history(tmp_path / "a.jsonl", 0)], project="quickstart")
    # turn the index back into what expstore.v6 wrote: run_group_id alone is the key
    conn = sqlite3.connect(root / "index.sqlite")
    conn.executescript("""
        ALTER TABLE run_groups RENAME TO g7;
        CREATE TABLE run_groups (run_group_id TEXT PRIMARY KEY, project TEXT NOT NULL, name TEXT NOT NULL,
                                 created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
        INSERT INTO run_groups SELECT run_group_id, project, name, created_at, updated_at FROM g7;
        DROP TABLE g7;
        UPDATE schema_meta SET value = 'expstore.v6' WHERE key = 'schema_version';
    """)
    conn.commit()
    conn.close()
    manifest = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**manifest, "schema_version": "expstore.v6"}))

    store = ExperimentStore.open(root)
    with store:
        assert store.warnings == ["migrated experiment store schema: expstore.v6 -> expstore.v7"]
        import_jsonl(store, run="r2-run", history=[_history(tmp_path / "b.jsonl", 1)], project="r2")
        assert len(store.query("SELECT * FROM run_groups WHERE run_group_id = 'default'")) == 2
