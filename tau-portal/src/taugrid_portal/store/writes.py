"""Write operations: ``init``, ``track``, ``import jsonl`` and telemetry-sink records.

Every write follows the same shape: heavy work (parsing, hashing, Parquet encoding, file
copies) happens outside the writer lock into ``.staging/``; then, under the lock and inside
one SQLite transaction, the idempotency key is checked, rows are ensured (insert-only, with
conflict detection), summaries are merged, staged files are renamed into place and the
transaction commits.  Any failure rolls the index back and removes the placed files.
"""

from __future__ import annotations

import glob
import json
import os
import secrets
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tau_core.errors import ConfigError, ConflictError, NotFoundError, TauError, UsageError

from . import schema
from ._util import (
    canonical_json,
    file_sha256,
    fmt_time,
    request_hash,
    safe_segment,
    validate_id,
)
from .core import ARTIFACTS, METRICS, ExperimentStore, Transaction
from .jsonl import FileStats, read_history
from .metricfile import SCHEMA_HASH, MetricFileWriter
from .summaries import fold_file_summaries

JSONL_IMPORTER = "tau.jsonl.import.v1"
TRACK_WRITER = "tau.exp.track.v0"
TERMINAL = ("succeeded", "failed", "cancelled", "completed", "success", "successful")
ARTIFACT_TYPES = {
    "png": "plot", "jpg": "plot", "jpeg": "plot", "svg": "plot", "gif": "plot",
    "mp4": "video", "mov": "video", "webm": "video",
    "pt": "checkpoint", "pth": "checkpoint", "ckpt": "checkpoint", "safetensors": "checkpoint",
    "log": "log", "txt": "log", "json": "manifest", "yaml": "manifest", "yml": "manifest",
    "csv": "table", "tsv": "table", "parquet": "table",
}


def expand_history(patterns: Sequence[str]) -> list[Path]:
    """Expand globs (a pattern with no match stays literal), make absolute, dedupe and sort."""
    out: set[Path] = set()
    for pattern in patterns:
        matches = glob.glob(os.path.expanduser(pattern), recursive=True)
        for m in matches or [os.path.expanduser(pattern)]:
            out.add(Path(m).absolute())
    paths = sorted(out)
    for p in paths:
        if not p.exists():
            raise NotFoundError(f"JSONL history file {p} does not exist",
                                hint="check the path or quote the glob so the shell does not expand it")
        if p.is_dir():
            raise UsageError(f"JSONL history path {p} is a directory", hint=f"pass '{p}/*.jsonl' instead")
    return paths


def _ensure_group(txn: Transaction, project: str, group: str, ts: str) -> None:
    """The run group ``(project, group)``: group ids are scoped by project, so every project may use ``default``."""
    row = txn.conn.execute("SELECT 1 FROM run_groups WHERE project = ? AND run_group_id = ?",
                           [project, group]).fetchone()
    if row is None:
        txn.insert("run_groups", {"run_group_id": group, "project": project, "name": group, "created_at": ts,
                                  "updated_at": ts})


def _ensure_identity(
    store: ExperimentStore,
    txn: Transaction,
    *,
    project: str,
    group: str,
    experiment: str | None,
    run: dict[str, Any],
    tags: dict[str, str],
    ts: str,
    mode: str = "strict",
) -> bool:
    """Ensure the run group, experiment, run and run tags; returns True when the run was created."""
    _ensure_group(txn, project, group, ts)
    if experiment:
        row = txn.conn.execute("SELECT experiment_id FROM experiments WHERE experiment_id = ?",
                               [experiment]).fetchone()
        if row is None:
            txn.insert("experiments", {"experiment_id": experiment, "project": project, "name": experiment,
                                       "description": None, "source": "run", "created_at": ts, "updated_at": ts})
    cur = txn.conn.execute("SELECT * FROM runs WHERE run_id = ?", [run["run_id"]])
    found = cur.fetchone()
    created = False
    if found is None:
        txn.insert("runs", run)
        created = True
    else:
        current = {d[0]: found[i] for i, d in enumerate(cur.description)}
        if mode == "strict":
            ignore = {"created_at", "started_at", "completed_at", "result_uri", "experiment_id", "index_version"}
            diffs = sorted(c for c, v in run.items() if c not in ignore and v is not None and current.get(c) != v)
            if diffs:
                raise ConflictError(
                    f"run {run['run_id']!r} already exists with different metadata ({', '.join(diffs)} differ)",
                    hint="records are insert-only; record the new attempt under a new run id",
                )
        if run.get("experiment_id") and current.get("experiment_id") not in ("", None, run["experiment_id"]):
            raise ConflictError(
                f"run {run['run_id']!r} already belongs to experiment {current['experiment_id']!r}",
                hint="a run belongs to one experiment; drop --experiment or use a new run id",
            )
        if run.get("experiment_id") and not current.get("experiment_id"):
            txn.conn.execute("UPDATE runs SET experiment_id = ? WHERE run_id = ?", [run["experiment_id"],
                                                                                    run["run_id"]])
            txn.mirror("runs", {**current, "experiment_id": run["experiment_id"]})
    for key, value in sorted(tags.items()):
        txn.ensure("tags", {"scope_type": "run", "scope_id": run["run_id"], "key": key},
                   {"scope_type": "run", "scope_id": run["run_id"], "key": key, "value": value},
                   what=f"tag run/{run['run_id']} {key!r}")
    return created


