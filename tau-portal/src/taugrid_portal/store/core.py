"""The :class:`ExperimentStore`: opening, reading and the write transaction."""

from __future__ import annotations

import difflib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from tau_core.errors import ConfigError, ConflictError, NotFoundError, TauError, UsageError

from . import schema
from ._util import (
    atomic_write_json,
    inside,
    now_text,
    safe_segment,
    sha256_text,
)
from .layout import APPEND_LOG, ARTIFACTS, INDEX, MANIFEST, METRICS, MIRRORS, PLACING  # noqa: F401
from .lifecycle import MetricFilter, classify
from .lock import WriterLock
from .maintenance import StoreMaintenance
from .records import RunRow, converter
from .transaction import Transaction

RUN_COLUMNS = [c for c, _ in schema.TABLES["runs"]]
ARTIFACT_COLUMNS = [c for c, _ in schema.TABLES["artifacts"]]
SUMMARY_COLUMNS = [c for c, _ in schema.TABLES["metric_summaries"]]


@attrs.define(kw_only=True)
class RunRecord:
    """One run as the read API returns it (the ``runs`` row plus tags, metrics and lifecycle)."""

    run_id: str
    project: str
    experiment_id: str = ""
    run_group_id: str
    state: str
    created_at: str
    parent_run_id: str | None = None
    owner: str | None = None
    started_at: str | None = None
    completed_at: str | None = None
    config_hash: str | None = None
    code_sha: str | None = None
    image_digest: str | None = None
    tau_command: str | None = None
    result_uri: str | None = None
    index_version: str = schema.SCHEMA_VERSION
    tags: dict[str, str] = attrs.Factory(dict)
    metric_names: list[str] = attrs.Factory(list)
    lifecycle_state: str = "pending"
    successful: bool = False
    success_reasons: list[str] = attrs.Factory(list)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunRecord:
        """The read model of a ``runs`` row (through the typed :class:`RunRow`)."""
        return cls(**RunRow.from_row(row).to_row())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = converter().unstructure(self)
        return out


@attrs.define
class Target:
    """What a name resolved to: ``type`` is ``run_group``, ``run`` or ``experiment``."""

    name: str
    type: str
    id: str
    run_ids: list[str]
    project: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = converter().unstructure(self)
        return out


