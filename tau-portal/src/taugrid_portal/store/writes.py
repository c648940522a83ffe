"""Write operations: ``init``, ``track``, ``import jsonl`` and telemetry-sink records.

Every write follows the same shape: heavy work (parsing, hashing, Parquet encoding, file
copies) happens outside the writer lock into ``.staging/``; then, under the lock and inside
one SQLite transaction, the idempotency key is checked, rows are ensured (insert-only, with
conflict detection), summaries are merged, staged files are renamed into place and the
transaction commits.  Any failure rolls the index back and removes the placed files.

The writers live in :mod:`.track` (``record_run``), :mod:`.importer` (``import_jsonl``) and
:mod:`.sink` (``write_records``, ``update_run_state``); their shared steps in :mod:`.writing`.
"""

from __future__ import annotations

from typing import Any

from tau_core.telemetry import JSONL_IMPORTER, RUN_STATUS_METRIC, RUN_STATUS_STATES

from ._util import request_hash, validate_id
from .core import ExperimentStore
from .importer import ImportRequest, expand_history, import_jsonl
from .sink import update_run_state, write_records
from .track import ARTIFACT_TYPES, TRACK_WRITER, TrackRequest, load_config, parse_artifact, record_run
from .writing import TERMINAL, ensure_group

__all__ = [
    "ARTIFACT_TYPES", "JSONL_IMPORTER", "RUN_STATUS_METRIC", "RUN_STATUS_STATES", "TERMINAL", "TRACK_WRITER",
    "ImportRequest", "TrackRequest", "expand_history", "import_jsonl", "init_experiment", "load_config",
    "parse_artifact", "record_run", "update_run_state", "write_records",
]


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
        ensure_group(txn, project, group, ts)
    return {"experiment_id": name, "project": project, "run_group_id": group, "reused": not created,
            "idempotency_key": idempotency_key}

