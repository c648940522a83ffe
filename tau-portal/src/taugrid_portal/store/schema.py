"""The SQLite index schema (``expstore.v7``) and the migration chain from older stores.

Opening a store applies, in order: the table DDL (``CREATE TABLE IF NOT EXISTS``), additive
column migrations (columns newer releases added to existing tables), the versioned
migrations from the manifest's version up to :data:`SCHEMA_VERSION`, and the indexes.
A store written by a *newer* release is refused with a hint to upgrade.
"""

from __future__ import annotations

import sqlite3

from tau_core.errors import ConfigError

SCHEMA_VERSION = "expstore.v7"
STORE_KIND = "tau.exp.store"
METRIC_SCHEMA_VERSION = "tau.metrics.scalar.v2"
METRIC_SCHEMA_COLUMNS = (
    "project", "run_group_id", "run_id", "metric_name", "step", "wall_time",
    "value", "unit", "source", "split", "tags",
)
VERSIONS = ("expstore.v0", "expstore.v1", "expstore.v2", "expstore.v3", "expstore.v4", "expstore.v5", "expstore.v6",
            "expstore.v7")

TABLES: dict[str, list[tuple[str, str]]] = {
    "schema_meta": [("key", "TEXT PRIMARY KEY"), ("value", "TEXT NOT NULL")],
    "idempotency_keys": [
        ("key", "TEXT PRIMARY KEY"), ("command", "TEXT NOT NULL"), ("target_type", "TEXT NOT NULL"),
        ("target_id", "TEXT NOT NULL"), ("request_hash", "TEXT NOT NULL"), ("created_at", "TEXT NOT NULL"),
    ],
    "run_groups": [
        ("run_group_id", "TEXT NOT NULL"), ("project", "TEXT NOT NULL"), ("name", "TEXT NOT NULL"),
        ("created_at", "TEXT NOT NULL"), ("updated_at", "TEXT NOT NULL"),
    ],
    "experiments": [
        ("experiment_id", "TEXT PRIMARY KEY"), ("project", "TEXT NOT NULL"), ("name", "TEXT NOT NULL"),
        ("description", "TEXT"), ("source", "TEXT NOT NULL"), ("created_at", "TEXT NOT NULL"),
        ("updated_at", "TEXT NOT NULL"),
    ],
    "runs": [
        ("run_id", "TEXT PRIMARY KEY"), ("project", "TEXT NOT NULL"),
        ("experiment_id", "TEXT NOT NULL DEFAULT ''"), ("run_group_id", "TEXT NOT NULL"),
        ("parent_run_id", "TEXT"), ("state", "TEXT NOT NULL"), ("owner", "TEXT"),
        ("created_at", "TEXT NOT NULL"), ("started_at", "TEXT"), ("completed_at", "TEXT"),
        ("config_hash", "TEXT"), ("code_sha", "TEXT"), ("image_digest", "TEXT"), ("tau_command", "TEXT"),
        ("result_uri", "TEXT"), ("index_version", "TEXT NOT NULL DEFAULT 'expstore.v7'"),
    ],
    "run_context": [
        ("run_id", "TEXT PRIMARY KEY"), ("cluster", "TEXT"), ("namespace", "TEXT"), ("team", "TEXT"),
        ("profile", "TEXT"), ("lane", "TEXT"), ("local_queue", "TEXT"), ("cluster_queue", "TEXT"),
        ("kueue_workload", "TEXT"), ("pod_uid", "TEXT"), ("ray_job", "TEXT"), ("resource_claims", "TEXT"),
        ("gpu_class", "TEXT"), ("gpu_count", "INTEGER"), ("node_names", "TEXT"), ("mounts", "TEXT"),
        ("queue_wait_seconds", "REAL"), ("gpu_hours", "REAL"), ("estimated_cost", "REAL"),
        ("runtime", "TEXT"), ("dependencies", "TEXT"), ("log_uri", "TEXT"),
    ],
    "configs": [
        ("config_hash", "TEXT NOT NULL"), ("run_id", "TEXT NOT NULL"), ("format", "TEXT NOT NULL"),
        ("uri", "TEXT NOT NULL"), ("normalized_json", "TEXT"), ("indexed_fields", "TEXT"),
    ],
    "artifacts": [
        ("artifact_id", "TEXT PRIMARY KEY"), ("run_id", "TEXT NOT NULL"), ("type", "TEXT NOT NULL"),
        ("uri", "TEXT NOT NULL"), ("name", "TEXT NOT NULL"), ("durable_ref", "TEXT"), ("content_type", "TEXT"),
        ("digest", "TEXT"), ("size_bytes", "INTEGER"), ("step", "INTEGER"), ("tags", "TEXT"), ("rank", "INTEGER"),
        ("created_at", "TEXT NOT NULL"), ("preview", "TEXT"), ("external_ref", "TEXT"), ("caption", "TEXT"),
        ("direction", "TEXT"), ("alias", "TEXT"), ("source_artifact_id", "TEXT"), ("source_run_id", "TEXT"),
        ("source_dataset_name", "TEXT"), ("source_dataset_version", "TEXT"), ("source_dataset_digest", "TEXT"),
    ],
    "events": [
        ("event_id", "TEXT PRIMARY KEY"), ("run_id", "TEXT NOT NULL"), ("time", "TEXT NOT NULL"),
        ("type", "TEXT NOT NULL"), ("source", "TEXT NOT NULL"), ("severity", "TEXT NOT NULL"),
        ("message", "TEXT NOT NULL"), ("payload", "TEXT"),
    ],
    "observations": [
        ("observation_id", "TEXT PRIMARY KEY"), ("idempotency_key", "TEXT"), ("author", "TEXT NOT NULL"),
        ("source", "TEXT NOT NULL"), ("type", "TEXT NOT NULL"), ("scope_type", "TEXT NOT NULL"),
        ("scope_id", "TEXT NOT NULL"), ("text", "TEXT NOT NULL"), ("evidence", "TEXT"),
        ("created_at", "TEXT NOT NULL"),
    ],
    "tags": [("scope_type", "TEXT NOT NULL"), ("scope_id", "TEXT NOT NULL"), ("key", "TEXT NOT NULL"),
             ("value", "TEXT NOT NULL")],
    "metric_files": [
        ("file_id", "TEXT PRIMARY KEY"), ("path", "TEXT NOT NULL"), ("format", "TEXT NOT NULL"),
        ("schema_version", "TEXT NOT NULL"), ("schema_hash", "TEXT"), ("project", "TEXT"),
        ("run_group_id", "TEXT"), ("run_id", "TEXT"), ("row_count", "INTEGER"), ("digest", "TEXT"),
        ("min_step", "INTEGER"), ("max_step", "INTEGER"), ("created_at", "TEXT NOT NULL"),
    ],
    "metric_summaries": [
        ("run_id", "TEXT NOT NULL"), ("metric_name", "TEXT NOT NULL"), ("project", "TEXT"),
        ("run_group_id", "TEXT"), ("count", "INTEGER NOT NULL"), ("finite_count", "INTEGER NOT NULL"),
        ("non_finite_count", "INTEGER NOT NULL"), ("min_step", "INTEGER"), ("max_step", "INTEGER"),
        ("latest_step", "INTEGER"), ("latest_wall_time", "INTEGER"), ("latest_value", "REAL"),
        ("min_value", "REAL"), ("max_value", "REAL"), ("updated_at", "TEXT NOT NULL"),
        ("latest_file_id", "TEXT"),
    ],
    "metric_summary_files": [
        ("file_id", "TEXT PRIMARY KEY"), ("run_id", "TEXT"), ("summarized_at", "TEXT NOT NULL"),
    ],
    # Display copies of imported series (derived data, see store/display.py): the points a
    # chart keeps at each power-of-two bucket level, packed little-endian int64 / float64.
    "metric_display": [
        ("file_id", "TEXT NOT NULL"), ("metric_name", "TEXT NOT NULL"), ("level", "INTEGER NOT NULL"),
        ("run_id", "TEXT NOT NULL"), ("points", "INTEGER NOT NULL"), ("point_steps", "BLOB NOT NULL"),
        ("point_values", "BLOB NOT NULL"),
    ],
    # Committed byte size of each append-log mirror: a writer killed between appending and
    # committing leaves extra bytes, which the next writer truncates away.
    "append_log_offsets": [("name", "TEXT PRIMARY KEY"), ("size", "INTEGER NOT NULL")],
}
PRIMARY_KEYS = {
    "run_groups": ("project", "run_group_id"),  # a group id is scoped by its project (expstore.v7)
    "configs": ("config_hash", "run_id"),
    "tags": ("scope_type", "scope_id", "key"),
    "metric_summaries": ("run_id", "metric_name"),
    "metric_display": ("file_id", "metric_name", "level"),
}
INDEXES = (
    "CREATE INDEX IF NOT EXISTS idx_runs_group ON runs(run_group_id)",
    "CREATE INDEX IF NOT EXISTS idx_runs_state ON runs(state)",
    "CREATE INDEX IF NOT EXISTS idx_runs_experiment ON runs(experiment_id)",
    "CREATE INDEX IF NOT EXISTS idx_runs_created ON runs(created_at)",
    "CREATE INDEX IF NOT EXISTS idx_experiments_project ON experiments(project)",
    "CREATE INDEX IF NOT EXISTS idx_metric_files_run ON metric_files(run_id)",
    "CREATE INDEX IF NOT EXISTS idx_metric_summaries_metric ON metric_summaries(metric_name)",
    "CREATE INDEX IF NOT EXISTS idx_metric_summaries_group ON metric_summaries(run_group_id)",
    "CREATE INDEX IF NOT EXISTS idx_artifacts_run ON artifacts(run_id)",
    "CREATE INDEX IF NOT EXISTS idx_events_run_time ON events(run_id, time)",
    "CREATE INDEX IF NOT EXISTS idx_observations_scope ON observations(scope_type, scope_id)",
    "CREATE INDEX IF NOT EXISTS idx_tags_kv ON tags(key, value)",
)