def _chunks(items: Sequence[str], size: int = 900) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class ExperimentStore(StoreMaintenance):
    """A local experiment store (see the package docstring for the read API)."""

    def __init__(self, root: Path, manifest: dict[str, Any], conn: sqlite3.Connection) -> None:
        self.root = root
        self.manifest = manifest
        self._conn = conn
        self._mutex = threading.RLock()
        self.lock = WriterLock(root)
        self.warnings: list[str] = []

    # -- construction ------------------------------------------------------------------
    @staticmethod
    def _connect(root: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(root / INDEX, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    @staticmethod
    def _read_manifest(root: Path) -> dict[str, Any]:
        path = root / MANIFEST
        if not path.exists():
            raise NotFoundError(
                f"experiment store {root} has no {MANIFEST}",
                hint=f"create it with `taugrid-portal experiment init NAME --store {root}`",
            )
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: cannot read the store manifest ({exc})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the store manifest must be a JSON object")
        if data.get("kind", schema.STORE_KIND) != schema.STORE_KIND:
            raise ConfigError(f"{path}: unsupported experiment store kind {data.get('kind')!r}")
        schema.version_index(str(data.get("schema_version", "")))
        return data

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> ExperimentStore:
        """Open an existing store, migrating an older schema forward (under the writer lock)."""
        root = Path(path).expanduser().absolute()
        if not root.is_dir():
            raise NotFoundError(
                f"experiment store {root} does not exist",
                hint=f"create it with `taugrid-portal experiment init NAME --store {root}`",
            )
        manifest = cls._read_manifest(root)
        if not (root / INDEX).exists() and manifest.get("schema_version") == schema.SCHEMA_VERSION:
            raise ConfigError(f"experiment store {root} has a manifest but no {INDEX}",
                              hint="the store is damaged; restore it from a copy")
        try:
            conn = cls._connect(root)
            found = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.Error as exc:
            raise TauError(f"cannot open the index of experiment store {root}: {exc}",
                           hint="check that the directory is readable and writable (SQLite WAL needs both)") from None
        if manifest.get("schema_version") == schema.SCHEMA_VERSION and not {"runs", "metric_files"} <= found:
            conn.close()
            raise ConfigError(f"experiment store {root}: {INDEX} is empty or damaged (its tables are missing)",
                              hint="the store is damaged; restore it from a copy")
        store = cls(root, manifest, conn)
        if manifest.get("schema_version") != schema.SCHEMA_VERSION:
            store._migrate()
        return store

    @classmethod
    def init(cls, path: str | os.PathLike[str], *, project: str) -> tuple[ExperimentStore, bool]:
        """Create a store (or attach to an existing one); returns ``(store, created)``."""
        root = Path(path).expanduser().absolute()
        if root.exists() and not root.is_dir():
            raise UsageError(f"experiment store path {root} exists and is not a directory")
        root.mkdir(parents=True, exist_ok=True)
        with WriterLock(root):
            created = not (root / MANIFEST).exists()
            if created:
                ts = now_text()
                manifest = {
                    "schema_version": schema.SCHEMA_VERSION, "kind": schema.STORE_KIND, "project": project,
                    "experiment_id": "", "created_at": ts, "updated_at": ts, "index": INDEX,
                    "append_log_dir": APPEND_LOG, "metrics_dir": METRICS, "artifacts_dir": ARTIFACTS,
                }
                for d in (APPEND_LOG, METRICS, ARTIFACTS):
                    (root / d).mkdir(exist_ok=True)
                conn = cls._connect(root)
                conn.execute("BEGIN IMMEDIATE")
                schema.apply(conn, schema.SCHEMA_VERSION)
                conn.execute("COMMIT")
                atomic_write_json(root / MANIFEST, manifest)
                return cls(root, manifest, conn), True
        return cls.open(root), False

    def close(self) -> None:
        with self._mutex:
            self._conn.close()

    def __enter__(self) -> ExperimentStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- identity ----------------------------------------------------------------------
    @property
    def project(self) -> str:
        return str(self.manifest.get("project") or "")

    @property
    def source_store_id(self) -> str:
        ident = {k: self.manifest.get(k) for k in ("schema_version", "kind", "project", "created_at")}
        return "tau-exp-" + sha256_text(json.dumps(ident, sort_keys=True, separators=(",", ":")))[:16]

    # -- low-level reads ---------------------------------------------------------------
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._mutex:
            cur = self._conn.execute(sql, list(params))
            rows = cur.fetchall()
            cols = [d[0] for d in cur.description] if cur.description else []
            return [dict(zip(cols, r, strict=True)) for r in rows]

    def _in(self, sql_prefix: str, ids: Sequence[str], suffix: str = "",
            params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for chunk in _chunks(list(ids)):
            out.extend(self.query(f"{sql_prefix} ({', '.join('?' * len(chunk))}) {suffix}", [*chunk, *params]))
        return out

    # -- read API ------------------------------------------------------------------------
    def run_ids(self) -> list[str]:
        return [r["run_id"] for r in self.query("SELECT run_id FROM runs ORDER BY run_id")]

    def tags_for(self, scope_type: str, ids: Sequence[str]) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {i: {} for i in ids}
        if len(ids) > 2000:
            rows = self.query("SELECT scope_id, key, value FROM tags WHERE scope_type = ?", [scope_type])
        else:
            rows = []
            for chunk in _chunks(list(ids)):
                rows.extend(self.query(
                    f"SELECT scope_id, key, value FROM tags WHERE scope_type = ? AND scope_id IN "
                    f"({', '.join('?' * len(chunk))})", [scope_type, *chunk]))
        for r in rows:
            if r["scope_id"] in out:
                out[r["scope_id"]][r["key"]] = r["value"]
        return out

    def summaries(self, run_ids: Sequence[str] | None = None, metric: str | None = None) -> list[dict[str, Any]]:
        """Per-(run, metric) summaries, ordered by run then metric name."""
        extra, params = ("AND metric_name = ?", [metric]) if metric else ("", [])
        if run_ids is None:
            return self.query(
                f"SELECT * FROM metric_summaries WHERE 1=1 {extra} ORDER BY run_id, metric_name", params
            )
        if len(run_ids) > 2000:
            wanted = set(run_ids)
            rows = self.query(f"SELECT * FROM metric_summaries WHERE 1=1 {extra} ORDER BY run_id, metric_name",
                              params)
            return [r for r in rows if r["run_id"] in wanted]
        rows = self._in("SELECT * FROM metric_summaries WHERE run_id IN", run_ids, extra, params)
        return sorted(rows, key=lambda r: (r["run_id"], r["metric_name"]))

    def _records(
        self,
        rows: list[dict[str, Any]],
        *,
        min_step: int | None = None,
        metric_filters: tuple[MetricFilter, ...] = (),
        summaries: list[dict[str, Any]] | None = None,
    ) -> list[RunRecord]:
        ids = [r["run_id"] for r in rows]
        tags = self.tags_for("run", ids)
        by_run: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
        for s in self.summaries(ids) if summaries is None else summaries:
            if s["run_id"] in by_run:
                by_run[s["run_id"]].append(s)
        out = []
        for r in rows:
            rid = r["run_id"]
            state, ok, reasons = classify(r, tags[rid], by_run[rid], min_step=min_step,
                                          metric_filters=metric_filters)
            rec = RunRecord.from_row(r)
            rec.tags = tags[rid]
            rec.metric_names = sorted(s["metric_name"] for s in by_run[rid])
            rec.lifecycle_state, rec.successful, rec.success_reasons = state, ok, reasons
            out.append(rec)
        return out

    def runs(
        self,
        experiment: str | None = None,
        group: str | None = None,
        *,
        project: str | None = None,
        run_ids: Sequence[str] | None = None,
        state: str | None = None,
        tags: dict[str, str] | None = None,
    ) -> list[RunRecord]:
        """Runs matching every given filter, newest first (``created_at DESC, run_id``)."""
        where, params = ["1=1"], []
        if experiment is not None:
            where.append("(experiment_id = ? OR (experiment_id = '' AND run_group_id = ?))")
            params += [experiment, experiment]
        if group is not None:
            where.append("run_group_id = ?")
            params.append(group)
        if project is not None:
            where.append("project = ?")
            params.append(project)
        if state is not None:
            where.append("lower(state) = ?")
            params.append(state.lower())
        for k, v in (tags or {}).items():
            where.append("run_id IN (SELECT scope_id FROM tags WHERE scope_type = 'run' AND key = ? AND value = ?)")
            params += [k, v]
        sql = f"SELECT * FROM runs WHERE {' AND '.join(where)}"
        if run_ids is not None:
            wanted = set(run_ids)
            rows = [r for r in self.query(sql, params) if r["run_id"] in wanted]
        else:
            rows = self.query(sql, params)
        rows.sort(key=lambda r: r["run_id"])
        rows.sort(key=lambda r: r["created_at"], reverse=True)
        return self._records(rows)

    def run(self, run_id: str) -> RunRecord:
        rows = self.query("SELECT * FROM runs WHERE run_id = ?", [run_id])
        if not rows:
            raise NotFoundError(f"run {run_id!r} was not found in {self.root}", hint=self._suggest(run_id, "run"))
        return self._records(rows)[0]

    def run_groups(self, project: str | None = None) -> list[dict[str, Any]]:
        if project:
            return self.query("SELECT * FROM run_groups WHERE project = ? ORDER BY run_group_id", [project])
        return self.query("SELECT * FROM run_groups ORDER BY run_group_id")

    def experiments(self, project: str | None = None) -> list[dict[str, Any]]:
        """Explicit experiments plus one implicit (``source: run_group``) per group of unassigned runs."""
        rows = self.query("SELECT * FROM experiments ORDER BY experiment_id")
        known = {r["experiment_id"] for r in rows}
        for g in self.query(
            "SELECT r.run_group_id, r.project, MIN(r.created_at) AS created_at, MAX(r.created_at) AS updated_at "
            "FROM runs r WHERE r.experiment_id = '' GROUP BY r.run_group_id, r.project ORDER BY r.run_group_id"
        ):
            if g["run_group_id"] in known:
                continue
            rows.append({
                "experiment_id": g["run_group_id"], "project": g["project"], "name": g["run_group_id"],
                "description": None, "source": "run_group", "created_at": g["created_at"],
                "updated_at": g["updated_at"],
            })
        if project:
            rows = [r for r in rows if r["project"] == project]
        return sorted(rows, key=lambda r: r["experiment_id"])

    def metric_names(self, run_ids: Sequence[str] | None = None) -> list[str]:
        if run_ids is None:
            return [r["metric_name"] for r in self.query(
                "SELECT DISTINCT metric_name FROM metric_summaries ORDER BY metric_name")]
        return sorted({r["metric_name"] for r in self._in(
            "SELECT DISTINCT metric_name FROM metric_summaries WHERE run_id IN", run_ids)})

    def metric_files(self, run_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        if run_ids is None:
            return self.query("SELECT * FROM metric_files ORDER BY created_at, file_id")
        rows = self._in("SELECT * FROM metric_files WHERE run_id IN", run_ids)
        return sorted(rows, key=lambda r: (r["created_at"], r["file_id"]))

    def display_series(self, run_ids: Sequence[str], level: int) -> dict[tuple[str, str], dict[str, Any]]:
        """Import-time display copies at ``level`` buckets (see :mod:`.display`), keyed by
        ``(run_id, metric_name)``: ``points`` plus the kept ``steps`` / ``values`` lists.

        Only runs whose sole metric file carries a copy are included: once a run has a second
        metric file, its series may span files and charts must read the raw history.
        """
        from .display import unpack_steps, unpack_values

        per_run: dict[str, list[str]] = {}
        for f in self.metric_files(run_ids):
            per_run.setdefault(f["run_id"], []).append(f["file_id"])
        single = {fids[0]: rid for rid, fids in per_run.items() if len(fids) == 1}
        if not single:
            return {}
        rows = self._in("SELECT file_id, metric_name, points, point_steps, point_values FROM metric_display "
                        "WHERE file_id IN", list(single), "AND level = ?", [level])
        return {
            (single[r["file_id"]], r["metric_name"]): {
                "points": r["points"], "steps": unpack_steps(r["point_steps"]),
                "values": unpack_values(r["point_values"]),
            }
            for r in rows if r["file_id"] in single
        }

    def series(
        self,
        run_ids: Sequence[str],
        metric: str,
        *,
        start_step: int | None = None,
        end_step: int | None = None,
    ) -> Any:
        """Raw points of ``metric`` for ``run_ids``: a polars frame ``run_id, step, value, wall_time``.

        Sorted by run id, then step, then write order (files by ``created_at``/``file_id``).
        ``wall_time`` is a UTC microsecond datetime (null when the source had no timestamp).
        """
        import polars as pl

        files = self.metric_files(run_ids)
        wanted = set(run_ids)
        paths = [self._metric_path(f["path"]) for f in files if f["run_id"] in wanted]
        empty = pl.DataFrame(
            schema={"run_id": pl.String, "step": pl.Int64, "value": pl.Float64,
                    "wall_time": pl.Datetime("us", "UTC")}
        )
        if not paths:
            return empty
        frames = []
        for order, path in enumerate(paths):
            lf = pl.scan_parquet(path).filter(pl.col("metric_name") == metric)
            if start_step is not None:
                lf = lf.filter(pl.col("step") >= start_step)
            if end_step is not None:
                lf = lf.filter(pl.col("step") <= end_step)
            frames.append(
                lf.select(
                    pl.col("run_id").cast(pl.String), pl.col("step"), pl.col("value"),
                    pl.col("wall_time").cast(pl.Datetime("us", "UTC")),
                ).with_columns(pl.lit(order).alias("_file"))
            )
        df = pl.concat(frames).collect()
        if df.height == 0:
            return empty
        df = df.filter(pl.col("run_id").is_in(list(wanted)))
        return df.with_row_index("_ord").sort(["run_id", "step", "_file", "_ord"], nulls_last=False).drop(
            "_ord", "_file"
        )

    def artifacts(self, run_id: str) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM artifacts WHERE run_id = ? ORDER BY created_at, artifact_id", [run_id])

    def artifact(self, artifact_id: str) -> dict[str, Any]:
        rows = self.query("SELECT * FROM artifacts WHERE artifact_id = ?", [artifact_id])
        if not rows:
            raise NotFoundError(f"artifact {artifact_id!r} was not found in {self.root}")
        return rows[0]

    def artifact_path(self, artifact_id: str) -> Path:
        """The local file behind an artifact stored inside the store; never a path outside the root."""
        art = self.artifact(artifact_id)
        ref = art.get("durable_ref") or art.get("uri") or ""
        if ref.startswith("file://"):
            ref = ref[len("file://"):]
        candidate = Path(ref) if os.path.isabs(ref) else self.root / ref
        if not inside(self.root, candidate):
            raise UsageError(f"artifact {artifact_id!r} path escapes the experiment store root",
                             hint="only files copied into the store's artifacts/ directory can be read")
        if not candidate.is_file():
            raise NotFoundError(f"artifact {artifact_id!r} has no file at {candidate}")
        return candidate

    def configs(self, run_id: str) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM configs WHERE run_id = ? ORDER BY config_hash", [run_id])

    def run_context(self, run_id: str) -> dict[str, Any] | None:
        rows = self.query("SELECT * FROM run_context WHERE run_id = ?", [run_id])
        return rows[0] if rows else None

    def events(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        return sorted(self._in("SELECT * FROM events WHERE run_id IN", run_ids), key=lambda r: (r["time"],
                                                                                             r["event_id"]))

    def observations(self, scope_type: str | None = None, scope_id: str | None = None) -> list[dict[str, Any]]:
        if scope_type and scope_id:
            return self.query("SELECT * FROM observations WHERE scope_type = ? AND scope_id = ? ORDER BY created_at",
                              [scope_type, scope_id])
        return self.query("SELECT * FROM observations ORDER BY created_at")

    def counts(self, run_ids: Sequence[str]) -> dict[str, int]:
        """Evidence counts over ``run_ids`` (configs, metric files, artifacts, observations)."""
        ids = list(run_ids)
        return {
            "runs": len(ids),
            "groups": len({r["run_group_id"] for r in self._in("SELECT run_group_id FROM runs WHERE run_id IN",
                                                                  ids)}),
            "configs": len(self._in("SELECT config_hash FROM configs WHERE run_id IN", ids)),
            "metric_files": len(self._in("SELECT file_id FROM metric_files WHERE run_id IN", ids)),
            "artifacts": len(self._in("SELECT artifact_id FROM artifacts WHERE run_id IN", ids)),
            "observations": len(self._in("SELECT observation_id FROM observations WHERE scope_type = 'run' AND "
                                         "scope_id IN", ids)),
        }

    def _metric_path(self, rel: str) -> Path:
        path = self.root / rel
        if not inside(self.root, path):
            raise ConfigError(f"metric file path {rel!r} in {self.root} escapes the store root")
        return path

    def _suggest(self, name: str, kind: str | None = None) -> str:
        names: set[str] = set()
        if kind in (None, "run"):
            names.update(self.run_ids())
        if kind in (None, "run_group"):
            names.update(r["run_group_id"] for r in self.run_groups())
        if kind in (None, "experiment"):
            names.update(r["experiment_id"] for r in self.experiments())
        close = difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.5)
        if close:
            return "did you mean " + ", ".join(repr(c) for c in close) + "?"
        if names:
            return "list what exists with `taugrid-portal experiment list --kind runs|groups|experiments`"
        return "the store is empty; import history with `taugrid-portal experiment import jsonl`"

    def resolve_target(self, name: str) -> Target:
        """A name as a run group, then a run, then an experiment (the ``status`` order)."""
        groups = self.query("SELECT run_group_id, project FROM run_groups WHERE run_group_id = ? ORDER BY project",
                            [name])
        if len(groups) > 1 and not self.query("SELECT run_id FROM runs WHERE run_id = ?", [name]):
            raise UsageError(f"run group {name!r} exists in several projects: "
                             + ", ".join(g["project"] for g in groups),
                             hint="name a run or an experiment instead (run groups are scoped by project)")
        if groups:
            ids = [r["run_id"] for r in self.query(
                "SELECT run_id FROM runs WHERE run_group_id = ? AND project = ? ORDER BY created_at DESC, run_id",
                [name, groups[0]["project"]])]
            if ids:
                return Target(name, "run_group", name, ids, groups[0]["project"])
        run = self.query("SELECT run_id, project FROM runs WHERE run_id = ?", [name])
        if run:
            return Target(name, "run", name, [name], run[0]["project"])
        exp = [e for e in self.experiments() if e["experiment_id"] == name or e["name"] == name]
        if exp:
            eid = exp[0]["experiment_id"]
            ids = [r["run_id"] for r in self.query(
                "SELECT run_id FROM runs WHERE experiment_id = ? OR (experiment_id = '' AND run_group_id = ?) "
                "ORDER BY created_at DESC, run_id", [eid, eid])]
            return Target(name, "experiment", eid, ids, exp[0]["project"])
        if groups:
            return Target(name, "run_group", name, [], groups[0]["project"])
        raise NotFoundError(
            f"no experiment, run group or run named {name!r} in {self.root}", hint=self._suggest(name)
        )

    # -- writes ------------------------------------------------------------------------
    @contextmanager
    def writing(self) -> Iterator[Transaction]:
        """Hold the writer lock and an immediate SQLite transaction; undo everything on failure."""
        with self._mutex, self.lock:
            self._repair()
            txn = Transaction(self)
            sizes = {r["name"]: r["size"] for r in self.query("SELECT name, size FROM append_log_offsets")}
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield txn
                txn._append_mirrors()
                self._conn.execute("COMMIT")
                if txn.marker is not None:
                    txn.marker.unlink(missing_ok=True)
            except BaseException as exc:
                txn.rollback(sizes)
                if txn.marker is not None:
                    txn.marker.unlink(missing_ok=True)
                if isinstance(exc, sqlite3.Error):
                    raise TauError(f"experiment store {self.root}: index write failed ({exc}); nothing was changed",
                                   hint="retry the command; if it keeps failing, check disk space") from None
                if isinstance(exc, OSError):
                    raise TauError(f"experiment store {self.root}: write failed ({exc.strerror or exc}); "
                                   "nothing was changed", hint="check disk space and permissions") from None
                raise

    def check_idempotency(
        self, txn: Transaction, key: str, request_hash: str, *, command: str, target_type: str, target_id: str
    ) -> bool:
        """True when ``key`` already recorded this exact request; a different request is a conflict."""
        rows = txn.conn.execute("SELECT request_hash, command FROM idempotency_keys WHERE key = ?", [key]).fetchall()
        if rows:
            if rows[0][0] == request_hash:
                return True
            raise ConflictError(
                f"idempotency key {key!r} was used for a different request ({rows[0][1]})",
                hint="repeat the original request exactly, or choose a new --idempotency-key",
            )
        txn.insert("idempotency_keys", {
            "key": key, "command": command, "target_type": target_type, "target_id": target_id,
            "request_hash": request_hash, "created_at": now_text(),
        })
        return False

    def lookup_idempotency(self, key: str) -> dict[str, Any] | None:
        rows = self.query("SELECT * FROM idempotency_keys WHERE key = ?", [key])
        return rows[0] if rows else None

    def artifact_dir(self, run_id: str, *parts: str) -> Path:
        path = self.root / ARTIFACTS / safe_segment(run_id, what="run id")
        for p in parts:
            path = path / safe_segment(p, what="artifact path segment")
        return path
