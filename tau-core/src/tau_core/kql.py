"""KQL generated from the one column definition (:mod:`tau_core.exptelemetry`).

* :func:`schema_commands`: ``.create-merge table``, JSON ingestion mappings (``$.<column>`` for every
  column), the typed events' dedup materialized view and the dashboard functions, per ingestion kind.
* :func:`metrics_query` and :func:`lifecycle_query`: the read queries ``taugrid-portal experiment kusto
  metrics-query|lifecycle-query`` print.  Both dedup at query time (``summarize arg_max(exported_at, *)``),
  so a retried ingestion still reads as one logical point.

String literals are quoted with :func:`literal` (Kusto's escaped double-quoted strings); identifiers are
checked with :func:`tau_core.exptelemetry.is_identifier` by the callers that accept them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from tau_core.exptelemetry import (
    EVENT_COLUMNS,
    FUNCTION_FOLDER,
    LIFECYCLE_COLUMNS,
    NAMES,
    PROJECTION_COLUMNS,
    PROJECTION_DEDUP_KEY,
    Column,
)

INGESTION_KINDS = ("projection", "remote-write", "lifecycle", "typed", "all")
REMOTE_WRITE_COLUMNS = (Column("Timestamp", "datetime"), Column("SeriesId", "long"), Column("Labels", "dynamic"),
                        Column("Value", "real"), Column("Container"), Column("Namespace"), Column("Pod"),
                        Column("Cluster"), Column("Host"))


def literal(value: str) -> str:
    """A Kusto string literal (JSON escaping is valid Kusto escaping for double-quoted strings)."""
    return json.dumps(value, ensure_ascii=False)


def create_merge(table: str, columns: Sequence[Column]) -> str:
    return f".create-merge table {table} ({', '.join(f'{c.name}:{c.kusto_type}' for c in columns)})"


def json_mapping(table: str, mapping: str, columns: Sequence[Column]) -> str:
    doc = [{"column": c.name, "path": f"$.{c.name}", "datatype": c.kusto_type} for c in columns]
    return (f".create-or-alter table {table} ingestion json mapping {literal(mapping)} "
            f"'{json.dumps(doc, separators=(',', ':'))}'")


def function(name: str, body: str, doc: str) -> str:
    return (f".create-or-alter function with (folder = {literal(FUNCTION_FOLDER)}, docstring = {literal(doc)}) "
            f"{name}() {{\n{body}\n}}")


def _by(keys: Sequence[str]) -> str:
    return ", ".join(keys)


def typed_schema() -> list[str]:
    t = NAMES.events_table
    return [
        create_merge(t, EVENT_COLUMNS),
        json_mapping(t, NAMES.events_mapping, EVENT_COLUMNS),
        f".create ifnotexists materialized-view with (backfill=true) {NAMES.events_dedup_view} on table {t} "
        f"{{\n{t}\n| summarize arg_max(exported_at, *) by event_id\n}}",
        function(NAMES.events_function, NAMES.events_dedup_view, "Typed metric events, one row per event_id"),
    ]


def projection_schema() -> list[str]:
    t = NAMES.projection_table
    body = (f"{t}\n| extend workspace_id = tostring(tags.tau_workspace)\n"
            f"| extend experiment_id = iff(isempty(experiment_id), tostring(tags.question_id), experiment_id)\n"
            f"| summarize arg_max(exported_at, *) by {_by(PROJECTION_DEDUP_KEY)}")
    return [create_merge(t, PROJECTION_COLUMNS), json_mapping(t, NAMES.projection_mapping, PROJECTION_COLUMNS),
            function(NAMES.projection_function, body, "TauExpMetrics with query-time dedup")]


def lifecycle_schema(table: str = NAMES.lifecycle_table) -> list[str]:
    return [create_merge(table, LIFECYCLE_COLUMNS), json_mapping(table, NAMES.lifecycle_mapping, LIFECYCLE_COLUMNS),
            function(NAMES.lifecycle_function, _lifecycle_rows(table), "Run lifecycle, latest row per run")]


def remote_write_schema(table: str = NAMES.remote_write_table) -> list[str]:
    labels = ("workspace_id", "source_store_id", "project", "run_group_id", "run_id", "metric_name", "source",
              "unit", "split", "metric_file_id", "metric_file_path", "tags")
    body = (f"{table}\n| extend " + ", ".join(f"{k} = tostring(Labels.{k})" for k in labels) +
            "\n| extend experiment_id = coalesce(tostring(Labels.experiment_id), tostring(Labels.question_id))"
            "\n| extend step = tolong(Labels.step), cluster = Cluster, wall_time = Timestamp, exported_at = Timestamp,"
            " value = Value")
    return [create_merge(table, REMOTE_WRITE_COLUMNS),
            function(NAMES.remote_write_function, body, "adx-mon remote-write rows as metric points")]


def schema_commands(ingestion: str = "all", *, remote_write_table: str = NAMES.remote_write_table,
                    lifecycle_table: str = NAMES.lifecycle_table) -> list[str]:
    """Every management command for ``ingestion`` (one of :data:`INGESTION_KINDS`)."""
    kinds = ["typed", "projection", "remote-write", "lifecycle"] if ingestion == "all" else [ingestion]
    out: list[str] = []
    for kind in kinds:
        if kind == "typed":
            out += typed_schema()
        elif kind == "projection":
            out += projection_schema()
        elif kind == "remote-write":
            out += remote_write_schema(remote_write_table)
        else:
            out += lifecycle_schema(lifecycle_table)
    return out


@attrs.frozen
class MetricsFilter:
    """What ``metrics-query`` selects."""

    project: str = ""
    workspace: str = ""
    group: str = ""
    runs: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    since: str = "7d"
    target_points: int = 12000


def _in(column: str, values: Sequence[str]) -> str:
    if len(values) == 1:
        return f"| where {column} == {literal(values[0])}"
    return f"| where {column} in ({', '.join(literal(v) for v in values)})"


METRIC_POINT_COLUMNS = ("project", "experiment_id", "run_group_id", "run_id", "metric_name", "step", "wall_time",
                        "value", "exported_at")


def metrics_query(flt: MetricsFilter, ingestion: str = "typed") -> str:
    """One deduplicated row per metric point, ordered by run, metric and step."""
    if ingestion == "typed":
        lines = [NAMES.events_table, f"| where wall_time > ago({flt.since})"]
        key: Sequence[str] = ("event_id",)
    else:
        lines = [NAMES.projection_table, f"| where exported_at > ago({flt.since})",
                 "| extend workspace_id = tostring(tags.tau_workspace)"]
        key = PROJECTION_DEDUP_KEY
    for column, values in (("project", (flt.project,)), ("workspace_id", (flt.workspace,)),
                           ("run_group_id", (flt.group,)), ("run_id", flt.runs), ("metric_name", flt.metrics)):
        values = tuple(v for v in values if v)
        if values:
            lines.append(_in(column, values))
    lines += [f"| summarize arg_max(exported_at, *) by {_by(key)}",
              f"| project {_by(METRIC_POINT_COLUMNS)}",
              "| order by run_id asc, metric_name asc, step asc",
              f"| take {flt.target_points}"]
    return "\n".join(lines)


def _lifecycle_rows(table: str) -> str:
    return (f"{table}\n"
            "| extend durable_identity = coalesce(durable_id, resource_uid, run_id)\n"
            "| extend observation_identity = iff(isempty(observation_id), strcat(durable_identity, ':', state, ':', "
            "tostring(observed_at)), observation_id)\n"
            "| summarize arg_max(observed_at, *) by cluster, namespace, durable_identity, observation_identity\n"
            "| extend terminal = state in ('succeeded', 'failed', 'cancelled')\n"
            "| summarize arg_max(pack_array(terminal, observed_at), *) by cluster, namespace, durable_identity")


def lifecycle_query(*, table: str = NAMES.lifecycle_table, target: str = "", target_type: str = "auto",
                    stale_after: str = "15m") -> str:
    """The latest lifecycle row per run, joined with its metric activity, with the derived states."""
    lines = [_lifecycle_rows(table)]
    columns = {"experiment": ("project",), "run_group": ("run_group_id",), "run": ("run_id",),
               "auto": ("project", "run_group_id", "run_id")}[target_type]
    if target:
        lines.append("| where " + " or ".join(f"{c} == {literal(target)}" for c in columns))
    lines += [
        f"| join kind=leftouter ({NAMES.events_table} | summarize first_metric_at = min(wall_time), "
        "latest_metric_at = max(wall_time) by run_id) on run_id",
        "| extend latest_evidence_time = max_of(observed_at, coalesce(latest_metric_at, observed_at))",
        "| extend freshness_seconds = datetime_diff('second', now(), latest_evidence_time)",
        "| extend outcome_state = iff(isempty(state), 'queued', state)",
        f"| extend liveness_state = iff(outcome_state == 'running' and latest_evidence_time < ago({stale_after}), "
        "'not_responding', 'running')",
        "| extend lifecycle_source = iff(isnotempty(observation_id), 'lifecycle_record', 'metrics')",
        "| extend effective_state = iff(liveness_state == 'not_responding', 'stale', outcome_state)",
        "| extend workload_absence_confirmed = false",
        "| order by observed_at desc",
        "| take 200",
    ]
    return "\n".join(lines)


#: adx-mon's ``Logs.ContainerLogs`` (OTLP log rows): where the container identity lives in ``Resource`` and the
#: line in ``Body``.  Tau only reads this table; the platform's adx-mon collector writes it.
CONTAINER_LOGS_DATABASE = "Logs"
CONTAINER_LOGS_TABLE = "ContainerLogs"
CONTAINER_LOG_COLUMNS = (Column("Timestamp", "datetime"), Column("ObservedTimestamp", "datetime"),
                         Column("Body", "dynamic"), Column("Resource", "dynamic"), Column("Attributes", "dynamic"))
CONTAINER_LOG_FIELDS = (("Cluster", "Resource", "cluster"), ("Namespace", "Resource", "namespace"),
                        ("Pod", "Resource", "pod"), ("Container", "Resource", "container"),
                        ("Message", "Body", "message"))


def run_history_query(run: str, *, namespace: str = "", cluster: str = "", limit: int = 200,
                      table: str = NAMES.lifecycle_table, resource_uid: str = "", kind: str = "") -> str:
    """One run's (every run's, when ``run`` is empty) latest ``limit`` lifecycle rows, one per observation
    (query-time dedup), newest first; ``resource_uid``/``kind`` narrow to one object / owning kind."""
    lines = [table] + ([f"| where run_id == {literal(run)}"] if run else [])
    for column, value in (("resource_uid", resource_uid), ("owning_resource_kind", kind), ("namespace", namespace),
                          ("cluster", cluster)):
        if value:
            lines.append(f"| where {column} == {literal(value)}")
    lines += ["| summarize arg_max(observed_at, *) by cluster, namespace, durable_id, observation_id",
              "| order by observed_at desc", f"| take {max(1, min(limit, 1000))}"]
    return "\n".join(lines)


def run_pods_regex(run: str) -> str:
    """The names of a run's pods: a Job's ``<run>-[<index>-]<suffix>``, a RayJob's cluster pods
    ``<run>-<suffix>-head-<suffix>`` / ``<run>-<suffix>-<group>-worker-<suffix>`` (not another run's pods that
    merely share the prefix, such as ``<run>-2-...``'s)."""
    import re

    return rf"^{re.escape(run)}-(([0-9]+-)?[a-z0-9]{{5}}|[a-z0-9]{{5}}-(head|[a-z0-9-]+-worker)-[a-z0-9]{{5}})$"


def container_logs_query(*, cluster: str, namespace: str, run: str, container: str = "", tail: int | None = 200,
                         table: str = CONTAINER_LOGS_TABLE) -> str:
    """The log lines of the pods of ``run`` (named ``<run>-...``), newest ``tail`` (all when ``None``) first."""
    lines = [table]
    lines += [f"| extend {name} = tostring({column}.{key})" for name, column, key in CONTAINER_LOG_FIELDS]
    lines += [f"| where Cluster == {literal(cluster)}", f"| where Namespace == {literal(namespace)}",
              f"| where Pod startswith {literal(run + '-')}",
              f"| where Pod matches regex {literal(run_pods_regex(run))}"]
    if container:
        lines.append(f"| where Container == {literal(container)}")
    lines += ["| project Timestamp, Cluster, Namespace, Pod, Container, Message", "| order by Timestamp desc"]
    if tail is not None:
        lines.append(f"| take {tail}")
    return "\n".join(lines)
