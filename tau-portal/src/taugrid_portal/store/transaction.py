"""The write transaction: SQLite rows, staged files and append-log mirrors, undone together."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau_core.errors import ConflictError, UsageError

from ._util import STAGING_DIR, inside, now_text
from .layout import APPEND_LOG, PLACING

if TYPE_CHECKING:
    from .core import ExperimentStore


def _row_dict(cursor: sqlite3.Cursor, row: Any) -> dict[str, Any]:
    return {d[0]: row[i] for i, d in enumerate(cursor.description)}


class Transaction:
    """What one write does, so that a failure can undo all of it.

    SQLite rows are inserted inside ``BEGIN IMMEDIATE``; files are staged outside the store's
    visible directories and renamed into place just before the commit; mirror lines are
    appended last and their committed sizes stored in the same SQLite transaction.
    """

    def __init__(self, store: ExperimentStore) -> None:
        self.store = store
        self.conn = store._conn
        self.placed: list[Path] = []
        self.marker: Path | None = None  # .staging/<pid>-placing while placed files await the commit
        self.mirror_lines: dict[str, list[str]] = {}
        self.created: list[str] = []
        self._ts: str | None = None

    @property
    def ts(self) -> str:
        """This write's timestamp: now, but strictly after every metric file already recorded."""
        if self._ts is None:
            from datetime import timedelta

            from ._util import fmt_time, parse_time

            ts = now_text()
            last = self.conn.execute("SELECT MAX(created_at) FROM metric_files").fetchone()[0]
            if last and last >= ts:
                ts = fmt_time(parse_time(last) + timedelta(microseconds=1))
            self._ts = ts
        return self._ts

    # -- rows --------------------------------------------------------------------------
    def mirror(self, table: str, row: dict[str, Any]) -> None:
        self.mirror_lines.setdefault(table, []).append(json.dumps(row, sort_keys=True, default=str))

    def insert(self, table: str, row: dict[str, Any]) -> None:
        cols = list(row)
        self.conn.execute(
            f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [row[c] for c in cols],
        )
        self.mirror(table, row)

    def ensure(
        self,
        table: str,
        key: dict[str, Any],
        row: dict[str, Any],
        *,
        what: str,
        ignore: Iterable[str] = (),
    ) -> bool:
        """Insert ``row`` unless a row with ``key`` exists; an existing row must match. True if inserted."""
        where = " AND ".join(f"{k} = ?" for k in key)
        cur = self.conn.execute(f"SELECT * FROM {table} WHERE {where}", list(key.values()))
        existing = cur.fetchone()
        if existing is None:
            self.insert(table, row)
            return True
        current = _row_dict(cur, existing)
        skip = set(ignore)
        diffs = [c for c, v in row.items() if c not in skip and current.get(c) != v]
        if diffs:
            raise ConflictError(
                f"{what} already exists with different metadata ({', '.join(sorted(diffs))} differ)",
                hint="records are insert-only; use a new name, or repeat the original request exactly",
            )
        return False

    # -- files -------------------------------------------------------------------------
    def staging_path(self, name: str) -> Path:
        directory = self.store.root / STAGING_DIR
        directory.mkdir(exist_ok=True)
        return directory / f"{os.getpid()}-{name}"

    def place(self, staged: Path, final: Path) -> None:
        """Rename a fully written staged file to its final place (undone if the write fails)."""
        if not inside(self.store.root, final.parent if final.parent.exists() else self.store.root):
            raise UsageError(f"path {final} escapes the experiment store root")
        final.parent.mkdir(parents=True, exist_ok=True)
        if not inside(self.store.root, final):
            raise UsageError(f"path {final} escapes the experiment store root")
        if self.marker is None:  # a writer killed from here to the commit leaves placed, unindexed files
            self.marker = self.staging_path(PLACING)
            self.marker.touch()
        os.replace(staged, final)
        self.placed.append(final)

    # -- commit / rollback ---------------------------------------------------------------
    def _append_mirrors(self) -> None:
        log_dir = self.store.root / APPEND_LOG
        log_dir.mkdir(exist_ok=True)
        for table, lines in self.mirror_lines.items():
            path = log_dir / f"{table}.jsonl"
            with open(path, "ab") as fh:
                fh.write(("\n".join(lines) + "\n").encode("utf-8"))
                fh.flush()
                size = fh.tell()
            self.conn.execute(
                "INSERT OR REPLACE INTO append_log_offsets(name, size) VALUES (?, ?)", (f"{table}.jsonl", size)
            )

    def rollback(self, mirror_sizes: dict[str, int]) -> None:
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        for path in reversed(self.placed):
            path.unlink(missing_ok=True)
        log_dir = self.store.root / APPEND_LOG
        for table in self.mirror_lines:
            path = log_dir / f"{table}.jsonl"
            size = mirror_sizes.get(f"{table}.jsonl")
            if not path.exists():
                continue
            if size is None:
                path.unlink(missing_ok=True)
            elif path.stat().st_size > size:
                os.truncate(path, size)
