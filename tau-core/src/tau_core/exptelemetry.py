"""Experiment telemetry in Azure Data Explorer (Kusto): the canonical names, every column, defined once.

* The table, mapping and function names of the Kusto integration (:data:`NAMES`).
* :data:`EVENT_COLUMNS` (``TauExpMetricEventsV1``), :data:`PROJECTION_COLUMNS` (``TauExpMetrics``) and
  :data:`LIFECYCLE_COLUMNS` (``TauExpRunLifecycle``): name and Kusto type of every column.  The Kusto
  telemetry sink builds its rows from them and ``taugrid-portal experiment kusto schema`` generates its
  ``.create-merge table`` and mapping commands from them (:mod:`tau_core.kql`), so the two cannot drift.
* :class:`MetricEvent`, one typed ``tau.experiment.metric.v1`` event, with the deterministic
  :func:`event_id` (``metric-`` + sha256 of the point's identity; export time and tags are delivery
  metadata and excluded) and its :func:`validate_event` rules.

Import-light: attrs and the standard library only (tau-portal and tau-kusto both import it).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from tau_core.telemetry import ScalarRecord

EVENT_SCHEMA = "tau.experiment.metric.v1"
PROJECTION_VERSION = "tau.exp.adx.v1"
DEFAULT_ENDPOINT = "https://example.kusto.windows.net"
DEFAULT_DATABASE = "Metrics"
FUNCTION_FOLDER = "Tau/experiments"
EVENT_ID_PREFIX = "metric-"
BATCH_TAG_PREFIX = "tau-metrics-"


@attrs.frozen
class Names:
    """The canonical Kusto names (reference §5.1)."""

    events_table: str = "TauExpMetricEventsV1"
    events_mapping: str = "TauExpMetricEventsV1Json"
    events_dedup_view: str = "TauExpMetricEventsV1Dedup"
    events_function: str = "TauExpMetricEventRows"
    projection_table: str = "TauExpMetrics"
    projection_mapping: str = "TauExpMetricsJson"
    projection_spool: str = "TauExpMetrics.jsonl"
    projection_function: str = "TauExpMetricsDashboardRows"
    lifecycle_table: str = "TauExpRunLifecycle"
    lifecycle_mapping: str = "TauExpRunLifecycleMapping"
    lifecycle_function: str = "TauExpRunLifecycleDashboardRows"
    remote_write_table: str = "ExperimentMetrics"
    remote_write_function: str = "ExperimentMetricsDashboardRows"


NAMES = Names()


@attrs.frozen
class Column:
    """One column: its name and its Kusto scalar type (``string``, ``long``, ``real``, ``datetime``, ``dynamic``)."""

    name: str
    kusto_type: str = "string"


def _cols(spec: str) -> tuple[Column, ...]:
    out = []
    for item in spec.split():
        name, _, kind = item.partition(":")
        out.append(Column(name, kind or "string"))
    return tuple(out)


#: ``TauExpMetricEventsV1``: one typed event per metric point.
EVENT_COLUMNS = _cols(
    "schema_version event_id workspace_id cluster namespace source_store_id project experiment_id run_group_id "
    "run_id metric_name step:long wall_time:datetime value:real unit source split metric_file_id metric_file_path "
    "tags:dynamic exported_at:datetime")
#: The fields of an event's identity, in this order, hashed into ``event_id``.
EVENT_IDENTITY = ("workspace_id", "cluster", "namespace", "source_store_id", "metric_file_id", "project",
                  "experiment_id", "run_group_id", "run_id", "metric_name", "step", "wall_time")
#: ``TauExpMetrics``: the projection of the experiment store's metric points (with the export metadata).
PROJECTION_COLUMNS = _cols(
    "exported_at:datetime source_store_id source_store_path source_schema_version projection_version "
    "metric_file_id metric_file_path project experiment_id run_group_id run_id metric_name step:long "
    "wall_time:datetime value:real unit source split tags:dynamic")
#: Query-time dedup key of the projection: ``arg_max(exported_at, *)`` by these.
PROJECTION_DEDUP_KEY = ("source_store_id", "metric_file_id", "project", "experiment_id", "run_group_id", "run_id",
                        "metric_name", "step", "wall_time", "workspace_id")
#: ``TauExpRunLifecycle``: one row per observed run state.
LIFECYCLE_COLUMNS = _cols(
    "observed_at:datetime observation_id run_id durable_id workspace_id result_scope project run_group_id "
    "tags:dynamic owning_resource_kind owning_resource_name namespace cluster local_queue cluster_queue "
    "workload_kind resource_uid resource_version generation:long submit_time:datetime created_time:datetime "
    "kueue_admitted_time:datetime pod_start_time:datetime first_metric_time:datetime latest_metric_time:datetime "
    "completion_time:datetime state reason message artifact_uri checkpoint_uri image image_digest config_hash "
    "code_sha tau_command result_path result_pvc experiment_tracking experiment_source controller_version")
LIFECYCLE_STATES = ("submitted", "queued", "admitted", "running", "succeeded", "failed", "cancelled")
#: Tag keys that may not override a column (tags are delivery metadata).
PROTECTED_TAGS = frozenset(c.name for c in EVENT_COLUMNS)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,1023}$")


def is_identifier(name: str) -> bool:
    """Whether ``name`` is a plain Kusto identifier (table and column names we generate or accept)."""
    return bool(_IDENT.match(name))


def kusto_time(value: datetime) -> str:
    """An aware or naive-UTC datetime as Kusto's RFC3339 form with microseconds (``...T12:00:00.000000Z``)."""
    if value.tzinfo is not None and value.utcoffset():
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


