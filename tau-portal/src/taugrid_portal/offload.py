"""``experiment offload metrics``: the metrics offload sidecar (online mode, ``--history``).

Each pass reads what was appended to every history file since its checkpoint, up to the last complete line
(a chunk), and for each chunk, in order:

1. validates every row with the stricter online rules (:func:`parse_online`); a malformed row is fatal:
   the error names the file and line, and the chunk is **not** checkpointed;
2. keeps a copy under ``<out>/metrics-jsonl-chunks/<chunk key>.jsonl``;
3. imports it into the run's experiment store, idempotently (key ``metrics-jsonl-<run>-<chunk key>``);
4. hands its points to the Kusto telemetry sink (through the ``tau_register_telemetry_sinks`` hook, so this
   module never imports it), which spools them durably before it returns and ships them when it can;
4b. remote-writes its points to adx-mon (:mod:`taugrid_portal.remote_write`), checkpointed per request in
   ``<out>/metrics-chunks/<file id>_remote_write_checkpoint.json``; an endpoint still down after the retries
   leaves the chunk (and the rest of that file) for the next pass, or fails a one-shot run;
5. checkpoints the file (device, inode, byte offset and a chained sha256 of the consumed prefix) atomically in
   ``<out>/metrics_jsonl_checkpoint.json``.

A process killed anywhere in 2-5 redoes that chunk on restart with the same key and the same events: the store
reuses the import, Kusto skips the batch by its ingest-by tag, and reads dedup by ``event_id``.  So a
restart leaves no gap and no duplicate.  With ``--watch`` the passes repeat every ``--interval`` until the
completion file appears; then a last pass runs, the terminal ``tau/run_status`` marker is recorded, the done
file is written and the command exits 0.
"""

from __future__ import annotations

import glob
import hashlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from tau_core.errors import TauError
from tau_core.fsutil import write_json_atomic
from tau_core.telemetry import (
    INT64_MAX,
    MAX_EPOCH_SECONDS,
    JsonlFields,
    JsonlRowError,
    ScalarColumns,
    ScalarRecord,
    flatten_row,
    from_us,
    parse_jsonl_row,
    status_record,
)
from taugrid_portal.remote_write import RemoteWriteError, RemoteWriteOptions, RemoteWriter, SeriesLabels, tags_label

CHECKPOINT_SCHEMA = "tau.metrics.offload.v1"
CHECKPOINT = "metrics_jsonl_checkpoint.json"
CHUNKS = "metrics-jsonl-chunks"
STATUS_DIR = "metrics-status"
KUSTO_SPOOL = "kusto-spool"
REMOTE_WRITE_DIR = "metrics-chunks"
#: The metric file's identity rides to the Kusto sink in these record tags (the sink makes them columns).
FILE_ID_TAG = "tau.metric_file_id"
FILE_PATH_TAG = "tau.metric_file_path"
ONLINE = JsonlFields(require_time=True)


class OffloadError(TauError):
    """A fatal offload error (a malformed chunk, a store that cannot be written)."""


@attrs.frozen
class KustoTarget:
    endpoint: str
    database: str = "Metrics"
    ingest_endpoint: str = ""
    cluster: str = ""
    namespace: str = ""


@attrs.frozen(kw_only=True)
class OffloadOptions:
    out: Path
    history: tuple[str, ...]
    run: str
    project: str
    experiment: str
    group: str = "default"
    source: str = "stellar-online"
    tags: dict[str, str] = attrs.Factory(dict)
    completion_file: Path | None = None
    baseline: bool = False
    ready_file: Path | None = None
    done_file: Path | None = None
    watch: bool = False
    interval: float = 60.0
    max_iterations: int = 0
    store: Path | None = None
    kusto: KustoTarget | None = None
    remote_write: RemoteWriteOptions | None = None
    artifact_uri: str = ""
    checkpoint_uri: str = ""