def table_sql(name: str) -> str:
    cols = [f"{col} {decl}" for col, decl in TABLES[name]]
    if name in PRIMARY_KEYS:
        cols.append(f"PRIMARY KEY ({', '.join(PRIMARY_KEYS[name])})")
    return f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(cols)})"


def version_index(version: str) -> int:
    """Position of ``version`` in the chain; ``''`` is v0; unknown-but-newer raises."""
    if version in ("", None):
        return 0
    if version in VERSIONS:
        return VERSIONS.index(version)
    raise ConfigError(
        f"experiment store schema {version!r} is not one this taugrid-portal understands "
        f"(it reads up to {SCHEMA_VERSION})",
        hint="the store was written by a newer taugrid-portal; upgrade with `pip install -U taugrid-portal`",
    )


def tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def apply(conn: sqlite3.Connection, from_version: str) -> list[str]:
    """Bring the index to :data:`SCHEMA_VERSION`; returns the migration steps applied.

    Runs inside the caller's transaction (the caller holds the writer lock).
    """
    start = version_index(from_version)
    for name in TABLES:
        conn.execute(table_sql(name))
    _additive_columns(conn)
    applied: list[str] = []
    for i in range(start, len(VERSIONS) - 1):
        step = _MIGRATIONS[i]
        step(conn)
        applied.append(f"{VERSIONS[i]} -> {VERSIONS[i + 1]}")
    for ddl in INDEXES:
        conn.execute(ddl)
    conn.executemany(
        "INSERT OR REPLACE INTO schema_meta(key, value) VALUES (?, ?)",
        [
            ("schema_version", SCHEMA_VERSION),
            ("metric_schema_version", METRIC_SCHEMA_VERSION),
            ("metric_schema_columns", ",".join(METRIC_SCHEMA_COLUMNS)),
        ],
    )
    return applied


