"""``import jsonl``: JSONL scalar history for one run (see :mod:`taugrid_portal.store.jsonl`).

Parsing runs in a background thread a couple of blocks ahead of the Parquet writer; the history
files are copied into staging in the same pass; then one transaction records the run, the metric
file and the history artifacts, or nothing.
"""

from __future__ import annotations

import functools
import glob
import json
import os
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from tau_core.errors import ConfigError, ConflictError, NotFoundError, TauError, UsageError
from tau_core.telemetry import JSONL_IMPORTER

from . import schema
from ._util import fmt_time, request_hash, safe_segment, validate_id
from .core import ExperimentStore
from .jsonl import FileStats, read_history
from .layout import ARTIFACTS, METRICS
from .metricfile import MetricFileWriter
from .records import RunRow
from .transaction import Transaction
from .writing import TERMINAL, commit_metric_file, ensure_identity, staging_path


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

    def _tick(self, path: Path, n: int) -> None:
        self.tick(n, path)

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
                copy_path = staging_path(self.store, "-" + path.name) if self.copy else None
                if copy_path is not None:
                    self.copy_paths.append(copy_path)
                before = _file_identity(path)
                gen = read_history(path, progress=functools.partial(self._tick, path), **self.opts)
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


@attrs.frozen(kw_only=True)
class ImportRequest:
    """One ``import jsonl`` request (validated); the request hash covers it and the files' digests."""

    run: str
    project: str
    experiment: str | None = None
    group: str = "default"
    owner: str = "jsonl-import"
    state: str = "succeeded"
    metric_prefix: str | None = None
    source: str = "jsonl"
    tags: dict[str, str] = attrs.Factory(dict)
    step_field: str = "_step"
    time_field: str = "_timestamp"
    idempotency_key: str | None = None
    copy_history: bool = True

    def request_hash(self, stats: Sequence[FileStats]) -> str:
        return request_hash({
            "importer": JSONL_IMPORTER, "metric_schema": schema.METRIC_SCHEMA_VERSION, "run_id": self.run,
            "project": self.project, "experiment_id": self.experiment or "", "run_group_id": self.group,
            "owner": self.owner, "state": self.state, "metric_prefix": self.metric_prefix or "",
            "source": self.source, "tags": self.tags, "step_field": self.step_field, "time_field": self.time_field,
            "history_files": [{"size_bytes": s.size_bytes, "sha256": s.sha256} for s in stats],
            "skip_artifacts": not self.copy_history,
        })

    @property
    def rel_dir(self) -> str:
        return f"{METRICS}/project={self.project}/experiment={self.experiment or 'none'}/group={self.group}/" \
               f"run={self.run}"

    def run_row(self, ts: str) -> RunRow:
        return RunRow(run_id=self.run, project=self.project, experiment_id=self.experiment or "",
                      run_group_id=self.group, state=self.state, owner=self.owner, created_at=ts,
                      completed_at=ts if self.state.lower() in TERMINAL else None, result_uri=self.rel_dir)

    def run_tags(self) -> dict[str, str]:
        tags = {**self.tags, "source": self.source, "jsonl.importer": JSONL_IMPORTER}
        if self.experiment:
            tags["tau.experiment.id"] = self.experiment
        return tags


@attrs.define
class _Parsed:
    """What the parse pass produced: per-file statistics and each file's staged copy."""

    stats: list[FileStats] = attrs.Factory(list)
    copies: list[tuple[FileStats, Path | None]] = attrs.Factory(list)


def _consume(producer: _Producer, writer: MetricFileWriter, req: ImportRequest) -> _Parsed:
    """Feed parsed blocks to the Parquet writer; refuse histories without a single scalar."""
    parsed = _Parsed()
    for kind, payload in producer:
        if kind == "block":
            path, block, summary = payload
            row_tags = {**req.tags, "jsonl.history_file": path.name, "jsonl.history_path": str(path),
                        "jsonl.importer": JSONL_IMPORTER}
            writer.write(block.frame, row_tags, summary=summary, wide=block.wide)
        else:
            fstats, copy_path = payload
            parsed.stats.append(fstats)
            parsed.copies.append((fstats, copy_path))
    if writer.rows == 0:
        raise UsageError(
            "JSONL history files contain no scalar metrics",
            hint=f"rows need numeric values besides {req.step_field}/{req.time_field}, e.g. "
            '{"_step": 0, "loss": 1.0}',
        )
    return parsed


def _plan(req: ImportRequest, rh: str, key: str, stats: Sequence[FileStats], writer: MetricFileWriter,
          dry_run: bool) -> dict[str, Any]:
    return {
        "action": "planned" if dry_run else "imported", "run_id": req.run, "project": req.project,
        "experiment_id": req.experiment or "", "run_group_id": req.group, "idempotency_key": key,
        "request_hash": rh, "reused": False, "dry_run": dry_run,
        "history_files": [
            {"path": str(s.path), "size_bytes": s.size_bytes,
             "mod_time": fmt_time(datetime.fromtimestamp(s.path.stat().st_mtime, UTC)), "sha256": s.sha256,
             "scalar_rows": s.scalar_rows} for s in stats
        ],
        "metric_file": f"{req.rel_dir}/jsonl-{rh[:12]}.parquet", "metric_file_id": f"jsonl-{req.run}-{rh[:12]}",
        "artifacts": [], "rows": writer.rows, "min_step": writer.min_step, "max_step": writer.max_step,
        "metric_names": sorted(writer.summaries),
    }