@attrs.frozen
class EventContext:
    """Where events come from: the deployment identity every event of one sink carries."""

    workspace_id: str = ""
    cluster: str = ""
    namespace: str = ""
    source_store_id: str = ""
    metric_file_id: str = ""
    metric_file_path: str = ""


@attrs.frozen
class MetricEvent:
    """One ``tau.experiment.metric.v1`` event (every field of :data:`EVENT_COLUMNS`)."""

    event_id: str
    workspace_id: str
    cluster: str
    namespace: str
    source_store_id: str
    project: str
    experiment_id: str
    run_group_id: str
    run_id: str
    metric_name: str
    step: int
    wall_time: datetime
    value: float
    unit: str
    source: str
    split: str
    metric_file_id: str
    metric_file_path: str
    tags: dict[str, str]
    exported_at: datetime
    schema_version: str = EVENT_SCHEMA

    def row(self, exported_at: str = "") -> dict[str, Any]:
        """The event as one JSON object keyed by column name (times in UTC); ``exported_at`` may pass the
        export time already formatted (it is the same for a whole batch)."""
        out = {name: getattr(self, name) for name in _EVENT_NAMES}
        out["wall_time"], out["exported_at"] = kusto_time(self.wall_time), exported_at or kusto_time(self.exported_at)
        return out


_EVENT_NAMES = tuple(c.name for c in EVENT_COLUMNS)


def event_id(identity: Mapping[str, Any]) -> str:
    """``metric-`` + sha256 over the canonical JSON array of the :data:`EVENT_IDENTITY` values, in that order
    (``wall_time`` as UTC RFC3339 with microseconds)."""
    values = [kusto_time(v) if isinstance(v := identity[k], datetime) else v for k in EVENT_IDENTITY]
    blob = json.dumps(values, separators=(",", ":"), ensure_ascii=False)
    return EVENT_ID_PREFIX + hashlib.sha256(blob.encode()).hexdigest()


def to_event(record: ScalarRecord, context: EventContext, exported_at: datetime,
             tags: Mapping[str, str] | None = None) -> MetricEvent:
    """The typed event of one scalar record (``ValueError`` naming the field it lacks or breaks); ``tags``
    replaces the record's tags."""
    if record.step is None:
        raise ValueError(f"{record.run_id}/{record.metric_name}: step is required for a metric event")
    if record.wall_time is None:
        raise ValueError(f"{record.run_id}/{record.metric_name}: wall_time is required for a metric event")
    fields: dict[str, Any] = {
        "workspace_id": context.workspace_id or record.tags.get("tau_workspace", ""),
        "cluster": context.cluster, "namespace": context.namespace,
        "source_store_id": context.source_store_id, "project": record.project,
        "experiment_id": record.experiment_id or record.run_group_id, "run_group_id": record.run_group_id,
        "run_id": record.run_id, "metric_name": record.metric_name, "step": record.step,
        "wall_time": record.wall_time.astimezone(UTC) if record.wall_time.tzinfo
        else record.wall_time.replace(tzinfo=UTC),
        "value": record.value, "unit": record.unit or "", "source": record.source or "",
        "split": record.split or "", "metric_file_id": context.metric_file_id,
        "metric_file_path": context.metric_file_path,
        "tags": {k: v for k, v in (record.tags if tags is None else tags).items() if k not in PROTECTED_TAGS},
        "exported_at": exported_at}
    event = MetricEvent(event_id=event_id(fields), **fields)
    validate_event(event, check_id=False)  # the id was just derived from these fields
    return event


def validate_event(event: MetricEvent, *, check_id: bool = True) -> None:
    """The v1 rules: required identity, ``step >= 0``, a finite value, and an ``event_id`` that matches."""
    for name in ("project", "experiment_id", "run_group_id", "run_id", "metric_name"):
        if not getattr(event, name):
            raise ValueError(f"metric event {event.run_id or '?'}/{event.metric_name or '?'}: {name} is required")
    if event.step < 0:
        raise ValueError(f"metric event {event.run_id}/{event.metric_name}: step must be >= 0, got {event.step}")
    if not math.isfinite(event.value):
        raise ValueError(f"metric event {event.run_id}/{event.metric_name}: value must be finite")
    if check_id and event.event_id != event_id(attrs.asdict(event, recurse=False)):
        raise ValueError(f"metric event {event.run_id}/{event.metric_name}: event_id does not match its identity")
    overriding = sorted(set(event.tags) & PROTECTED_TAGS)
    if overriding:
        raise ValueError(f"metric event {event.run_id}/{event.metric_name}: tags may not override {overriding}")


def projection_row(event: MetricEvent | Mapping[str, Any], *, source_store_path: str = "",
                   source_schema_version: str = "") -> dict[str, Any]:
    """The ``TauExpMetrics`` row of an event or of its :meth:`MetricEvent.row` (:data:`PROJECTION_COLUMNS`);
    ``tau_workspace`` rides in the tags."""
    row = event.row() if isinstance(event, MetricEvent) else event
    tags = dict(row["tags"])
    if row["workspace_id"]:
        tags["tau_workspace"] = row["workspace_id"]
    extra = {"source_store_path": source_store_path, "source_schema_version": source_schema_version,
             "projection_version": PROJECTION_VERSION, "tags": tags}
    return {c.name: extra.get(c.name, row.get(c.name)) for c in PROJECTION_COLUMNS}


def batch_tag(event_ids: Sequence[str]) -> str:
    """The ingest-by tag of a batch: the same events give the same tag, so a replayed batch is skipped."""
    return BATCH_TAG_PREFIX + hashlib.sha256("\n".join(sorted(event_ids)).encode()).hexdigest()


def ndjson(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Canonical one-line-per-row JSON (keys in column order, no spaces)."""
    return b"".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for r in rows)
