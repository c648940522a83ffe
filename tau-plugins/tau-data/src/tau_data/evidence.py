"""The evidence link: a model record carries its run's config hash and metric summaries.

The experiment store is reached through the storage-backend registry (``experiment-store``,
registered by taugrid-portal), never imported: the backend exposes the store as ``.store`` with
``run(run_id)`` and ``summaries([run_id])``.
"""

from __future__ import annotations

from typing import Any

from tau_core.errors import NotFoundError, UsageError
from tau_core.modelref import ModelRecord, PrimaryMetric
from tau_core.plugins import get_host

from .models import default_direction

BACKEND = "experiment-store"


def open_experiment_store(path: str) -> Any:
    registry = get_host().registry("storage_backends")
    if BACKEND not in registry:
        raise UsageError("--store needs the experiment-store storage backend",
                         hint="install taugrid-portal, which registers it")
    return registry[BACKEND].load()(root=path)


def attach(record: ModelRecord, backend: Any, run_id: str = "") -> bool:
    """Copy config hash and latest metric values of ``run_id`` (default: the record's run) into ``record``."""
    store = backend.store
    rid = run_id or record.evidence.get("run_id") or record.run
    try:
        run = store.run(rid)
    except NotFoundError:
        return False
    summaries = store.summaries([rid])
    record.evidence = {"run_id": rid, "config_hash": run.config_hash or "", "project": run.project,
                       "source": f"experiment-store:{store.root}", "state": run.lifecycle_state}
    for row in summaries:
        if row.get("latest_value") is not None:
            record.metrics[row["metric_name"]] = float(row["latest_value"])
    if record.primary_metric is not None and record.primary_metric.name in record.metrics:
        record.primary_metric.value = record.metrics[record.primary_metric.name]
    elif record.primary_metric is None and record.metrics:
        name = sorted(record.metrics)[0]
        record.primary_metric = PrimaryMetric(name, record.metrics[name], default_direction(name))
    return True
