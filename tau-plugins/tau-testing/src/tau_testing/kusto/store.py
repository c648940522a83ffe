"""The loopback Kusto endpoint's tables: rows in SQLite, one SQLite table per Kusto table.

Each Kusto table keeps its column list (name, Kusto type), its JSON ingestion mappings, and its extents'
``ingest-by:`` tags (what ``ingestIfNotExists`` checks).  Values are stored as SQLite scalars: ``datetime`` as
normalised RFC3339 text (``...T12:00:00.000000Z``, so text order is time order), ``dynamic`` as JSON text,
``bool`` as 0/1.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

SQL_TYPES = {"string": "TEXT", "long": "INTEGER", "int": "INTEGER", "real": "REAL", "double": "REAL",
             "datetime": "TEXT", "dynamic": "TEXT", "bool": "INTEGER", "guid": "TEXT", "timespan": "TEXT"}


class KustoFakeError(Exception):
    """A request the endpoint refuses: ``code`` is the Kusto error code, the message says why."""

    def __init__(self, message: str, code: str = "BadRequest_SyntaxError", status: int = 400) -> None:
        super().__init__(message)
        self.code, self.status = code, status


def norm_time(value: Any) -> str | None:
    """RFC3339 text (or a datetime) as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        parsed = value
    else:
        text = str(value).strip()
        text = text[:-1] + "+00:00" if text.endswith("Z") else text
        frac = text.split(".", 1)
        if len(frac) == 2:  # Python accepts at most 6 fractional digits
            digits = "".join(ch for ch in frac[1] if ch.isdigit())
            text = frac[0] + "." + digits[:6].ljust(6, "0") + frac[1][len(digits):]
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise KustoFakeError(f"cannot parse datetime {value!r}", "BadRequest_InvalidArgument") from None
    parsed = parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def to_cell(kusto_type: str, value: Any) -> Any:
    """A JSON value as the SQLite scalar of a column of ``kusto_type`` (None stays None)."""
    if value is None:
        return None
    if kusto_type == "datetime":
        return norm_time(value)
    if kusto_type == "dynamic":
        return json.dumps(value, separators=(",", ":"))
    if kusto_type in ("long", "int"):
        return int(value)
    if kusto_type in ("real", "double"):
        return float(value)
    if kusto_type == "bool":
        return 1 if value else 0
    return value if isinstance(value, str) else json.dumps(value)


def from_cell(kusto_type: str, value: Any) -> Any:
    """A SQLite scalar as the JSON value a v2 ``DataTable`` carries."""
    if value is None:
        return None
    if kusto_type == "dynamic":
        return json.loads(value) if isinstance(value, str) else value
    if kusto_type == "bool":
        return bool(value)
    return value


@attrs.define
class Table:
    name: str
    columns: list[tuple[str, str]]
    mappings: dict[str, list[dict[str, str]]] = attrs.Factory(dict)
    ingest_tags: set[str] = attrs.Factory(set)


def _matches(pattern: str, value: Any) -> int:
    """Kusto's ``matches regex`` (RE2; Python's ``re`` for the simple patterns Tau emits)."""
    return int(value is not None and re.search(pattern, str(value)) is not None)


class Store:
    """Kusto tables of one database over one SQLite connection (thread-safe: one lock)."""

    def __init__(self, path: str = ":memory:") -> None:
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.create_function("kql_matches_regex", 2, _matches, deterministic=True)
        self.lock = threading.RLock()
        self.tables: dict[str, Table] = {}

    def create_merge(self, name: str, columns: Sequence[tuple[str, str]]) -> Table:
        with self.lock:
            table = self.tables.get(name)
            if table is None:
                table = self.tables[name] = Table(name, [])
                self.db.execute(f'CREATE TABLE "{name}" (__extent TEXT)')
            known = {c for c, _ in table.columns}
            for col, kind in columns:
                if kind not in SQL_TYPES:
                    raise KustoFakeError(f"unknown column type {kind!r} for {name}.{col}")
                if col not in known:
                    self.db.execute(f'ALTER TABLE "{name}" ADD COLUMN "{col}" {SQL_TYPES[kind]}')
                    table.columns.append((col, kind))
                    known.add(col)
            self.db.commit()
            return table

    def table(self, name: str) -> Table:
        table = self.tables.get(name)
        if table is None:
            raise KustoFakeError(f"'{name}' could not be resolved to a table", "SEM0100", 400)
        return table

    def ingest(self, name: str, rows: Iterable[Mapping[str, Any]], *, mapping: Sequence[Mapping[str, str]] | None,
               extent: str, tags: Sequence[str] = (), if_not_exists: Sequence[str] = ()) -> int:
        """Append rows as one extent; skipped (0) when an ``ingest-by`` tag in ``if_not_exists`` is present."""
        with self.lock:
            table = self.table(name)
            if any(t in table.ingest_tags for t in if_not_exists):
                return 0
            paths = {m["column"]: m.get("path", f"$.{m['column']}").removeprefix("$.") for m in (mapping or [])}
            names = [c for c, _ in table.columns]
            values = []
            for row in rows:
                values.append([extent] + [to_cell(kind, row.get(paths.get(col, col))) for col, kind in table.columns])
            cols = ", ".join(['"__extent"'] + [f'"{c}"' for c in names])
            self.db.executemany(f'INSERT INTO "{name}" ({cols}) VALUES ({", ".join("?" * (len(names) + 1))})',
                                values)
            self.db.commit()
            table.ingest_tags.update(t.removeprefix("ingest-by:") for t in tags if t.startswith("ingest-by:"))
            return len(values)

    def rows(self, name: str) -> list[dict[str, Any]]:
        """Every row of a table as JSON values (for tests that inspect what was ingested)."""
        with self.lock:
            table = self.table(name)
            cur = self.db.execute(f'SELECT {", ".join(chr(34) + c + chr(34) for c, _ in table.columns)} FROM "{name}"')
            return [{c: from_cell(k, v) for (c, k), v in zip(table.columns, row, strict=True)} for row in cur]

    def sql(self, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self.lock:
            return list(self.db.execute(query, params))