def _dry_run(store: ExperimentStore, key: str, rh: str, result: dict[str, Any]) -> dict[str, Any]:
    prior = store.lookup_idempotency(key)
    if prior is not None:
        if prior["request_hash"] != rh:
            raise ConflictError(f"idempotency key {key!r} was used for a different request",
                                hint="repeat the original request exactly, or choose a new key")
        result.update(action="reused", reused=True)
    return result


def _record_history(store: ExperimentStore, txn: Transaction, run: str, fstats: FileStats, copy_path: Path) -> str:
    """The copied history file as a ``metrics-jsonl`` artifact of the run (placed once)."""
    art_id = f"jsonl-history-{run}-{request_hash([fstats.sha256, fstats.path.name])[:12]}"
    name = safe_segment(f"{fstats.sha256[:12]}-{fstats.path.name}", what="history file name")
    rel = f"{ARTIFACTS}/{safe_segment(run, what='run id')}/jsonl/{name}"
    mtime = fmt_time(datetime.fromtimestamp(fstats.path.stat().st_mtime, UTC))
    art = {
        "artifact_id": art_id, "run_id": run, "type": "metrics-jsonl", "uri": rel, "name": name,
        "durable_ref": rel, "content_type": "application/x-ndjson", "digest": f"sha256:{fstats.sha256}",
        "size_bytes": fstats.size_bytes, "created_at": mtime, "direction": "output",
        "preview": json.dumps({"kind": "jsonl_history", "original_path": str(fstats.path)}, sort_keys=True),
    }
    if txn.ensure("artifacts", {"artifact_id": art_id}, art, what=f"artifact {art_id!r}",
                  ignore=("created_at", "preview")):
        txn.place(copy_path, store.root / rel)
    return art_id


def _commit(store: ExperimentStore, req: ImportRequest, rh: str, key: str, writer: MetricFileWriter,
            parsed: _Parsed, result: dict[str, Any]) -> dict[str, Any]:
    """Close the Parquet file, build its display copies and record everything in one transaction."""
    from .display import display_levels

    digest = writer.close()
    assert digest is not None and writer.path is not None
    display = display_levels(writer.path, writer.summaries, writer.chunks)
    writer.chunks = None
    with store.writing() as txn:
        if store.check_idempotency(txn, key, rh, command="exp import jsonl", target_type="run", target_id=req.run):
            result.update(action="reused", reused=True)
            return result
        ts = txn.ts
        result["created_run"] = ensure_identity(txn, req.run_row(ts), req.run_tags(), ts)
        commit_metric_file(txn, file_id=result["metric_file_id"], rel_path=result["metric_file"],
                           staged=writer.path, digest=digest, writer=writer, created_at=ts, display=display)
        for fstats, copy_path in parsed.copies:
            if copy_path is not None:
                result["artifacts"].append(_record_history(store, txn, req.run, fstats, copy_path))
    return result


def import_jsonl(store: ExperimentStore, *, run: str, history: Sequence[str], project: str | None = None,
                 experiment: str | None = None, group: str = "default", dry_run: bool = False,
                 progress: Callable[[str, int, int], None] | None = None, **fields: Any) -> dict[str, Any]:
    """Import JSONL scalar history for one run (see :mod:`taugrid_portal.store.jsonl`).

    ``fields`` are the other :class:`ImportRequest` fields (owner, state, metric_prefix, source,
    tags, step_field, time_field, idempotency_key, copy_history).
    """
    project = project or store.project or "default"
    for kind, value in (("run", run), ("project", project), ("group", group), ("experiment", experiment)):
        if value or kind != "experiment":
            validate_id(kind, value or "")
    if not history:
        raise UsageError("at least one --history is required", hint="for example --history 'logs/*.jsonl'")
    req = ImportRequest(run=run, project=project, experiment=experiment, group=group,
                        **{**fields, "tags": dict(fields.get("tags") or {})})
    files = expand_history(history)
    return _import(store, req, files, dry_run=dry_run, progress=progress)


def _import(store: ExperimentStore, req: ImportRequest, files: list[Path], *, dry_run: bool,
            progress: Callable[[str, int, int], None] | None) -> dict[str, Any]:
    total = sum(p.stat().st_size for p in files)
    done = 0

    def tick(n: int, path: Path) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(str(path), done, total)

    try:
        staged_parquet = None if dry_run else staging_path(store, ".parquet")
    except OSError as exc:
        raise TauError(f"cannot write to experiment store {store.root}: {exc.strerror or exc}",
                       hint="check that the store directory is writable") from None
    writer = MetricFileWriter(staged_parquet, project=req.project, run_group_id=req.group, run_id=req.run,
                              source=req.source, keep_chunks=not dry_run)
    producer = _Producer(store, files, step_field=req.step_field, time_field=req.time_field,
                         metric_prefix=req.metric_prefix, copy=not dry_run and req.copy_history, tick=tick)
    try:
        parsed = _consume(producer, writer, req)
        rh = req.request_hash(parsed.stats)
        key = req.idempotency_key or f"jsonl-{req.run}-{rh[:12]}"
        result = _plan(req, rh, key, parsed.stats, writer, dry_run)
        if dry_run:
            return _dry_run(store, key, rh, result)
        return _commit(store, req, rh, key, writer, parsed, result)
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
