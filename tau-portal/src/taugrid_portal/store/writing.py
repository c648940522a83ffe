"""Steps every write shares: run identity (group, experiment, run, tags), metric-file commits, staging."""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from tau_core.errors import ConflictError
from tau_core.telemetry import FINAL_STATES

from . import schema
from .core import ExperimentStore
from .metricfile import SCHEMA_HASH, MetricFileWriter
from .records import RunRow
from .summaries import fold_file_summaries
from .transaction import Transaction

TERMINAL = ("succeeded", "failed", "cancelled", "completed", "success", "successful")


def ensure_group(txn: Transaction, project: str, group: str, ts: str) -> None:
    """The run group ``(project, group)``: group ids are scoped by project, so every project may use ``default``."""
    row = txn.conn.execute("SELECT 1 FROM run_groups WHERE project = ? AND run_group_id = ?",
                           [project, group]).fetchone()
    if row is None:
        txn.insert("run_groups", {"run_group_id": group, "project": project, "name": group, "created_at": ts,
                                  "updated_at": ts})


def _ensure_experiment(txn: Transaction, project: str, experiment: str, ts: str) -> None:
    row = txn.conn.execute("SELECT experiment_id FROM experiments WHERE experiment_id = ?", [experiment]).fetchone()
    if row is None:
        txn.insert("experiments", {"experiment_id": experiment, "project": project, "name": experiment,
                                   "description": None, "source": "run", "created_at": ts, "updated_at": ts})


#: Run columns a repeated record may leave different (they describe when and where, not what).
_VOLATILE = frozenset({"created_at", "started_at", "completed_at", "result_uri", "experiment_id", "index_version"})


def _check_existing_run(txn: Transaction, run: RunRow, current: RunRow, *, strict: bool) -> None:
    """A run recorded again must match (strict), and may only gain an experiment it lacked."""
    if strict:
        new, old = run.to_row(), current.to_row()
        diffs = sorted(c for c, v in new.items() if c not in _VOLATILE and v is not None and old.get(c) != v)
        if diffs:
            raise ConflictError(
                f"run {run.run_id!r} already exists with different metadata ({', '.join(diffs)} differ)",
                hint="records are insert-only; record the new attempt under a new run id",
            )
    if run.experiment_id and current.experiment_id not in ("", run.experiment_id):
        raise ConflictError(
            f"run {run.run_id!r} already belongs to experiment {current.experiment_id!r}",
            hint="a run belongs to one experiment; drop --experiment or use a new run id",
        )
    if run.experiment_id and not current.experiment_id:
        txn.conn.execute("UPDATE runs SET experiment_id = ? WHERE run_id = ?", [run.experiment_id, run.run_id])
        txn.mirror("runs", attrs.evolve(current, experiment_id=run.experiment_id).to_row())


def read_run(txn: Transaction, run_id: str) -> RunRow | None:
    """The ``runs`` row of ``run_id`` inside the transaction, or ``None``."""
    cur = txn.conn.execute("SELECT * FROM runs WHERE run_id = ?", [run_id])
    found = cur.fetchone()
    if found is None:
        return None
    return RunRow.from_row({d[0]: found[i] for i, d in enumerate(cur.description)})


def ensure_identity(txn: Transaction, run: RunRow, tags: Mapping[str, str], ts: str, *,
                    strict: bool = True) -> bool:
    """Ensure the run group, experiment, run and run tags; returns True when the run was created.

    ``strict`` refuses a run recorded again with different metadata; otherwise an existing run is
    left as it is (a telemetry sink creating bare runs).
    """
    ensure_group(txn, run.project, run.run_group_id, ts)
    if run.experiment_id:
        _ensure_experiment(txn, run.project, run.experiment_id, ts)
    current = read_run(txn, run.run_id)
    if current is None:
        txn.insert("runs", run.to_row())
    else:
        _check_existing_run(txn, run, current, strict=strict)
    for key, value in sorted(tags.items()):
        txn.ensure("tags", {"scope_type": "run", "scope_id": run.run_id, "key": key},
                   {"scope_type": "run", "scope_id": run.run_id, "key": key, "value": value},
                   what=f"tag run/{run.run_id} {key!r}")
    return current is None


def close_run(txn: Transaction, run_id: str, state: str, ts: str) -> bool:
    """Move a still-open run to the final ``state`` (completed at ``ts`` unless already set).

    The run's one documented state transition: a run already in a final state keeps it.
    True when the run moved.
    """
    final = sorted(FINAL_STATES)
    cur = txn.conn.execute(
        "UPDATE runs SET state = ?, completed_at = COALESCE(completed_at, ?) "
        f"WHERE run_id = ? AND state NOT IN ({', '.join('?' * len(final))})",
        [state, ts, run_id, *final],
    )
    return cur.rowcount > 0


def commit_metric_file(
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


def staging_path(store: ExperimentStore, suffix: str) -> Path:
    directory = store.root / ".staging"
    directory.mkdir(exist_ok=True)
    return directory / f"{os.getpid()}-{secrets.token_hex(6)}{suffix}"
