"""The Kusto history source (``tau_register_history_sources`` → ``kusto``): run lifecycle, metric points and
container logs read back from Azure Data Explorer with azure-kusto-data.

Every query comes from :mod:`tau_core.kql` (generated from the one column definition) and deduplicates at
query time, so a retried ingestion still reads as one row.  Lifecycle and metrics live in ``database``
(``Metrics``); container logs in ``logs_database`` (adx-mon's ``Logs``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tau_core.errors import TauError
from tau_core.exptelemetry import DEFAULT_DATABASE, NAMES
from tau_core.history import LifecycleRow, LogLine, LogQuery, MetricPoint, RunQuery, event_order, lifecycle_row
from tau_core.kql import (
    CONTAINER_LOGS_DATABASE,
    MetricsFilter,
    container_logs_query,
    metrics_query,
    run_history_query,
)

from .sink import Closable, _check_endpoint, default_credential


def _aware(value: Any) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class KustoHistory:
    """Reads run history from Kusto (see the module docstring)."""

    def __init__(self, endpoint: str = "", *, database: str = DEFAULT_DATABASE,
                 logs_database: str = CONTAINER_LOGS_DATABASE, table: str = NAMES.lifecycle_table,
                 credential: Any = None, **_options: Any) -> None:
        self.endpoint = _check_endpoint(endpoint)
        self.database = database or DEFAULT_DATABASE
        self.logs_database = logs_database or CONTAINER_LOGS_DATABASE
        self.table = table
        self._credential = credential
        self._client: Any = None

    def _query(self, database: str, kql: str) -> list[dict[str, Any]]:
        from azure.core.exceptions import AzureError
        from azure.kusto.data import KustoClient, KustoConnectionStringBuilder
        from azure.kusto.data.exceptions import KustoError

        if self._client is None:
            credential = self._credential if self._credential is not None else default_credential()
            kcsb = KustoConnectionStringBuilder.with_azure_token_credential(self.endpoint, Closable(credential))
            self._client = KustoClient(kcsb)
        try:
            result = self._client.execute(database, kql)
        except (KustoError, AzureError, OSError) as exc:
            first = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            raise TauError(f"Kusto history query to {self.endpoint} (database {database}) failed: {first}",
                           hint="check --kusto-endpoint/--kusto-database and your access (Viewer role)") from None
        return [row.to_dict() for row in result.primary_results[0]]

    def run_history(self, query: RunQuery) -> list[LifecycleRow]:
        kql = run_history_query(query.run, namespace=query.namespace, cluster=query.cluster, limit=query.limit,
                                table=self.table, resource_uid=query.resource_uid, kind=query.kind)
        rows = [lifecycle_row(r) for r in self._query(self.database, kql)]
        return sorted(rows, key=event_order)

    def metric_points(self, flt: MetricsFilter) -> list[MetricPoint]:
        out = []
        for r in self._query(self.database, metrics_query(flt)):
            out.append(MetricPoint(project=str(r["project"]), experiment_id=str(r["experiment_id"]),
                                   run_group_id=str(r["run_group_id"]), run_id=str(r["run_id"]),
                                   metric_name=str(r["metric_name"]), step=int(r["step"]),
                                   wall_time=_aware(r["wall_time"]), value=float(r["value"]),
                                   exported_at=_aware(r.get("exported_at"))))
        return out

    def container_logs(self, query: LogQuery) -> list[LogLine]:
        kql = container_logs_query(cluster=query.cluster, namespace=query.namespace, run=query.run,
                                   container=query.container, tail=query.tail)
        lines = [LogLine(timestamp=_aware(r["Timestamp"]), cluster=str(r["Cluster"]), namespace=str(r["Namespace"]),
                         pod=str(r["Pod"]), container=str(r["Container"]), message=str(r["Message"]))
                 for r in self._query(self.logs_database, kql)]
        return sorted(lines, key=lambda x: (x.timestamp or datetime.min.replace(tzinfo=UTC)))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