def _additive_columns(conn: sqlite3.Connection) -> None:
    for table, spec in TABLES.items():
        have = set(columns(conn, table))
        for col, decl in spec:
            if col not in have:
                decl = decl.replace("PRIMARY KEY", "").replace("NOT NULL", "")
                if "DEFAULT" not in decl and col == "experiment_id":
                    decl += " NOT NULL DEFAULT ''"
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {col} {decl}")


def _drop_column(conn: sqlite3.Connection, table: str, column: str) -> None:
    if table in tables(conn) and column in columns(conn, table):
        for (index_name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name=? AND sql LIKE ?",
            (table, f"%{column}%"),
        ).fetchall():
            conn.execute(f"DROP INDEX IF EXISTS {index_name}")
        conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")


def _v0_to_v1(conn: sqlite3.Connection) -> None:
    """Drop the retired "hypothesis" axis."""
    for (index_name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='index' AND name LIKE 'idx_%hypothesis%'"
    ).fetchall():
        conn.execute(f"DROP INDEX IF EXISTS {index_name}")
    conn.execute("DROP TABLE IF EXISTS hypotheses")
    for table in sorted(tables(conn)):
        _drop_column(conn, table, "hypothesis_id")


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """Promote questions to experiments (source ``question``) linked through ``run_experiments``."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS run_experiments (run_id TEXT NOT NULL, experiment_id TEXT NOT NULL, "
        "PRIMARY KEY (run_id, experiment_id))"
    )
    have = tables(conn)
    if "questions" in have:
        qcols = set(columns(conn, "questions"))
        text = "text" if "text" in qcols else ("name" if "name" in qcols else "question_id")
        desc = "description" if "description" in qcols else "NULL"
        updated = "COALESCE(updated_at, created_at)" if "updated_at" in qcols else "created_at"
        conn.execute(
            "INSERT OR IGNORE INTO experiments(experiment_id, project, name, description, source, created_at, "
            f"updated_at) SELECT question_id, project, {text}, {desc}, 'question', created_at, {updated} "
            "FROM questions"
        )
    if "question_id" in columns(conn, "runs"):
        conn.execute(
            "INSERT OR IGNORE INTO run_experiments(run_id, experiment_id) SELECT run_id, question_id FROM runs "
            "WHERE question_id IS NOT NULL AND question_id != ''"
        )
    if "question_id" in columns(conn, "run_groups"):
        conn.execute(
            "INSERT OR IGNORE INTO run_experiments(run_id, experiment_id) SELECT r.run_id, g.question_id "
            "FROM runs r JOIN run_groups g ON g.run_group_id = r.run_group_id "
            "WHERE g.question_id IS NOT NULL AND g.question_id != ''"
        )
    conn.execute("DROP TABLE IF EXISTS questions")
    for table in sorted(tables(conn)):
        _drop_column(conn, table, "question_id")
    if "stellar_workspaces" in tables(conn):
        conn.execute("ALTER TABLE stellar_workspaces RENAME TO stellar_workspaces_v1")
        conn.execute(
            "CREATE TABLE stellar_workspaces AS SELECT * FROM stellar_workspaces_v1 WHERE rowid IN "
            "(SELECT MIN(rowid) FROM stellar_workspaces_v1 GROUP BY target, project, name)"
        )
        conn.execute("DROP TABLE stellar_workspaces_v1")
        conn.execute(
            "CREATE UNIQUE INDEX IF NOT EXISTS idx_stellar_workspaces_unique "
            "ON stellar_workspaces(target, project, name)"
        )


def _v2_to_v3(conn: sqlite3.Connection) -> None:
    """Give each run a single ``runs.experiment_id``."""
    if "run_experiments" in tables(conn):
        conn.execute(
            """
            UPDATE runs SET experiment_id = (
              SELECT re.experiment_id FROM run_experiments re
              LEFT JOIN experiments e ON e.experiment_id = re.experiment_id
              WHERE re.run_id = runs.run_id
              ORDER BY CASE WHEN COALESCE(e.source, '') = 'run_group' THEN 1 ELSE 0 END, re.experiment_id
              LIMIT 1)
            WHERE (experiment_id IS NULL OR experiment_id = '')
              AND EXISTS (SELECT 1 FROM run_experiments re WHERE re.run_id = runs.run_id)
            """
        )
        conn.execute("DROP TABLE run_experiments")
    conn.execute("UPDATE runs SET experiment_id = '' WHERE experiment_id IS NULL")
    _drop_column(conn, "run_groups", "experiment_id")


def _v3_to_v4(conn: sqlite3.Connection) -> None:
    """Replace ``stellar_workspaces`` with ``stellar_dashboards``."""
    conn.execute("DROP TABLE IF EXISTS stellar_workspaces")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS stellar_dashboards (dashboard_id TEXT PRIMARY KEY, target TEXT, "
        "target_type TEXT, project TEXT, name TEXT, description TEXT, pinned_metrics TEXT, sections TEXT, "
        "tags TEXT, is_default INTEGER, created_at TEXT, updated_at TEXT, created_by TEXT, "
        "UNIQUE(target, project, name))"
    )


def _v4_to_v5(conn: sqlite3.Connection) -> None:
    """No structural change: mutable Stellar UI state is retired, its rows are kept."""


def _v5_to_v6(conn: sqlite3.Connection) -> None:
    """Add ``metric_display`` (created by the table DDL).  Older metric files get no display
    copy: their charts keep reading the raw history, with the same result."""


def _v6_to_v7(conn: sqlite3.Connection) -> None:
    """Key run groups by ``(project, run_group_id)``: every project on a machine may have a group
    ``default`` (the local store is one store per machine)."""
    conn.execute("ALTER TABLE run_groups RENAME TO run_groups_v6")
    conn.execute(table_sql("run_groups"))
    conn.execute("INSERT INTO run_groups (run_group_id, project, name, created_at, updated_at) "
                 "SELECT run_group_id, project, name, created_at, updated_at FROM run_groups_v6")
    conn.execute("DROP TABLE run_groups_v6")


_MIGRATIONS = (_v0_to_v1, _v1_to_v2, _v2_to_v3, _v3_to_v4, _v4_to_v5, _v5_to_v6, _v6_to_v7)