def _commit_metric_file(
    txn: Transaction,
    *,
    file_id: str,
    rel_path: str,
    staged: Path,
    digest: str,
    writer: MetricFileWriter,
    created_at: str,
    display: Sequence[dict[str, Any]] = (),
) -> bool:
    """Record a metric file, fold its summaries in and place it. False when it already existed."""
    row = {
        "file_id": file_id, "path": rel_path, "format": "parquet", "schema_version": schema.METRIC_SCHEMA_VERSION,
        "schema_hash": SCHEMA_HASH, "project": writer.project, "run_group_id": writer.run_group_id,
        "run_id": writer.run_id, "row_count": writer.rows, "digest": digest, "min_step": writer.min_step,
        "max_step": writer.max_step, "created_at": created_at,
    }
    inserted = txn.ensure("metric_files", {"file_id": file_id}, row, what=f"metric file {file_id!r}",
                          ignore=("created_at",))
    if not inserted:
        return False
    fold_file_summaries(txn.conn, run_id=writer.run_id, project=writer.project, run_group_id=writer.run_group_id,
                        file_id=file_id, created_at=created_at, summaries=writer.summaries)
    if display:  # derived data (rebuildable from the file), so not mirrored to the append log
        txn.conn.executemany(
            "INSERT INTO metric_display (file_id, metric_name, level, run_id, points, point_steps, point_values) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(file_id, d["metric_name"], d["level"], writer.run_id, d["points"], d["point_steps"],
              d["point_values"]) for d in display],
        )
    txn.place(staged, txn.store.root / rel_path)
    return True


def _staging(store: ExperimentStore, suffix: str) -> Path:
    directory = store.root / ".staging"
    directory.mkdir(exist_ok=True)
    return directory / f"{os.getpid()}-{secrets.token_hex(6)}{suffix}"


class _Producer:
    """Parse history files in a background thread, a couple of blocks ahead of the writer.

    Arrow's JSON reader and polars release the GIL, so parsing the next block overlaps with
    encoding the current one.  The queue is bounded, so memory stays a few blocks deep.
    """

    def __init__(self, store: ExperimentStore, files: Sequence[Path], *, step_field: str, time_field: str,
                 metric_prefix: str | None, copy: bool, tick: Callable[[int, Path], None]) -> None:
        import queue
        import threading

        self.store, self.files, self.copy, self.tick = store, list(files), copy, tick
        self.opts: dict[str, Any] = {"step_field": step_field, "time_field": time_field, "metric_prefix": metric_prefix}
        self.queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=2)
        self.copy_paths: list[Path] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tau-jsonl-parse", daemon=True)
        self._thread.start()

    def _put(self, item: tuple[str, Any]) -> bool:
        import queue

        while not self._stop.is_set():
            try:
                self.queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        from .summaries import summarize_frame, summarize_wide

        rows = 0
        try:
            for path in self.files:
                copy_path = _staging(self.store, "-" + path.name) if self.copy else None
                if copy_path is not None:
                    self.copy_paths.append(copy_path)
                before = _file_identity(path)
                gen = read_history(path, progress=lambda n, _p=path: self.tick(n, _p), **self.opts)
                while True:
                    if self._stop.is_set():
                        return
                    try:
                        block = next(gen)
                    except StopIteration as stop:
                        fstats = stop.value
                        break
                    if block.wide is not None:
                        summary = summarize_wide(block.wide, ordinal_offset=rows)
                        rows += block.wide.height
                    else:
                        summary = summarize_frame(block.frame, ordinal_offset=rows)
                        rows += block.frame.height
                    if not self._put(("block", (path, block, summary))):
                        return
                if copy_path is not None:
                    _copy_history(path, copy_path, before)
                if not self._put(("file", (fstats, copy_path))):
                    return
            self._put(("done", None))
        except BaseException as exc:  # handed to the consumer, which re-raises it
            self._put(("error", exc))

    def __iter__(self) -> Any:
        while True:
            kind, payload = self.queue.get()
            if kind == "done":
                return
            if kind == "error":
                raise payload
            yield kind, payload

    def stop(self) -> None:
        import queue

        self._stop.set()
        while self._thread.is_alive():
            try:
                self.queue.get(timeout=0.05)
            except queue.Empty:
                pass
        self._thread.join()