# -- strict online rows ----------------------------------------------------------------------------
def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_row(obj: dict[str, Any], line: int) -> bool:
    """The online rules for ``_step`` and ``_timestamp``; False for an empty or metadata-only row (skipped)."""
    if not any(not k.startswith("_") for k in obj):
        return False
    if "_step" not in obj:
        raise JsonlRowError(line, "missing required numeric _step field")
    step = obj["_step"]
    if not _is_num(step):
        raise JsonlRowError(line, "_step must be numeric")
    if (isinstance(step, float) and (not math.isfinite(step) or not step.is_integer())) or abs(step) > INT64_MAX:
        raise JsonlRowError(line, "_step must be an integer representable as int64")
    if "_timestamp" not in obj:
        raise JsonlRowError(line, "missing required numeric _timestamp field")
    ts = obj["_timestamp"]
    if not _is_num(ts) or not math.isfinite(ts) or ts <= 0:
        raise JsonlRowError(line, "_timestamp must be a valid positive Unix epoch-seconds value")
    if ts > MAX_EPOCH_SECONDS:
        raise JsonlRowError(line, "_timestamp must be representable as an RFC3339 wall time")
    return True


_FLOAT_STEP = re.compile(rb'"_step"\s*:\s*-?[0-9]+[.eE]')


def _parse_fast(data: bytes) -> ScalarColumns | None:
    """The store's vectorised parser (:func:`~taugrid_portal.store.jsonl.parse_block_fast`) plus the online
    rules it does not check (a time on every row, an integral ``_step``); None: take the exact slow path."""
    from taugrid_portal.store.jsonl import parse_block_fast

    if _FLOAT_STEP.search(data):
        return None
    block = parse_block_fast(data, step_field="_step", time_field="_timestamp", prefix="")
    if block is None or block.wide is None or block.wide["wall_time_us"].null_count():
        return None
    frame = block.long()
    return ScalarColumns(frame["metric_name"].to_list(), frame["step"].to_list(), frame["wall_time_us"].to_list(),
                         frame["value"].to_list())


def parse_online(data: bytes, path: Path, first_line: int) -> ScalarColumns:
    """The points of a chunk of complete lines, or ``OffloadError`` naming the file and line."""
    fast = _parse_fast(data)
    if fast is not None:
        return fast
    out = ScalarColumns()
    loads = json.loads
    for offset, raw in enumerate(data.split(b"\n")):
        if not raw.strip():
            continue
        line = first_line + offset
        try:
            try:
                obj = loads(raw if b"[" not in raw and raw.count(b"{") == 1 else flatten_row(raw.strip()))
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                raise JsonlRowError(line, f"invalid JSON ({exc})") from None
            if not isinstance(obj, dict):
                raise JsonlRowError(line, "row must contain exactly one JSON object")
            if _check_row(obj, line):
                parse_jsonl_row(obj, line, ONLINE, out)
        except JsonlRowError as exc:
            raise OffloadError(f"direct online metrics history {path} line {exc.line}: {exc.message}",
                               hint="the chunk was not checkpointed; fix or remove the row, then restart the "
                                    "sidecar") from None
    return out


# -- checkpoint ------------------------------------------------------------------------------------
@attrs.define
class FileMark:
    dev: int
    inode: int
    offset: int
    sha256: str  # chained: sha256(previous digest + chunk bytes), over the consumed prefix
    line: int = 0


