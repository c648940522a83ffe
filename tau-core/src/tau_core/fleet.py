"""Fleet telemetry, read back: what the Portal's Cluster Health, Node utilisation and Cost boards show.

The platform's adx-mon collects DCGM and node-exporter samples into Azure Data Explorer and owns the functions
that shape them; Tau only reads them.  This module is the one definition of what Tau expects from them:

* ``GpuHealth()`` (database ``Metrics``): one row per GPU sample, :data:`GPU_HEALTH_COLUMNS`, the metric named
  in ``metric`` (:data:`GPU_HEALTH_METRICS`);
* ``NodeHealth()`` (``Metrics``): one row per node-exporter sample, :data:`NODE_HEALTH_COLUMNS`
  (:data:`NODE_HEALTH_METRICS`; ``node_cpu_idle_seconds`` is a per-core counter);
* ``GpuCostHourly`` (database ``CostTracking``, schema version 4): hourly allocation chargeback,
  :data:`GPU_COST_COLUMNS`.

Tau does not create these objects (``taugrid-portal experiment kusto schema`` emits only what Tau writes); the
column tuples are what the queries below read, what tau-kusto parses and what the tests' stand-in platform
creates.  A **fleet source** (``tau_register_fleet_sources``; tau-kusto registers ``kusto``) runs the queries
and returns the typed records here; the Portal picks one by name with :func:`fleet_source`.

Every caller-supplied value reaches KQL as a quoted literal (:func:`tau_core.kql.literal`); windows are integer
seconds.  Import-light: attrs and the standard library.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from tau_core.exptelemetry import Column

if TYPE_CHECKING:
    from tau_core.plugins import Host

FAMILY = "fleet_sources"
GPU_HEALTH_FUNCTION = "GpuHealth"
NODE_HEALTH_FUNCTION = "NodeHealth"
GPU_COST_TABLE = "GpuCostHourly"
COST_DATABASE = "CostTracking"
COST_SCHEMA_VERSION = 4
GPU_HEALTH_COLUMNS = (Column("Timestamp", "datetime"), Column("Cluster"), Column("instance"), Column("gpu"),
                      Column("modelName"), Column("namespace"), Column("pod"), Column("metric"),
                      Column("Value", "real"))
GPU_HEALTH_METRICS = ("gpu_utilization", "gpu_temperature_celsius", "gpu_power_watts", "fb_memory_used_mb",
                      "fb_memory_free_mb", "correctable_remapped_rows", "uncorrectable_remapped_rows",
                      "row_remap_failure")
NODE_HEALTH_COLUMNS = (Column("Timestamp", "datetime"), Column("Cluster"), Column("instance"), Column("cpu"),
                       Column("metric"), Column("Value", "real"))
NODE_CPU_IDLE = "node_cpu_idle_seconds"
NODE_MEM_TOTAL = "node_memory_MemTotal_bytes"
NODE_MEM_AVAILABLE = "node_memory_MemAvailable_bytes"
NODE_HEALTH_METRICS = (NODE_CPU_IDLE, NODE_MEM_TOTAL, NODE_MEM_AVAILABLE)
GPU_COST_COLUMNS = (Column("Timestamp", "datetime"), Column("Cluster"), Column("workspace"), Column("namespace"),
                    Column("gpu_count", "real"), Column("hourly_cost", "real"), Column("peak_gpu_count", "real"),
                    Column("schema_version", "long"))
MAX_GPU_ROWS = 100_000
MAX_NODE_SAMPLES = 250_000


@attrs.frozen
class FleetQuery:
    """What one board reads: the look-back in seconds and the optional filters (exact values)."""

    window_seconds: int = 900
    cluster: str = ""
    namespace: str = ""
    instance: str = ""
    model: str = ""


@attrs.frozen
class GpuSample:
    """The latest sample of one metric of one GPU (``GpuHealth()``)."""

    cluster: str
    instance: str
    gpu: str
    metric: str
    value: float | None
    model_name: str = ""
    namespace: str = ""
    pod: str = ""
    timestamp: datetime | None = None


@attrs.frozen
class NodeSample:
    """One node-exporter sample (``NodeHealth()``); ``cpu`` is the core of a ``node_cpu_idle_seconds`` sample."""

    cluster: str
    instance: str
    metric: str
    value: float | None
    timestamp: datetime | None
    cpu: str = ""


@attrs.frozen
class GpuCost:
    """One workspace's allocation GPU-hours and estimated cost over the window (``GpuCostHourly``); a measure no
    row carried is ``None``."""

    workspace: str
    namespace: str
    gpu_hours: float | None
    estimated_cost_usd: float | None
    peak_gpus: float | None
    samples: int = 0
    gpu_hours_samples: int = 0
    cost_samples: int = 0


@attrs.frozen
class GpuUtilisation:
    """One GPU's mean utilisation (percent, valid samples only) over the window (``GpuHealth()``)."""

    cluster: str
    instance: str
    gpu: str
    avg_util_pct: float | None
    samples: int
    model_name: str = ""
    namespace: str = ""
    pod: str = ""


