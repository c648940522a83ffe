"""Telemetry-sink writes: ``tau.metrics.scalar.v2`` records in, one metric file per run and batch out.

Records arrive as :class:`tau_core.telemetry.ScalarRecord` (or as dicts from third-party writers,
converted at this boundary).  The ``tau/run_status`` encoding is :mod:`tau_core.telemetry`'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from tau_core.errors import UsageError
from tau_core.telemetry import RUN_STATUS_METRIC, ScalarRecord, state_of_marker, to_record

from ._util import fmt_time, request_hash, validate_id
from .core import ExperimentStore
from .layout import METRICS
from .metricfile import MetricFileWriter
from .records import MetricPoint, RunRow, SinkBatchKey, StagedMetricFile
from .transaction import Transaction
from .writing import close_run, commit_metric_file, ensure_identity, staging_path

__all__ = ["RUN_STATUS_METRIC", "update_run_state", "write_records"]


def _typed(records: Iterable[ScalarRecord | Mapping[str, Any]]) -> list[ScalarRecord]:
    out: list[ScalarRecord] = []
    for i, rec in enumerate(records):
        try:
            out.append(to_record(rec))
        except (ValueError, TypeError) as exc:
            raise UsageError(f"telemetry record {i} is {exc}" if str(exc).startswith("missing")
                             else f"telemetry record {i}: {exc}") from None
    return out


def _batches(records: Sequence[ScalarRecord], store: ExperimentStore,
             source: str) -> dict[SinkBatchKey, list[MetricPoint]]:
    """Records grouped by run and constant columns, as points (sorted by key for a stable order)."""
    by_key: dict[SinkBatchKey, list[MetricPoint]] = {}
    for rec in records:
        key = SinkBatchKey(project=rec.project or store.project or "default",
                           run_group_id=rec.run_group_id or "default", run_id=rec.run_id, unit=rec.unit or "",
                           source=rec.source or source, split=rec.split or "",
                           tags_json=json.dumps(rec.tags, sort_keys=True))
        by_key.setdefault(key, []).append(MetricPoint(rec.metric_name, rec.step, rec.wall_time_us, rec.value))
    return dict(sorted(by_key.items(), key=lambda kv: attrs.astuple(kv[0])))


def _stage(store: ExperimentStore, key: SinkBatchKey, points: list[MetricPoint]) -> StagedMetricFile:
    """Encode one batch into a staged Parquet file (outside the writer lock)."""
    import polars as pl

    validate_id("run", key.run_id)
    validate_id("project", key.project)
    validate_id("group", key.run_group_id)
    req = request_hash({"sink": key.source, "project": key.project, "group": key.run_group_id, "run": key.run_id,
                        "unit": key.unit, "split": key.split, "tags": key.tags_json,
                        "rows": [p.request_key() for p in points]})
    staged = staging_path(store, ".parquet")
    writer = MetricFileWriter(staged, project=key.project, run_group_id=key.run_group_id, run_id=key.run_id,
                              source=key.source, unit=key.unit or None, split=key.split or None)
    item = StagedMetricFile(key=key, request_hash=req, staged=staged, writer=writer, points=points)
    frame = pl.DataFrame(
        {"metric_name": [p.metric_name for p in points], "step": [p.step for p in points],
         "wall_time_us": [p.wall_time_us for p in points], "value": [p.value for p in points]},
        schema={"metric_name": pl.String, "step": pl.Int64, "wall_time_us": pl.Int64, "value": pl.Float64},
    )
    writer.write(frame, json.loads(key.tags_json))
    item.digest = writer.close() or ""
    return item


def _apply_terminal_marker(txn: Transaction, item: StagedMetricFile, ts: str) -> None:
    """A ``tau/run_status`` marker ends a running run: its state follows the batch's last marker."""
    states = [state_of_marker(p.value) for p in item.points if p.metric_name == RUN_STATUS_METRIC]
    final = [s for s in states if s is not None]
    if final:
        close_run(txn, item.key.run_id, final[-1], ts)


def _commit(store: ExperimentStore, txn: Transaction, item: StagedMetricFile) -> bool:
    """Record one staged batch; False when the same batch was written before."""
    key = item.key
    if store.check_idempotency(txn, item.file_id, item.request_hash, command="telemetry sink", target_type="run",
                               target_id=key.run_id):
        return False
    ts = txn.ts
    bare = RunRow(run_id=key.run_id, project=key.project, run_group_id=key.run_group_id, state="running",
                  created_at=ts, started_at=ts)
    ensure_identity(txn, bare, {}, ts, strict=False)
    rel = f"{METRICS}/project={key.project}/group={key.run_group_id}/run={key.run_id}/sink-{item.request_hash[:12]}" \
          ".parquet"
    commit_metric_file(txn, file_id=item.file_id, rel_path=rel, staged=item.staged, digest=item.digest,
                       writer=item.writer, created_at=ts)
    _apply_terminal_marker(txn, item, ts)
    return True


def write_records(store: ExperimentStore, records: Iterable[ScalarRecord | Mapping[str, Any]], *,
                  source: str = "sink") -> dict[str, Any]:
    """Write scalar records; identical batches are written once.

    Records are grouped by run; each run's batch becomes one metric file named from the hash of
    its records, so a repeated batch is recognised and reused.  Unknown runs are created
    (state ``running``); existing runs are left as they are, except that a terminal
    ``tau/run_status`` marker closes a still-running run.  Non-finite values are kept and
    counted as non-finite in the summaries.  ``wall_time`` may be a datetime, an RFC3339 string
    or Unix seconds.
    """
    out: dict[str, Any] = {"files": [], "reused": 0, "rows": 0}
    staged: list[StagedMetricFile] = []
    try:
        for key, points in _batches(_typed(records), store, source).items():
            staged.append(_stage(store, key, points))
        with store.writing() as txn:  # one transaction for the whole batch: one lock round-trip, one commit
            for item in staged:
                if not _commit(store, txn, item):
                    out["reused"] += 1
                    continue
                out["files"].append(item.file_id)
                out["rows"] += item.writer.rows
    finally:
        for item in staged:
            item.staged.unlink(missing_ok=True)
    return out


def update_run_state(store: ExperimentStore, run_id: str, state: str, completed_at: datetime | None = None) -> bool:
    """Close a still-open run in a final ``state`` (the same transition as the terminal marker).

    True when the run moved; a run already in a final state keeps it.  ``NotFoundError`` for an
    unknown run.
    """
    store.run(run_id)  # NotFoundError with suggestions
    with store.writing() as txn:
        ts = fmt_time(completed_at) if completed_at is not None else txn.ts
        return close_run(txn, run_id, state, ts)
