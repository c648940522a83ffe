"""``experiment offload metrics`` without ``--history``: the offline/recovery mode.

Projects every metric point of the experiment store to ``<out>/TauExpMetrics.jsonl`` (the ``TauExpMetrics``
columns, canonical NDJSON, written atomically) and records ``<out>/metrics_offload_checkpoint.json``:
``{schema_version "tau.metrics.offload.v1", source_store_id, exported_at, metrics_file, rows, updated_at}``.
A rerun over the same store reuses ``exported_at``, so it writes the same bytes.

With ``--remote-write-endpoint`` the rows are then remote-written to adx-mon once:
``<out>/metrics_remote_write_checkpoint.json`` (keyed by the projection's sha256) makes a rerun skip a completed
write and resume an interrupted one after its last accepted request.  A projection with other content (the
store changed) is written again in full.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from tau_core.exptelemetry import NAMES, PROJECTION_COLUMNS, PROJECTION_VERSION, kusto_time, ndjson
from tau_core.fsutil import write_json_atomic
from taugrid_portal.remote_write import RemoteWriteOptions, RemoteWriter, SeriesLabels, tags_label

CHECKPOINT_SCHEMA = "tau.metrics.offload.v1"
OFFLINE_CHECKPOINT = "metrics_offload_checkpoint.json"
REMOTE_CHECKPOINT = "metrics_remote_write_checkpoint.json"


@attrs.frozen(kw_only=True)
class OfflineOptions:
    out: Path
    store: Path
    remote_write: RemoteWriteOptions | None = None
    workspace_id: str = ""


@attrs.frozen
class OfflineResult:
    rows: int
    exported_at: str
    metrics_file: str
    checkpoint: str
    remote_write_samples: int = 0
    remote_write_skipped: bool = False


def _previous(out: Path, source_store_id: str) -> str:
    """The ``exported_at`` of an earlier projection of the same store ('' if none)."""
    try:
        doc = json.loads((out / OFFLINE_CHECKPOINT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    if isinstance(doc, dict) and doc.get("source_store_id") == source_store_id:
        return str(doc.get("exported_at") or "")
    return ""


def _tags(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def projection_rows(store: Any, exported_at: str) -> Iterator[dict[str, Any]]:
    """The store's points as ``TauExpMetrics`` rows, file by file (by file id), in file order."""
    import polars as pl

    experiments = {r["run_id"]: r["experiment_id"] for r in store.query("SELECT run_id, experiment_id FROM runs")}
    files = store.query("SELECT file_id, path FROM metric_files ORDER BY file_id")
    meta = {"exported_at": exported_at, "source_store_id": store.source_store_id, "source_store_path": str(store.root),
            "source_schema_version": str(store.manifest.get("schema_version", "")),
            "projection_version": PROJECTION_VERSION}
    for f in files:
        frame = pl.read_parquet(store.root / f["path"])
        for point in frame.iter_rows(named=True):
            wall = point.get("wall_time")
            row = {**meta, "metric_file_id": f["file_id"], "metric_file_path": f["path"],
                   "project": point["project"], "run_group_id": point["run_group_id"], "run_id": point["run_id"],
                   "experiment_id": experiments.get(point["run_id"]) or point["run_group_id"],
                   "metric_name": point["metric_name"], "step": point.get("step"),
                   "wall_time": kusto_time(wall) if wall is not None else None, "value": point["value"],
                   "unit": point.get("unit") or "", "source": point.get("source") or "",
                   "split": point.get("split") or "", "tags": _tags(point.get("tags"))}
            yield {c.name: row.get(c.name) for c in PROJECTION_COLUMNS}


def _series(rows: list[dict[str, Any]], workspace_id: str) -> list[Any]:
    out = []
    for row in rows:
        if row["wall_time"] is None:
            continue  # a point without a time has no sample timestamp
        wall = datetime.fromisoformat(row["wall_time"].replace("Z", "+00:00"))
        tags = {str(k): str(v) for k, v in row["tags"].items()}
        labels = SeriesLabels(
            workspace_id=workspace_id or tags.get("tau_workspace", ""), source_store_id=row["source_store_id"],
            project=row["project"], experiment_id=row["experiment_id"], run_group_id=row["run_group_id"],
            run_id=row["run_id"], source=row["source"], unit=row["unit"], split=row["split"],
            metric_file_id=row["metric_file_id"], metric_file_path=row["metric_file_path"], tags=tags_label(tags))
        out.append(labels.point(row["metric_name"], row["step"], row["value"],
                                int(wall.timestamp() * 1000)))
    return out


def run_offline(opts: OfflineOptions) -> OfflineResult:
    from taugrid_portal.store import ExperimentStore

    opts.out.mkdir(parents=True, exist_ok=True)
    with ExperimentStore.open(opts.store) as store:
        exported_at = _previous(opts.out, store.source_store_id) or kusto_time(datetime.now(UTC))
        rows = list(projection_rows(store, exported_at))
        source_store_id = store.source_store_id
    data = ndjson(rows)
    target = opts.out / NAMES.projection_spool
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(target)
    write_json_atomic(opts.out / OFFLINE_CHECKPOINT, {
        "schema_version": CHECKPOINT_SCHEMA, "source_store_id": source_store_id, "exported_at": exported_at,
        "metrics_file": str(target), "rows": len(rows), "updated_at": datetime.now(UTC).isoformat()}, durable=True)
    result = OfflineResult(len(rows), exported_at, str(target), str(opts.out / OFFLINE_CHECKPOINT))
    if opts.remote_write is None:
        return result
    digest = hashlib.sha256(data).hexdigest()
    sent = RemoteWriter(opts.remote_write).send(_series(rows, opts.workspace_id), opts.out / REMOTE_CHECKPOINT,
                                                digest=digest)
    return attrs.evolve(result, remote_write_samples=sent, remote_write_skipped=sent == 0 and bool(rows))
