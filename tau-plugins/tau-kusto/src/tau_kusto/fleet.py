"""The Kusto fleet source (``tau_register_fleet_sources`` → ``kusto``): the GPU, node and cost samples the
platform's adx-mon keeps in Azure Data Explorer, read for the Portal's Cluster Health, Node utilisation and Cost
boards with azure-kusto-data.

Queries come from :mod:`tau_core.fleet` (the one definition of the columns Tau reads); ``GpuHealth()`` and
``NodeHealth()`` are read in ``database`` (``Metrics``), ``GpuCostHourly`` in ``cost_database`` (``CostTracking``).
"""

from __future__ import annotations

import math
from typing import Any

from tau_core.exptelemetry import DEFAULT_DATABASE
from tau_core.fleet import (
    COST_DATABASE,
    FleetQuery,
    GpuCost,
    GpuSample,
    GpuUtilisation,
    NodeSample,
    gpu_cost_query,
    gpu_health_query,
    gpu_utilisation_query,
    node_health_query,
)

from .history import KustoHistory, _aware


def _number(value: Any) -> float | None:
    """A finite float, or ``None`` for a missing or non-finite measurement."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _count(value: Any) -> int:
    number = _number(value)
    return int(number) if number is not None and number >= 0 else 0


def _text(row: dict[str, Any], column: str) -> str:
    value = row.get(column)
    return "" if value is None else str(value)


class KustoFleet(KustoHistory):
    """Reads fleet telemetry from Kusto (see the module docstring); shares the history source's client."""

    def __init__(self, endpoint: str = "", *, database: str = DEFAULT_DATABASE, cost_database: str = COST_DATABASE,
                 credential: Any = None, **options: Any) -> None:
        super().__init__(endpoint, database=database, credential=credential, **options)
        self.cost_database = cost_database or COST_DATABASE

    def gpu_health(self, query: FleetQuery) -> list[GpuSample]:
        return [GpuSample(cluster=_text(r, "Cluster"), instance=_text(r, "instance"), gpu=_text(r, "gpu"),
                          metric=_text(r, "metric"), value=_number(r.get("Value")), model_name=_text(r, "modelName"),
                          namespace=_text(r, "namespace"), pod=_text(r, "pod"), timestamp=_aware(r.get("Timestamp")))
                for r in self._query(self.database, gpu_health_query(query))]

    def node_health(self, query: FleetQuery) -> list[NodeSample]:
        return [NodeSample(cluster=_text(r, "Cluster"), instance=_text(r, "instance"), metric=_text(r, "metric"),
                           value=_number(r.get("Value")), timestamp=_aware(r.get("Timestamp")), cpu=_text(r, "cpu"))
                for r in self._query(self.database, node_health_query(query))]

    def gpu_cost(self, query: FleetQuery) -> list[GpuCost]:
        out = []
        for r in self._query(self.cost_database, gpu_cost_query(query)):
            hours, cost = _count(r.get("GPUHoursSamples")), _count(r.get("CostSamples"))
            out.append(GpuCost(workspace=_text(r, "workspace") or _text(r, "namespace"),
                               namespace=_text(r, "namespace"),
                               gpu_hours=_number(r.get("GpuHours")) if hours else None,
                               estimated_cost_usd=_number(r.get("EstimatedCostUSD")) if cost else None,
                               peak_gpus=_number(r.get("PeakGpus")), samples=_count(r.get("ObservedSamples")),
                               gpu_hours_samples=hours, cost_samples=cost))
        return out

    def gpu_utilisation(self, query: FleetQuery) -> list[GpuUtilisation]:
        return [GpuUtilisation(cluster=_text(r, "Cluster"), instance=_text(r, "instance"), gpu=_text(r, "gpu"),
                               avg_util_pct=_number(r.get("AvgUtil")), samples=_count(r.get("Samples")),
                               model_name=_text(r, "modelName"), namespace=_text(r, "namespace"),
                               pod=_text(r, "pod"))
                for r in self._query(self.database, gpu_utilisation_query(query))]