def _file_identity(path: Path) -> tuple[int, int, int, int]:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"cannot read JSONL history {path}: {exc.strerror or exc}") from None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _copy_history(path: Path, dest: Path, before: tuple[int, int, int, int]) -> None:
    """Copy a parsed history file into staging with an in-kernel copy (``copy_file_range``: no
    pass through Python buffers), then check that the file did not change since it was parsed,
    so the artifact holds exactly the bytes that were hashed and imported."""
    import shutil

    with open(path, "rb") as src, open(dest, "wb") as dst:
        size, offset = os.fstat(src.fileno()).st_size, 0
        try:
            while offset < size:
                n = os.copy_file_range(src.fileno(), dst.fileno(), size - offset, offset, offset)
                if n == 0:
                    break
                offset += n
        except OSError:  # a filesystem without copy_file_range: copy through a buffer
            src.seek(0)
            dst.seek(0)
            dst.truncate()
            shutil.copyfileobj(src, dst, 1 << 22)
    if _file_identity(path) != before:
        raise ConfigError(f"JSONL history {path} changed while it was being imported",
                          hint="import the file once its writer has finished (write to a temp file and rename it)")


def init_experiment(
    store: ExperimentStore,
    name: str,
    *,
    project: str,
    description: str | None = None,
    group: str = "default",
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    validate_id("experiment", name)
    validate_id("project", project)
    validate_id("group", group)
    req = request_hash({"command": "exp init", "name": name, "project": project, "description": description,
                        "group": group})
    with store.writing() as txn:
        if idempotency_key and store.check_idempotency(txn, idempotency_key, req, command="exp init",
                                                       target_type="experiment", target_id=name):
            return {"experiment_id": name, "project": project, "run_group_id": group, "reused": True,
                    "idempotency_key": idempotency_key}
        ts = txn.ts
        created = txn.ensure(
            "experiments", {"experiment_id": name},
            {"experiment_id": name, "project": project, "name": name, "description": description,
             "source": "explicit", "created_at": ts, "updated_at": ts},
            what=f"experiment {name!r}", ignore=("created_at", "updated_at"),
        )
        _ensure_group(txn, project, group, ts)
    return {"experiment_id": name, "project": project, "run_group_id": group, "reused": not created,
            "idempotency_key": idempotency_key}


def import_jsonl(
    store: ExperimentStore,
    *,
    run: str,
    history: Sequence[str],
    project: str | None = None,
    experiment: str | None = None,
    group: str = "default",
    owner: str = "jsonl-import",
    state: str = "succeeded",
    metric_prefix: str | None = None,
    source: str = "jsonl",
    tags: dict[str, str] | None = None,
    step_field: str = "_step",
    time_field: str = "_timestamp",
    idempotency_key: str | None = None,
    dry_run: bool = False,
    copy_history: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Import JSONL scalar history for one run (see :mod:`taugrid_portal.store.jsonl`)."""
    project = project or store.project or "default"
    validate_id("run", run)
    validate_id("project", project)
    validate_id("group", group)
    if experiment:
        validate_id("experiment", experiment)
    if not history:
        raise UsageError("at least one --history is required", hint="for example --history 'logs/*.jsonl'")
    tags = dict(tags or {})
    files = expand_history(history)
    total = sum(p.stat().st_size for p in files)
    done = 0

    def tick(n: int, _path: Path) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(str(_path), done, total)

    try:
        staged_parquet = None if dry_run else _staging(store, ".parquet")
    except OSError as exc:
        raise TauError(f"cannot write to experiment store {store.root}: {exc.strerror or exc}",
                       hint="check that the store directory is writable") from None
    writer = MetricFileWriter(staged_parquet, project=project, run_group_id=group, run_id=run, source=source,
                              keep_chunks=not dry_run)
    stats: list[FileStats] = []
    copies: list[tuple[FileStats, Path | None]] = []
    producer = _Producer(store, files, step_field=step_field, time_field=time_field, metric_prefix=metric_prefix,
                         copy=not (dry_run or not copy_history), tick=tick)
    try:
        for kind, payload in producer:
            if kind == "block":
                path, block, summary = payload
                row_tags = {**tags, "jsonl.history_file": path.name, "jsonl.history_path": str(path),
                            "jsonl.importer": JSONL_IMPORTER}
                writer.write(block.frame, row_tags, summary=summary, wide=block.wide)
            else:
                fstats, copy_path = payload
                stats.append(fstats)
                copies.append((fstats, copy_path))
        if writer.rows == 0:
            raise UsageError(
                "JSONL history files contain no scalar metrics",
                hint=f"rows need numeric values besides {step_field}/{time_field}, e.g. "
                '{"_step": 0, "loss": 1.0}',
            )
        req = request_hash({
            "importer": JSONL_IMPORTER, "metric_schema": schema.METRIC_SCHEMA_VERSION, "run_id": run,
            "project": project, "experiment_id": experiment or "", "run_group_id": group, "owner": owner,
            "state": state, "metric_prefix": metric_prefix or "", "source": source, "tags": tags,
            "step_field": step_field, "time_field": time_field,
            "history_files": [{"size_bytes": s.size_bytes, "sha256": s.sha256} for s in stats],
            "skip_artifacts": not copy_history,
        })
        key = idempotency_key or f"jsonl-{run}-{req[:12]}"
        rel_dir = f"{METRICS}/project={project}/experiment={experiment or 'none'}/group={group}/run={run}"
        file_id = f"jsonl-{run}-{req[:12]}"
        rel_path = f"{rel_dir}/jsonl-{req[:12]}.parquet"
        result: dict[str, Any] = {
            "action": "planned" if dry_run else "imported", "run_id": run, "project": project,
            "experiment_id": experiment or "", "run_group_id": group, "idempotency_key": key, "request_hash": req,
            "reused": False, "dry_run": dry_run,
            "history_files": [
                {"path": str(s.path), "size_bytes": s.size_bytes,
                 "mod_time": fmt_time(datetime.fromtimestamp(s.path.stat().st_mtime, UTC)), "sha256": s.sha256,
                 "scalar_rows": s.scalar_rows} for s in stats
            ],
            "metric_file": rel_path, "metric_file_id": file_id, "artifacts": [], "rows": writer.rows,
            "min_step": writer.min_step, "max_step": writer.max_step,
            "metric_names": sorted(writer.summaries),
        }
        if dry_run:
            prior = store.lookup_idempotency(key)
            if prior is not None:
                if prior["request_hash"] != req:
                    raise ConflictError(f"idempotency key {key!r} was used for a different request",
                                        hint="repeat the original request exactly, or choose a new key")
                result.update(action="reused", reused=True)
            return result
        digest = writer.close()
        assert digest is not None and writer.path is not None
        from .display import display_levels

        display = display_levels(writer.path, writer.summaries, writer.chunks)
        writer.chunks = None
        with store.writing() as txn:
            if store.check_idempotency(txn, key, req, command="exp import jsonl", target_type="run",
                                       target_id=run):
                result.update(action="reused", reused=True)
                return result
            ts = txn.ts
            run_row = {
                "run_id": run, "project": project, "experiment_id": experiment or "", "run_group_id": group,
                "parent_run_id": None, "state": state, "owner": owner, "created_at": ts, "started_at": None,
                "completed_at": ts if state.lower() in TERMINAL else None, "config_hash": None, "code_sha": None,
                "image_digest": None, "tau_command": None, "result_uri": rel_dir,
                "index_version": schema.SCHEMA_VERSION,
            }
            run_tags = {**tags, "source": source, "jsonl.importer": JSONL_IMPORTER}
            if experiment:
                run_tags["tau.experiment.id"] = experiment
            result["created_run"] = _ensure_identity(
                store, txn, project=project, group=group, experiment=experiment, run=run_row, tags=run_tags, ts=ts
            )
            _commit_metric_file(txn, file_id=file_id, rel_path=rel_path, staged=writer.path, digest=digest,
                                writer=writer, created_at=ts, display=display)
            for fstats, copy_path in copies:
                if copy_path is None:
                    continue
                art_id = f"jsonl-history-{run}-{request_hash([fstats.sha256, fstats.path.name])[:12]}"
                name = safe_segment(f"{fstats.sha256[:12]}-{fstats.path.name}", what="history file name")
                rel = f"{ARTIFACTS}/{safe_segment(run, what='run id')}/jsonl/{name}"
                mtime = fmt_time(datetime.fromtimestamp(fstats.path.stat().st_mtime, UTC))
                art = {
                    "artifact_id": art_id, "run_id": run, "type": "metrics-jsonl", "uri": rel, "name": name,
                    "durable_ref": rel, "content_type": "application/x-ndjson", "digest": f"sha256:{fstats.sha256}",
                    "size_bytes": fstats.size_bytes, "created_at": mtime, "direction": "output",
                    "preview": json.dumps({"kind": "jsonl_history", "original_path": str(fstats.path)},
                                          sort_keys=True),
                }
                if txn.ensure("artifacts", {"artifact_id": art_id}, art, what=f"artifact {art_id!r}",
                              ignore=("created_at", "preview")):
                    txn.place(copy_path, store.root / rel)
                result["artifacts"].append(art_id)
        return result
    except OSError as exc:  # disk full, permissions: staged files are removed below, the index is untouched
        raise TauError(f"importing JSONL history into {store.root} failed: {exc.strerror or exc}; "
                       "nothing was changed", hint="check disk space and permissions, then rerun") from None
    finally:
        producer.stop()
        writer.abort()
        for copy_path in producer.copy_paths:
            copy_path.unlink(missing_ok=True)
        if writer.path is not None:
            writer.path.unlink(missing_ok=True)


# -- track ---------------------------------------------------------------------------------
def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        if set(value) == {"value"} and not isinstance(value["value"], (dict, list)):
            out[prefix] = value["value"]
            return
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list):
        if len(value) <= 8 and all(not isinstance(v, (dict, list)) for v in value):
            out[prefix] = value
    else:
        out[prefix] = value


def load_config(path: Path, fmt: str | None = None) -> dict[str, Any]:
    """A config file parsed as yaml/json/raw, normalized to JSON and hashed with sha256."""
    if not path.is_file():
        raise NotFoundError(f"config file {path} does not exist")
    raw = path.read_bytes()
    kind = (fmt or path.suffix.lstrip(".") or "raw").lower()
    kind = {"yml": "yaml"}.get(kind, kind)
    data: Any
    if kind == "json":
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise UsageError(f"{path}: invalid JSON config ({exc})") from None
    elif kind == "yaml":
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError

        try:
            data = YAML(typ="safe", pure=True).load(raw)
        except YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            raise UsageError(f"{path}:{where} invalid YAML config") from None
    else:
        kind = "raw"
        data = raw.decode("utf-8", "replace")
    normalized = canonical_json(data)
    indexed: dict[str, Any] = {}
    if isinstance(data, dict):
        _flatten("", data, indexed)
    return {"config_hash": "sha256:" + request_hash(data), "format": kind, "uri": str(path.absolute()),
            "normalized_json": normalized, "indexed_fields": canonical_json(indexed)}


def parse_artifact(spec: str, run_id: str) -> dict[str, Any]:
    """``URI``, ``type:name=URI`` or a JSON object, as ``track --artifact`` accepts."""
    text = spec.strip()
    if not text:
        raise UsageError("--artifact cannot be empty")
    fields: dict[str, Any]
    if text.startswith("{"):
        try:
            fields = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"--artifact {spec!r} is not valid JSON ({exc})") from None
        if not isinstance(fields, dict):
            raise UsageError(f"--artifact {spec!r} must be a JSON object")
    elif "=" in text and ":" in text.split("=", 1)[0]:
        head, uri = text.split("=", 1)
        atype, name = head.split(":", 1)
        fields = {"type": atype, "name": name, "uri": uri}
    else:
        fields = {"uri": text}
    uri = str(fields.get("uri") or "").strip()
    if not uri:
        raise UsageError(f"--artifact {spec!r} has an empty URI")
    local = Path(uri[len("file://"):] if uri.startswith("file://") else uri)
    if not fields.get("name"):
        base = local.name if local.name not in ("", ".", "..") else ""
        if not base:
            raise UsageError(f"--artifact {spec!r} must provide a type/name or a path with a basename")
        fields["name"] = base
    ext = Path(str(fields["name"])).suffix.lstrip(".").lower() or local.suffix.lstrip(".").lower()
    fields.setdefault("type", ARTIFACT_TYPES.get(ext, "other"))
    direction = fields.get("direction") or "output"
    if direction not in ("input", "output"):
        raise UsageError(f"--artifact {spec!r}: direction must be input or output")
    fields["direction"] = direction
    fields["uri"] = uri
    if "://" not in uri or uri.startswith("file://"):
        if local.is_file():
            sha, size = file_sha256(local)
            fields.setdefault("digest", f"sha256:{sha}")
            fields.setdefault("size_bytes", size)
            fields["uri"] = str(local.absolute())
    ident = "\x00".join(str(fields.get(k) or "") for k in ("type", "name", "uri", "direction"))
    fields["artifact_id"] = f"artifact-{run_id}-{request_hash(ident)[:12]}"
    allowed = {c for c, _ in schema.TABLES["artifacts"]}
    unknown = set(fields) - allowed
    if unknown:
        raise UsageError(f"--artifact {spec!r}: unknown field(s) {', '.join(sorted(unknown))}")
    return fields


def record_run(
    store: ExperimentStore,
    run: str,
    *,
    project: str | None = None,
    group: str = "default",
    experiment: str | None = None,
    parent_run: str | None = None,
    state: str = "succeeded",
    owner: str | None = None,
    created_at: str | None = None,
    started_at: str | None = None,
    completed_at: str | None = None,
    config_hash: str | None = None,
    code_sha: str | None = None,
    image_digest: str | None = None,
    command: str | None = None,
    result_uri: str | None = None,
    configs: Sequence[dict[str, Any]] = (),
    artifacts: Sequence[dict[str, Any]] = (),
    tags: dict[str, str] | None = None,
    metrics: dict[str, float] | None = None,
    step: int | None = None,
    wall_time: str | None = None,
    metric_source: str = "tau",
    split: str | None = None,
    unit: str | None = None,
    context: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """``track``: one run with configs, artifacts, tags and scalar metrics (``tau.exp.track.v0``)."""
    import polars as pl

    project = project or store.project or "default"
    validate_id("run", run)
    validate_id("project", project)
    validate_id("group", group)
    if experiment:
        validate_id("experiment", experiment)
    tags = dict(tags or {})
    metrics = dict(metrics or {})
    if configs and not config_hash:
        hashes = sorted(c["config_hash"] for c in configs)
        config_hash = hashes[0] if len(hashes) == 1 else "sha256:" + request_hash("\n".join(hashes))
    req_data = {
        "writer": TRACK_WRITER, "run": run, "project": project, "group": group, "experiment": experiment,
        "parent_run": parent_run, "state": state, "owner": owner, "config_hash": config_hash,
        "code_sha": code_sha, "image_digest": image_digest, "command": command, "result_uri": result_uri,
        "configs": [c["config_hash"] for c in configs], "artifacts": sorted(a["artifact_id"] for a in artifacts),
        "tags": tags, "metrics": {k: repr(v) for k, v in metrics.items()}, "step": step, "wall_time": wall_time,
        "metric_source": metric_source, "split": split, "unit": unit, "context": context or {},
    }
    req = request_hash(req_data)
    staged: Path | None = None
    writer: MetricFileWriter | None = None
    try:
        if metrics:
            wall_us = None
            if wall_time:
                from ._util import parse_time

                wall_us = int(parse_time(wall_time, what="--wall-time").timestamp() * 1_000_000)
            staged = _staging(store, ".parquet")
            writer = MetricFileWriter(staged, project=project, run_group_id=group, run_id=run, source=metric_source,
                                      unit=unit, split=split)
            names = sorted(metrics)
            frame = pl.DataFrame(
                {"metric_name": names, "step": [step] * len(names), "wall_time_us": [wall_us] * len(names),
                 "value": [float(metrics[n]) for n in names]},
                schema={"metric_name": pl.String, "step": pl.Int64, "wall_time_us": pl.Int64, "value": pl.Float64},
            )
            writer.write(frame, {**tags, "tau.metric.source": "track", "tau.metric.write_version": TRACK_WRITER})
            digest = writer.close()
        with store.writing() as txn:
            if idempotency_key and store.check_idempotency(txn, idempotency_key, req, command="exp record",
                                                           target_type="run", target_id=run):
                return {"run_id": run, "created_run": False, "reused": True, "idempotency_key": idempotency_key,
                        "run_context": None, "configs": [], "metric_files": [], "metric_summaries": [],
                        "artifacts": [], "tags": [], "metric_rows": 0}
            ts = txn.ts
            run_row = {
                "run_id": run, "project": project, "experiment_id": experiment or "", "run_group_id": group,
                "parent_run_id": parent_run, "state": state, "owner": owner, "created_at": created_at or ts,
                "started_at": started_at, "completed_at": completed_at or (ts if state.lower() in TERMINAL else None),
                "config_hash": config_hash, "code_sha": code_sha, "image_digest": image_digest,
                "tau_command": command, "result_uri": result_uri, "index_version": schema.SCHEMA_VERSION,
            }
            created = _ensure_identity(store, txn, project=project, group=group, experiment=experiment,
                                       run=run_row, tags=tags, ts=ts)
            new_configs, new_artifacts, new_files = [], [], []
            for c in configs:
                row = {**c, "run_id": run}
                if txn.ensure("configs", {"config_hash": c["config_hash"], "run_id": run}, row,
                              what=f"config {c['config_hash']!r} for run {run!r}", ignore=("uri",)):
                    new_configs.append(c["config_hash"])
            for a in artifacts:
                row = {"created_at": ts, **a, "run_id": run}
                if txn.ensure("artifacts", {"artifact_id": a["artifact_id"]}, row,
                              what=f"artifact {a['artifact_id']!r}", ignore=("created_at",)):
                    new_artifacts.append(a["artifact_id"])
            if context:
                cols = [c for c, _ in schema.TABLES["run_context"]]
                unknown = set(context) - set(cols)
                if unknown:
                    raise UsageError(f"unknown run context field(s): {', '.join(sorted(unknown))}")
                cur = txn.conn.execute("SELECT * FROM run_context WHERE run_id = ?", [run])
                found = cur.fetchone()
                merged = {d[0]: found[i] for i, d in enumerate(cur.description)} if found else {"run_id": run}
                merged.update({k: v for k, v in context.items() if v is not None})
                txn.conn.execute(
                    f"INSERT OR REPLACE INTO run_context ({', '.join(merged)}) VALUES ({', '.join('?' * len(merged))})",
                    list(merged.values()),
                )
                txn.mirror("run_context", merged)
            if writer is not None and staged is not None:
                file_id = f"track-{run}-{req[:12]}"
                rel = f"{METRICS}/project={project}/group={group}/run={run}/track-{req[:12]}.parquet"
                if _commit_metric_file(txn, file_id=file_id, rel_path=rel, staged=staged, digest=digest or "",
                                       writer=writer, created_at=ts):
                    new_files.append(file_id)
            summaries = [
                dict(zip([d[0] for d in cur.description], r, strict=True))
                for cur in [txn.conn.execute("SELECT * FROM metric_summaries WHERE run_id = ? ORDER BY metric_name",
                                             [run])]
                for r in cur.fetchall()
            ]
        reused = not (created or new_configs or new_artifacts or new_files)
        return {
            "run_id": run, "created_run": created, "reused": reused, "idempotency_key": idempotency_key,
            "run_context": context or None, "configs": new_configs, "metric_files": new_files,
            "metric_summaries": summaries, "artifacts": new_artifacts, "tags": sorted(tags),
            "metric_rows": writer.rows if writer else 0,
        }
    finally:
        if staged is not None:
            staged.unlink(missing_ok=True)


# -- telemetry sink ----------------------------------------------------------------------------
#: The terminal ``tau/run_status`` marker a run writes last (1 succeeded, -1 failed, -2 cancelled).
RUN_STATUS_METRIC = "tau/run_status"
RUN_STATUS_STATES = {1.0: "succeeded", -1.0: "failed", -2.0: "cancelled"}


def _apply_terminal_marker(txn: Any, run: str, rows: Sequence[tuple[str, int | None, int | None, float]],
                           ts: str) -> None:
    """A ``tau/run_status`` marker ends a running run: its state and completion time follow the marker.

    Only a run that is still open moves; a run already in a terminal state keeps it (records stay
    insert-only; this is the run's one documented state transition).
    """
    markers = [r for r in rows if r[0] == RUN_STATUS_METRIC and r[3] in RUN_STATUS_STATES]
    if not markers:
        return
    state = RUN_STATUS_STATES[markers[-1][3]]
    txn.conn.execute(
        "UPDATE runs SET state = ?, completed_at = COALESCE(completed_at, ?) "
        "WHERE run_id = ? AND state NOT IN ('succeeded', 'failed', 'cancelled')",
        [state, ts, run],
    )


def write_records(store: ExperimentStore, records: Sequence[dict[str, Any]], *, source: str = "sink") -> dict:
    """Write ``tau.metrics.scalar.v2`` record dicts; identical batches are written once.

    Records are grouped by run; each run's batch becomes one metric file named from the hash of
    its records, so a repeated batch is recognised and reused.  Unknown runs are created
    (state ``running``); existing runs are left as they are, except that a terminal
    ``tau/run_status`` marker closes a still-running run.  Non-finite values are kept and
    counted as non-finite in the summaries.  ``wall_time`` may be a datetime, an RFC3339 string
    or Unix seconds.
    """
    import polars as pl

    by_run: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for i, rec in enumerate(records):
        missing = [k for k in ("run_id", "metric_name", "value") if rec.get(k) in (None, "")]
        if missing:
            raise UsageError(f"telemetry record {i} is missing {', '.join(missing)}")
        tags = rec.get("tags")
        tags_json = tags if isinstance(tags, str) else json.dumps(tags or {}, sort_keys=True)
        key = (str(rec.get("project") or store.project or "default"), str(rec.get("run_group_id") or "default"),
               str(rec["run_id"]), rec.get("unit") or "", rec.get("source") or source, rec.get("split") or "",
               tags_json)
        by_run.setdefault(key, []).append(rec)
    out: dict[str, Any] = {"files": [], "reused": 0, "rows": 0}
    staged_items: list[tuple[str, str, str, str, str, Path, str, MetricFileWriter]] = []
    by_run_rows: dict[tuple[str, str, str, str], list[tuple[str, int | None, int | None, float]]] = {}
    try:
        for (project, group, run, unit, rsource, split, tags_json), recs in sorted(by_run.items()):
            validate_id("run", run)
            validate_id("project", project)
            validate_id("group", group)
            rows = []
            for r in recs:
                wt = r.get("wall_time")
                if isinstance(wt, str):
                    from ._util import parse_time

                    wt = int(parse_time(wt, what="wall_time").timestamp() * 1_000_000)
                elif isinstance(wt, datetime):
                    wt = int(wt.timestamp() * 1_000_000)
                elif isinstance(wt, (int, float)):  # Unix seconds
                    wt = round(wt * 1_000_000)
                rows.append((str(r["metric_name"]), None if r.get("step") is None else int(r["step"]), wt,
                             float(r["value"])))
            req = request_hash({"sink": rsource, "project": project, "group": group, "run": run, "unit": unit,
                                "split": split, "tags": tags_json,
                                "rows": [[*row[:3], repr(row[3])] for row in rows]})
            staged = _staging(store, ".parquet")
            writer = MetricFileWriter(staged, project=project, run_group_id=group, run_id=run,
                                      source=rsource, unit=unit or None, split=split or None)
            staged_items.append((project, group, run, req, f"sink-{run}-{req[:12]}", staged, "", writer))
            by_run_rows[(project, group, run, req)] = rows
            frame = pl.DataFrame(
                {"metric_name": [r[0] for r in rows], "step": [r[1] for r in rows],
                 "wall_time_us": [r[2] for r in rows], "value": [r[3] for r in rows]},
                schema={"metric_name": pl.String, "step": pl.Int64, "wall_time_us": pl.Int64, "value": pl.Float64},
            )
            writer.write(frame, json.loads(tags_json) if tags_json else {})
            staged_items[-1] = (*staged_items[-1][:6], writer.close() or "", writer)
        # one transaction for the whole batch: one lock round-trip, one commit
        with store.writing() as txn:
            for project, group, run, req, file_id, staged, digest, writer in staged_items:
                if store.check_idempotency(txn, file_id, req, command="telemetry sink", target_type="run",
                                           target_id=run):
                    out["reused"] += 1
                    continue
                ts = txn.ts
                run_row = {"run_id": run, "project": project, "experiment_id": "", "run_group_id": group,
                           "parent_run_id": None, "state": "running", "owner": None, "created_at": ts,
                           "started_at": ts, "completed_at": None, "config_hash": None, "code_sha": None,
                           "image_digest": None, "tau_command": None, "result_uri": None,
                           "index_version": schema.SCHEMA_VERSION}
                _ensure_identity(store, txn, project=project, group=group, experiment=None, run=run_row, tags={},
                                 ts=ts, mode="ensure")
                rel = f"{METRICS}/project={project}/group={group}/run={run}/sink-{req[:12]}.parquet"
                _commit_metric_file(txn, file_id=file_id, rel_path=rel, staged=staged, digest=digest,
                                    writer=writer, created_at=ts)
                _apply_terminal_marker(txn, run, by_run_rows[(project, group, run, req)], ts)
                out["files"].append(file_id)
                out["rows"] += writer.rows
    finally:
        for item in staged_items:
            item[5].unlink(missing_ok=True)
    return out
