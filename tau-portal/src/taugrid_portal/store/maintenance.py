"""Store upkeep: schema migration, summary backfill and crash repair (a mixin of :class:`ExperimentStore`)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau_core.errors import ConfigError

from . import schema
from ._util import STAGING_DIR, atomic_write_json, now_text, pid_alive
from .layout import APPEND_LOG, ARTIFACTS, INDEX, MANIFEST, METRICS, PLACING
from .lock import WriterLock


class StoreMaintenance:
    """Migration, backfill and repair; needs the store's root, connection, lock and read helpers."""

    root: Path
    manifest: dict[str, Any]
    _conn: sqlite3.Connection
    _mutex: threading.RLock
    lock: WriterLock
    warnings: list[str]

    if TYPE_CHECKING:  # defined by ``ExperimentStore``, which combines this mixin
        def query(self, sql: str, params: Any = ()) -> list[dict[str, Any]]: ...

        def _metric_path(self, rel: str) -> Path: ...

        @staticmethod
        def _read_manifest(root: Path) -> dict[str, Any]: ...

    def _migrate(self) -> None:
        with self.lock:
            manifest = self._read_manifest(self.root)
            version = str(manifest.get("schema_version", ""))
            if version == schema.SCHEMA_VERSION:
                self.manifest = manifest
                return
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                steps = schema.apply(conn, version)
                # mirrors written by older releases are committed history: record their sizes so
                # crash repair never trims them
                log_dir = self.root / APPEND_LOG
                if log_dir.is_dir():
                    conn.executemany(
                        "INSERT OR IGNORE INTO append_log_offsets(name, size) VALUES (?, ?)",
                        [(p.name, p.stat().st_size) for p in sorted(log_dir.glob("*.jsonl"))],
                    )
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                conn.execute("ROLLBACK")
                raise ConfigError(
                    f"migrate experiment store {self.root} {version or 'expstore.v0'} -> {schema.SCHEMA_VERSION}: "
                    f"{exc}",
                    hint="the store was left unchanged; restore it from a copy or report the problem",
                ) from None
            for d in (APPEND_LOG, METRICS, ARTIFACTS):
                (self.root / d).mkdir(exist_ok=True)
            manifest.update(
                schema_version=schema.SCHEMA_VERSION, kind=schema.STORE_KIND, updated_at=now_text(),
                index=INDEX, append_log_dir=APPEND_LOG, metrics_dir=METRICS, artifacts_dir=ARTIFACTS,
            )
            manifest.setdefault("project", "")
            manifest.setdefault("experiment_id", "")
            manifest.setdefault("created_at", manifest["updated_at"])
            atomic_write_json(self.root / MANIFEST, manifest)
            self.manifest = manifest
            self.warnings.append(f"migrated experiment store schema: {', '.join(steps) or 'tables refreshed'}")
            self.ensure_summaries(wait=True)

    def ensure_summaries(self, *, wait: bool = False) -> list[str]:
        """Summarize metric files that have no summary yet (files from older writers or stores).

        Takes the writer lock; when another writer holds it and ``wait`` is false, the backfill is
        skipped with a warning instead of failing the read.  Returns the warnings.
        """
        pending = self.query(
            "SELECT file_id FROM metric_files WHERE file_id NOT IN (SELECT file_id FROM metric_summary_files) LIMIT 1")
        if not pending:
            return []
        if not wait and not self.lock.try_acquire():
            warning = "metric summary backfill skipped because the experiment store writer lock is busy"
            self.warnings.append(warning)
            return [warning]
        if wait:
            self.lock.acquire()
        try:
            return self._backfill_summaries()
        finally:
            self.lock.release()

    def _backfill_summaries(self) -> list[str]:
        import polars as pl

        from .summaries import fold_file_summaries, summarize_frame

        warnings: list[str] = []
        files = self.query(
            "SELECT * FROM metric_files WHERE file_id NOT IN (SELECT file_id FROM metric_summary_files) "
            "ORDER BY created_at, file_id")
        with self._mutex:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for f in files:
                    if f["format"] != "parquet":
                        warnings.append(f"metric summary backfill skipped non-parquet metric file {f['path']}")
                        continue
                    try:
                        df = pl.read_parquet(self._metric_path(f["path"]),
                                             columns=["metric_name", "step", "wall_time", "value"])
                    except (OSError, ConfigError) as exc:
                        warnings.append(f"metric summary backfill skipped unreadable metric file {f['path']}: {exc}")
                        continue
                    except Exception as exc:  # a corrupt or foreign Parquet file
                        warnings.append(f"metric summary backfill skipped unparsable metric file {f['path']}: {exc}")
                        continue
                    frame = df.select(
                        pl.col("metric_name").cast(pl.String).str.strip_chars(), pl.col("step").cast(pl.Int64),
                        pl.col("wall_time").cast(pl.Datetime("us")).dt.epoch("us").alias("wall_time_us"),
                        pl.col("value").cast(pl.Float64),
                    ).filter(pl.col("metric_name") != "")
                    summaries = {k: v for k, v in summarize_frame(frame).items()}
                    fold_file_summaries(self._conn, run_id=f["run_id"], project=f["project"],
                                        run_group_id=f["run_group_id"], file_id=f["file_id"],
                                        created_at=f["created_at"], summaries=summaries, summarized_at=now_text())
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        self.warnings.extend(warnings)
        return warnings

    def _repair(self, *, full: bool = False) -> list[str]:
        """Undo what a killed writer left behind (called with the writer lock held); returns what was removed.

        Staged files of dead writers go; when a dead writer was placing files (its ``-placing``
        marker remains), or with ``full`` (``experiment fsck``), every placed file the index does
        not reference goes too (:func:`orphans`).
        """
        removed: list[str] = []
        staging = self.root / STAGING_DIR
        if staging.is_dir():
            for entry in staging.iterdir():
                pid_text = entry.name.split("-", 1)[0]
                if not pid_text.isdigit() or not pid_alive(int(pid_text)):
                    full = full or entry.name.endswith("-" + PLACING)
                    removed.append(entry.relative_to(self.root).as_posix())
                    if entry.is_dir():
                        shutil.rmtree(entry, ignore_errors=True)
                    else:
                        entry.unlink(missing_ok=True)
        if full:
            for rel in self.orphans():
                (self.root / rel).unlink(missing_ok=True)
                removed.append(rel)
        committed = {r["name"]: r["size"] for r in self.query("SELECT name, size FROM append_log_offsets")}
        log_dir = self.root / APPEND_LOG
        if log_dir.is_dir():
            for path in log_dir.glob("*.jsonl"):
                size = committed.get(path.name)
                if size is None:
                    path.unlink(missing_ok=True)
                elif path.stat().st_size > size:
                    os.truncate(path, size)
        return removed

    def orphans(self) -> list[str]:
        """Placed files the index does not reference: metric files and imported history copies."""
        known = {r["path"] for r in self.query("SELECT path FROM metric_files")}
        known |= {r["uri"] for r in self.query("SELECT uri FROM artifacts")}
        found = [p for p in (self.root / METRICS).rglob("*") if p.is_file() and not p.is_symlink()]
        found += [p for p in (self.root / ARTIFACTS).glob("*/jsonl/*") if p.is_file() and not p.is_symlink()]
        return sorted(rel for rel in (p.relative_to(self.root).as_posix() for p in found) if rel not in known)

    def fsck(self) -> list[str]:
        """Recover under the writer lock: remove dead writers' staged files and every unreferenced placed file."""
        with self._mutex, self.lock:
            return self._repair(full=True)
