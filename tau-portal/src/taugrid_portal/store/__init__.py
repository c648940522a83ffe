"""The local experiment store: local truth for run evidence.

On disk (``expstore.v7``)::

    <root>/manifest.json          schema version, kind, project (written atomically)
    <root>/index.sqlite           SQLite index in WAL mode (readers never block writers)
    <root>/.tau-exp.lock          writer lock (flock); readers do not take it
    <root>/append-log/*.jsonl     append-only mirrors of every committed index write
    <root>/metrics/.../*.parquet  immutable tau.metrics.scalar.v2 files
    <root>/artifacts/<run>/...    copied evidence (e.g. imported JSONL history), sha256-verified
    <root>/.staging/              in-flight files of running writers (never read)

Read API (stable; Stellar and the CLI use only this)
----------------------------------------------------
``ExperimentStore.open(path)``
    Open an existing store (older schemas are migrated forward; newer ones refused with a hint).
    :func:`resolve_store` implements ``--store`` / ``TAU_EXP_STORE`` / ``TAU_EXP_STORE_ROOT``.
``store.runs(experiment=None, group=None, *, project=None, run_ids=None, state=None, tags=None)``
    ``list[RunRecord]`` newest first.  A :class:`RunRecord` has every ``runs`` column plus
    ``tags`` (dict), ``metric_names``, ``lifecycle_state``, ``successful``, ``success_reasons``;
    ``to_dict()`` gives JSON.
``store.run(run_id)`` -> ``RunRecord`` (``NotFoundError`` with suggestions).
``store.resolve_target(name)`` -> :class:`Target` ``(name, type, id, run_ids, project)``; ``type`` is
    ``run_group``, ``run`` or ``experiment`` (tried in that order).  ``NotFoundError`` suggests names.
``store.experiments(project=None)`` / ``store.run_groups(project=None)`` -> ``list[dict]``.
``store.metric_names(run_ids=None)`` -> sorted ``list[str]``.
``store.summaries(run_ids=None, metric=None)`` -> ``list[dict]`` with ``run_id, metric_name, project,
    run_group_id, count, finite_count, non_finite_count, min_step, max_step, latest_step,
    latest_wall_time`` (µs), ``latest_value, min_value, max_value, updated_at, latest_file_id``.
``store.series(run_ids, metric, *, start_step=None, end_step=None)`` -> ``polars.DataFrame`` with
    ``run_id`` (str), ``step`` (i64), ``value`` (f64), ``wall_time`` (datetime µs UTC), sorted by run and step.
``store.display_series(run_ids, level)`` -> import-time display copies (:mod:`.display`) keyed by
    ``(run_id, metric_name)`` for runs whose only metric file has one; Stellar uses them instead of
    the raw history when they give the same points.
``store.artifacts(run_id)`` -> ``list[dict]`` (artifact rows); ``store.artifact_path(artifact_id)`` -> a
    ``Path`` guaranteed inside the store root (else ``UsageError``).
``store.configs(run_id)``, ``store.run_context(run_id)``, ``store.events(run_ids)``,
``store.observations(scope_type, scope_id)``, ``store.metric_files(run_ids)``, ``store.counts(run_ids)``.
``store.root``, ``store.manifest``, ``store.project``, ``store.source_store_id``; ``store.close()``.
``store.ensure_summaries()`` summarizes metric files written without summaries (older writers); it
    skips with a warning (``store.warnings``) when another writer holds the lock.
``store.query(sql, params)`` runs a read-only SQL query on the index and returns ``list[dict]``.
One store object may be shared by threads (reads are serialized on an internal mutex).
``search_runs(store, ...)`` (:mod:`.search`) is the filtered run search used by ``experiment search``.

Writes go through :mod:`.writes` (``init_experiment``, ``record_run``, ``import_jsonl``,
``write_records``): insert-only, idempotent, one writer at a time, atomic.
"""

from __future__ import annotations

from .core import ExperimentStore, RunRecord, Target
from .paths import resolve_store
from .schema import METRIC_SCHEMA_COLUMNS, METRIC_SCHEMA_VERSION, SCHEMA_VERSION

__all__ = [
    "METRIC_SCHEMA_COLUMNS",
    "METRIC_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "ExperimentStore",
    "RunRecord",
    "Target",
    "resolve_store",
]