@runtime_checkable
class FleetSource(Protocol):
    """What ``factory(**options)`` of ``tau_register_fleet_sources`` returns."""

    def gpu_health(self, query: FleetQuery) -> list[GpuSample]: ...

    def node_health(self, query: FleetQuery) -> list[NodeSample]: ...

    def gpu_cost(self, query: FleetQuery) -> list[GpuCost]: ...

    def gpu_utilisation(self, query: FleetQuery) -> list[GpuUtilisation]: ...

    def close(self) -> None: ...


def _filters(pairs: tuple[tuple[str, str], ...]) -> list[str]:
    from tau_core.kql import literal

    return [f"| where {column} == {literal(value)}" for column, value in pairs if value]


def _ago(query: FleetQuery) -> str:
    return f"| where Timestamp > ago({max(1, int(query.window_seconds))}s)"


def _metrics(names: tuple[str, ...]) -> str:
    from tau_core.kql import literal

    return f"| where metric in ({', '.join(literal(m) for m in names)})"


def gpu_health_query(query: FleetQuery) -> str:
    """The latest sample per GPU and metric, with the GPU's model and its pod's attribution."""
    lines = [f"{GPU_HEALTH_FUNCTION}()", _ago(query), _metrics(GPU_HEALTH_METRICS),
             *_filters((("Cluster", query.cluster), ("instance", query.instance), ("modelName", query.model))),
             "| summarize arg_max(Timestamp, *) by Cluster, instance, gpu, metric",
             "| project " + ", ".join(c.name for c in GPU_HEALTH_COLUMNS),
             "| order by Cluster asc, instance asc, gpu asc", f"| take {MAX_GPU_ROWS}"]
    return "\n".join(lines)


def node_health_query(query: FleetQuery) -> str:
    """Every CPU-idle and memory sample of the window, oldest first (rates are computed by the reader)."""
    lines = [f"{NODE_HEALTH_FUNCTION}()", _ago(query), _metrics(NODE_HEALTH_METRICS),
             *_filters((("Cluster", query.cluster), ("instance", query.instance))),
             "| project " + ", ".join(c.name for c in NODE_HEALTH_COLUMNS),
             "| order by Timestamp asc", f"| take {MAX_NODE_SAMPLES}"]
    return "\n".join(lines)


def gpu_cost_query(query: FleetQuery) -> str:
    """GPU-hours, estimated cost and peak GPUs per workspace from schema-v4 hourly rows, largest first."""
    lines = [GPU_COST_TABLE, _ago(query), f"| where schema_version == {COST_SCHEMA_VERSION}",
             *_filters((("namespace", query.namespace), ("Cluster", query.cluster))),
             "| summarize GpuHours=sum(gpu_count), EstimatedCostUSD=sum(hourly_cost), PeakGpus=max(peak_gpu_count), "
             "ObservedSamples=count(), GPUHoursSamples=countif(isnotnull(gpu_count)), "
             "CostSamples=countif(isnotnull(hourly_cost)) by workspace, namespace",
             "| order by GpuHours desc"]
    return "\n".join(lines)


def gpu_utilisation_query(query: FleetQuery) -> str:
    """Mean valid utilisation (0-100) per GPU and pod attribution over the window, least used first."""
    lines = [f"{GPU_HEALTH_FUNCTION}()", _ago(query), "| where metric == \"gpu_utilization\"",
             *_filters((("Cluster", query.cluster), ("namespace", query.namespace))),
             "| where Value >= 0 and Value <= 100",
             "| summarize AvgUtil=avg(Value), Samples=count() by Cluster, instance, gpu, modelName, namespace, pod",
             "| order by AvgUtil asc", f"| take {MAX_GPU_ROWS}"]
    return "\n".join(lines)


def fleet_source(name: str, host: Host | None = None, **options: Any) -> FleetSource:
    """The fleet source registered as ``name``, built with ``options``; a one-line error when none is."""
    from tau_core.plugins import get_host

    entry = (host or get_host()).registry(FAMILY).require(
        name, "fleet telemetry source", hint="pip install tau-kusto for the Kusto (Azure Data Explorer) boards")
    source: FleetSource = entry.load()(**options)
    return source
