"""Durable run history, read back: the records a history source returns and the registry that finds one.

A **history source** (registered through ``tau_register_history_sources``; tau-kusto registers ``kusto``)
answers three questions about runs whose Kubernetes objects may be gone:

* :meth:`HistorySource.run_history`: the recorded lifecycle transitions of a run
  (:class:`LifecycleRow`, one per ``TauExpRunLifecycle`` row, deduplicated at query time);
* :meth:`HistorySource.metric_points`: the run's metric points (:class:`MetricPoint`);
* :meth:`HistorySource.container_logs`: container log lines kept by the platform (:class:`LogLine`,
  ``Logs.ContainerLogs`` collected by adx-mon).

``tau logs``, ``tau run status``, Stellar and the Portal pick a source by name with :func:`history_source`,
so none of them imports a plugin.  Import-light: attrs and the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from tau_core.kql import MetricsFilter
    from tau_core.plugins import Host

FAMILY = "history_sources"
LIFECYCLE_BATCH_PREFIX = "tau-lifecycle-"
TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled"})


@attrs.frozen
class LifecycleRow:
    """One ``TauExpRunLifecycle`` row: every column of :data:`tau_core.exptelemetry.LIFECYCLE_COLUMNS`, in its
    order (a test holds the two equal); datetimes are ``None`` when the recorder omitted them."""

    observed_at: datetime | None = None
    observation_id: str = ""
    run_id: str = ""
    durable_id: str = ""
    workspace_id: str = ""
    result_scope: str = ""
    project: str = ""
    run_group_id: str = ""
    tags: dict[str, str] = attrs.field(factory=dict)
    owning_resource_kind: str = ""
    owning_resource_name: str = ""
    namespace: str = ""
    cluster: str = ""
    local_queue: str = ""
    cluster_queue: str = ""
    workload_kind: str = ""
    resource_uid: str = ""
    resource_version: str = ""
    generation: int = 0
    submit_time: datetime | None = None
    created_time: datetime | None = None
    kueue_admitted_time: datetime | None = None
    pod_start_time: datetime | None = None
    first_metric_time: datetime | None = None
    latest_metric_time: datetime | None = None
    completion_time: datetime | None = None
    state: str = ""
    reason: str = ""
    message: str = ""
    artifact_uri: str = ""
    checkpoint_uri: str = ""
    image: str = ""
    image_digest: str = ""
    config_hash: str = ""
    code_sha: str = ""
    tau_command: str = ""
    result_path: str = ""
    result_pvc: str = ""
    experiment_tracking: str = ""
    experiment_source: str = ""
    controller_version: str = ""

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


@attrs.frozen
class MetricPoint:
    """One deduplicated metric point (the columns of :data:`tau_core.kql.METRIC_POINT_COLUMNS`)."""

    project: str
    experiment_id: str
    run_group_id: str
    run_id: str
    metric_name: str
    step: int
    wall_time: datetime | None
    value: float
    exported_at: datetime | None = None


@attrs.frozen
class LogLine:
    """One container log line kept by the platform (never written by Tau itself)."""

    timestamp: datetime | None
    cluster: str
    namespace: str
    pod: str
    container: str
    message: str


@attrs.frozen
class RunQuery:
    """Which run's lifecycle to read: ``run`` is its run id (the workload's name unless labelled otherwise);
    empty reads every run of ``namespace`` (the Portal's Runs board).  ``resource_uid`` narrows to one workload
    object and ``kind`` to one owning kind (``RayJob``: the Portal's Ray history timeline)."""

    run: str
    namespace: str = ""
    cluster: str = ""
    limit: int = 200
    resource_uid: str = ""
    kind: str = ""


@attrs.frozen
class LogQuery:
    """Which container logs to read: the pods of run ``run`` (named ``<run>-...``) in ``namespace`` of the
    observability ``cluster`` (the exact ``Cluster`` value, never guessed); ``tail`` lines from the end
    (``None`` = all)."""

    cluster: str
    namespace: str
    run: str
    container: str = ""
    tail: int | None = 200


@runtime_checkable
class HistorySource(Protocol):
    """What ``factory(**options)`` of ``tau_register_history_sources`` returns."""

    def run_history(self, query: RunQuery) -> list[LifecycleRow]: ...

    def metric_points(self, flt: MetricsFilter) -> list[MetricPoint]: ...

    def container_logs(self, query: LogQuery) -> list[LogLine]: ...

    def close(self) -> None: ...


def _time(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


_ROW_FIELDS = {f.name: f for f in attrs.fields(LifecycleRow)}
_TIME_FIELDS = frozenset(name for name, f in _ROW_FIELDS.items() if str(f.type) == "datetime | None")


def lifecycle_row(raw: Mapping[str, Any]) -> LifecycleRow:
    """A :class:`LifecycleRow` from one result row keyed by column name (unknown columns are ignored)."""
    values: dict[str, Any] = {}
    for name in _ROW_FIELDS:
        value = raw.get(name)
        if value is None:
            continue
        if name in _TIME_FIELDS:
            values[name] = _time(value)
        elif name == "generation":
            values[name] = int(value or 0)
        elif name == "tags":
            values[name] = {str(k): str(v) for k, v in dict(value).items()} if isinstance(value, Mapping) else {}
        else:
            values[name] = str(value)
    return LifecycleRow(**values)


_MIN = datetime.min.replace(tzinfo=UTC)


def event_order(row: LifecycleRow) -> tuple[datetime, int]:
    """Sort key of rows in event order: ``observed_at``, then the state's place in the lifecycle (a
    ``submitted`` receipt and ``queued`` share the creation time)."""
    from tau_core.exptelemetry import LIFECYCLE_STATES

    rank = LIFECYCLE_STATES.index(row.state) if row.state in LIFECYCLE_STATES else len(LIFECYCLE_STATES)
    return (row.observed_at or _MIN, rank)


def lifecycle_json(row: LifecycleRow) -> dict[str, Any]:
    """The row as one NDJSON object keyed by column name, in column order; unset times are omitted."""
    from tau_core.exptelemetry import kusto_time

    out: dict[str, Any] = {}
    for name in _ROW_FIELDS:
        value = getattr(row, name)
        if isinstance(value, datetime):
            out[name] = kusto_time(value)
        elif value is not None:
            out[name] = dict(value) if isinstance(value, dict) else value
    return out


def lifecycle_batch_tag(observation_ids: list[str]) -> str:
    """``tau-lifecycle-`` + sha256 of the sorted observation ids: a replayed batch carries the same ingest-by tag."""
    import hashlib

    return LIFECYCLE_BATCH_PREFIX + hashlib.sha256("\n".join(sorted(observation_ids)).encode()).hexdigest()


def transitions(rows: list[LifecycleRow]) -> list[LifecycleRow]:
    """The rows in event order with repeats of the same state collapsed (the first observation of each state
    change is kept); nothing after the first terminal state (terminal is monotonic)."""
    out: list[LifecycleRow] = []
    for row in sorted(rows, key=event_order):
        if out and (out[-1].terminal or out[-1].state == row.state):
            if out[-1].state == row.state and row.terminal:
                out[-1] = row  # the best evidence of the terminal state (enriched reason) wins
            continue
        out.append(row)
    return out


def history_source(name: str, host: Host | None = None, **options: Any) -> HistorySource:
    """The history source registered as ``name``, built with ``options``; a one-line error when none is."""
    from tau_core.plugins import get_host

    entry = (host or get_host()).registry(FAMILY).require(
        name, "run-history source", hint="pip install tau-kusto for the Kusto (Azure Data Explorer) history")
    source: HistorySource = entry.load()(**options)
    return source