def load_checkpoint(out: Path) -> dict[str, FileMark]:
    try:
        doc = json.loads((out / CHECKPOINT).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise OffloadError(f"{out / CHECKPOINT}: unreadable checkpoint ({exc})",
                           hint="remove it to re-import every chunk (imports are idempotent)") from None
    return {k: FileMark(**v) for k, v in (doc.get("files") or {}).items()}


def save_checkpoint(out: Path, marks: dict[str, FileMark]) -> None:
    write_json_atomic(out / CHECKPOINT, {"schema_version": CHECKPOINT_SCHEMA,
                                         "files": {k: attrs.asdict(v) for k, v in marks.items()},
                                         "updated_at": datetime.now(UTC).isoformat()}, durable=True)


@attrs.frozen
class Chunk:
    path: Path
    start: int
    data: bytes
    mark: FileMark  # the mark once this chunk is consumed

    @property
    def key(self) -> str:
        return self.mark.sha256[:24]


def expand(patterns: tuple[str, ...]) -> list[Path]:
    found: set[Path] = set()
    for pattern in patterns:
        matches = glob.glob(pattern) if glob.has_magic(pattern) else [pattern]
        found.update(Path(m).absolute() for m in matches if not Path(m).name.startswith(".") and Path(m).is_file())
    return sorted(found)


def next_chunk(path: Path, mark: FileMark | None) -> Chunk | None:
    """The complete lines appended to ``path`` since ``mark`` (from the start for a new or replaced file)."""
    st = path.stat()
    if mark is None or (mark.dev, mark.inode) != (st.st_dev, st.st_ino) or st.st_size < mark.offset:
        mark = FileMark(st.st_dev, st.st_ino, 0, "", 0)
    if st.st_size == mark.offset:
        return None
    with open(path, "rb") as fh:
        fh.seek(mark.offset)
        data = fh.read(st.st_size - mark.offset)
    end = data.rfind(b"\n") + 1
    if end == 0:
        return None  # a partial line: the writer is still at it
    data = data[:end]
    digest = hashlib.sha256(mark.sha256.encode() + data).hexdigest()
    return Chunk(path, mark.offset, data, FileMark(st.st_dev, st.st_ino, mark.offset + end, digest,
                                                   mark.line + data.count(b"\n")))


def chunk_records(points: ScalarColumns, opts: OffloadOptions, chunk: Chunk) -> Iterator[ScalarRecord]:
    tags = {**opts.tags, FILE_ID_TAG: chunk.key, FILE_PATH_TAG: str(chunk.path)}
    for name, step, wall, value in zip(points.metric_name, points.step, points.wall_time_us, points.value,
                                       strict=True):
        yield ScalarRecord(run_id=opts.run, metric_name=name, value=value, step=step, wall_time=from_us(wall),
                           project=opts.project, run_group_id=opts.group, experiment_id=opts.experiment,
                           source=opts.source, tags=tags)


# -- targets ---------------------------------------------------------------------------------------
@attrs.define
class Targets:
    """The run's experiment store and/or the Kusto sink (either may be absent, not both)."""

    store: Any = None
    kusto: Any = None
    kusto_pending: int = 0
    kusto_error: str = ""
    remote: RemoteWriter | None = None
    remote_error: str = ""

    def close(self) -> None:
        if self.kusto is not None:
            self.kusto.close()
        if self.store is not None:
            self.store.close()


def open_targets(opts: OffloadOptions) -> Targets:
    targets = Targets()
    if opts.store is not None:
        from taugrid_portal.store import ExperimentStore

        if (opts.store / "manifest.json").exists():
            targets.store = ExperimentStore.open(opts.store)
        else:
            targets.store = ExperimentStore.init(opts.store, project=opts.project)[0]
    if opts.kusto is not None:
        from tau_core.plugins import get_host

        registry = get_host().registry("telemetry_sinks")
        if "kusto" not in registry:
            raise OffloadError("--kusto-endpoint needs the Kusto telemetry sink, which is not installed",
                               hint="pip install tau-kusto")
        k = opts.kusto
        targets.kusto = registry["kusto"].load()(
            k.endpoint, database=k.database, ingest_endpoint=k.ingest_endpoint, spool=str(opts.out / KUSTO_SPOOL),
            workspace_id=opts.tags.get("workspace", ""), cluster=k.cluster, namespace=k.namespace,
            source_store_id=targets.store.source_store_id if targets.store is not None else "")
    if opts.remote_write is not None:
        targets.remote = RemoteWriter(opts.remote_write)
    return targets


@attrs.define
class PassResult:
    chunks: int = 0
    rows: int = 0
    import_rows: int = 0
    kusto_events: int = 0
    remote_write_samples: int = 0


def remote_write_chunk(remote: RemoteWriter, opts: OffloadOptions, targets: Targets, chunk: Chunk,
                       points: ScalarColumns) -> int:
    """Step 4b: the chunk's points as ``experiment_metrics`` series, sent once (per-chunk checkpoint)."""
    labels = SeriesLabels(
        workspace_id=opts.tags.get("workspace") or opts.tags.get("tau_workspace", ""),
        source_store_id=targets.store.source_store_id if targets.store is not None else "", project=opts.project,
        experiment_id=opts.experiment, run_group_id=opts.group, run_id=opts.run, source=opts.source,
        metric_file_id=chunk.key, metric_file_path=str(chunk.path), tags=tags_label(opts.tags))
    items = [labels.point(name, step, value, (wall or 0) // 1000) for name, step, wall, value in
             zip(points.metric_name, points.step, points.wall_time_us, points.value, strict=True)]  # online: timed
    checkpoint = opts.out / REMOTE_WRITE_DIR / f"{chunk.key}_remote_write_checkpoint.json"
    return remote.send(items, checkpoint, digest=chunk.mark.sha256)


def _import(targets: Targets, opts: OffloadOptions, chunk: Chunk, copy: Path) -> int:
    from taugrid_portal.store.importer import import_jsonl

    result = import_jsonl(targets.store, run=opts.run, history=[str(copy)], project=opts.project,
                          experiment=opts.experiment, group=opts.group, state="running",
                          owner="metrics-offload", source=opts.source, tags=opts.tags, copy_history=False,
                          idempotency_key=f"metrics-jsonl-{opts.run}-{chunk.key}")
    return 0 if result.get("reused") else int(result.get("rows") or 0)


def consume(chunk: Chunk, opts: OffloadOptions, targets: Targets, result: PassResult) -> None:
    """Steps 1-4 of the module docstring for one chunk (the caller checkpoints)."""
    points = parse_online(chunk.data, chunk.path, chunk.mark.line - chunk.data.count(b"\n") + 1)
    result.chunks += 1
    result.rows += len(points)
    if not len(points):
        return
    copy = opts.out / CHUNKS / f"{chunk.key}.jsonl"
    if not copy.exists():
        copy.parent.mkdir(parents=True, exist_ok=True)
        tmp = copy.with_name(f".{copy.name}.tmp")
        tmp.write_bytes(chunk.data)
        os.replace(tmp, copy)
    if targets.store is not None:
        result.import_rows += _import(targets, opts, chunk, copy)
    if targets.kusto is not None:
        sent = targets.kusto.write(list(chunk_records(points, opts, chunk)))
        result.kusto_events += int(sent.get("events", 0))
        targets.kusto_pending, targets.kusto_error = int(sent.get("pending", 0)), str(sent.get("error", ""))
    if targets.remote is not None:
        result.remote_write_samples += remote_write_chunk(targets.remote, opts, targets, chunk, points)


def run_pass(opts: OffloadOptions, targets: Targets, marks: dict[str, FileMark]) -> PassResult:
    result = PassResult()
    targets.remote_error = ""
    for path in expand(opts.history):
        while (chunk := next_chunk(path, marks.get(str(path)))) is not None:
            try:
                consume(chunk, opts, targets, result)
            except RemoteWriteError as exc:
                if not opts.watch:
                    raise
                targets.remote_error = exc.message
                break  # this chunk (not checkpointed) and the rest of the file wait for the next pass
            marks[str(path)] = chunk.mark
            save_checkpoint(opts.out, marks)
    if targets.kusto is not None and targets.kusto_pending:
        flushed = targets.kusto.flush()
        targets.kusto_pending, targets.kusto_error = int(flushed["pending"]), str(flushed["error"])
    return result


def baseline(opts: OffloadOptions, marks: dict[str, FileMark]) -> None:
    """Mark the current complete-line ends of the history files as consumed (first start only)."""
    if (opts.out / CHECKPOINT).exists():
        return
    for path in expand(opts.history):
        chunk = next_chunk(path, None)
        if chunk is not None:
            marks[str(path)] = chunk.mark
    save_checkpoint(opts.out, marks)


def _touch(path: Path | None, text: str) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)


def record_completion(opts: OffloadOptions, targets: Targets) -> dict[str, Any]:
    """The completion file's outcome as the terminal ``tau/run_status`` marker, in the store and Kusto."""
    assert opts.completion_file is not None
    try:
        doc = json.loads(opts.completion_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = {}
    state = str(doc.get("state") or "failed")
    state = state if state in ("succeeded", "failed", "cancelled") else "failed"
    when = datetime.now(UTC)
    if doc.get("completed_at"):
        try:
            when = datetime.fromisoformat(str(doc["completed_at"]).replace("Z", "+00:00"))
        except ValueError:
            pass
    marker = status_record(run_id=opts.run, project=opts.project, run_group_id=opts.group,
                           experiment_id=opts.experiment, state=state, completed_at=when, source=opts.source,
                           tags={**opts.tags, "tau.status.reason": str(doc.get("reason") or ""),
                                 "tau.status.message": str(doc.get("message") or ""),
                                 **({"tau.status.artifact_uri": opts.artifact_uri} if opts.artifact_uri else {}),
                                 **({"tau.status.checkpoint_uri": opts.checkpoint_uri} if opts.checkpoint_uri
                                    else {})})
    if targets.store is not None:
        from taugrid_portal.store.sink import write_records

        write_records(targets.store, [marker], source=opts.source)
    if targets.kusto is not None:
        targets.kusto.write([attrs.evolve(marker, tags={**marker.tags, FILE_ID_TAG: "run-status"})])
    status = {"run_id": opts.run, "state": state, "completed_at": when.isoformat(), "artifact_uri": opts.artifact_uri,
              "checkpoint_uri": opts.checkpoint_uri}
    write_json_atomic(opts.out / STATUS_DIR / "status.json", status)
    return status


def watch(opts: OffloadOptions, targets: Targets, emit: Callable[[int, PassResult, bool], None],
          sleep: Callable[[float], None] = time.sleep) -> int:
    """The watch loop; returns the number of passes run."""
    opts.out.mkdir(parents=True, exist_ok=True)
    marks = load_checkpoint(opts.out)
    if opts.baseline:
        baseline(opts, marks)
    _touch(opts.ready_file, "ready\n")
    iteration = 0
    while True:
        iteration += 1
        completed = opts.completion_file is not None and opts.completion_file.exists()
        result = run_pass(opts, targets, marks)  # after completion: the last pass sees every final line
        if completed:
            record_completion(opts, targets)
        emit(iteration, result, completed)
        if completed or not opts.watch or (opts.max_iterations and iteration >= opts.max_iterations):
            break
        sleep(opts.interval)
    if completed:
        drain_remote(opts, targets, marks, sleep)
        drain_kusto(opts, targets, sleep)
        _touch(opts.done_file, "done\n")
    return iteration


def drain_remote(opts: OffloadOptions, targets: Targets, marks: dict[str, FileMark],
                 sleep: Callable[[float], None], attempts: int = 30) -> None:
    """After completion, give adx-mon ``attempts`` more passes for the chunks it missed; then fail (non-zero exit,
    no done file: the chunks stay unsent and the next start on the same ``--out`` sends them)."""
    for _ in range(attempts):
        if not targets.remote_error:
            return
        sleep(min(opts.interval, 5.0))
        run_pass(opts, targets, marks)
    if targets.remote_error:
        raise RemoteWriteError(targets.remote_error, hint="the unsent chunks are retried on the next start")


def drain_kusto(opts: OffloadOptions, targets: Targets, sleep: Callable[[float], None],
                attempts: int = 30) -> None:
    """After completion, give Kusto ``attempts`` intervals to take the spooled backlog (it stays spooled otherwise:
    the next start on the same ``--out`` sends it)."""
    for _ in range(attempts):
        if targets.kusto is None or not targets.kusto_pending:
            return
        sleep(min(opts.interval, 5.0))
        flushed = targets.kusto.flush()
        targets.kusto_pending, targets.kusto_error = int(flushed["pending"]), str(flushed["error"])
