"""Container log rows for the loopback endpoint's ``ContainerLogs``, ingested the way adx-mon does it: queued
ingestion of OTLP-shaped JSON rows (the real azure-kusto-ingest client, through Azurite)."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Sequence
from datetime import datetime

from tau_core.exptelemetry import kusto_time
from tau_core.kql import CONTAINER_LOG_COLUMNS, CONTAINER_LOGS_TABLE, create_merge, json_mapping

from . import LoopbackKusto, StaticToken

MAPPING = "ContainerLogsJson"


def ingest_container_logs(kusto: LoopbackKusto, lines: Sequence[tuple[datetime, str, str, str, str, str]]) -> None:
    """``(time, cluster, namespace, pod, container, message)`` rows into ``ContainerLogs``, drained."""
    from azure.kusto.data import KustoConnectionStringBuilder
    from azure.kusto.data.data_format import DataFormat
    from azure.kusto.ingest import IngestionProperties, QueuedIngestClient, StreamDescriptor

    client = kusto.client()
    client.execute_mgmt("Metrics", create_merge(CONTAINER_LOGS_TABLE, CONTAINER_LOG_COLUMNS))
    client.execute_mgmt("Metrics", json_mapping(CONTAINER_LOGS_TABLE, MAPPING, CONTAINER_LOG_COLUMNS))
    rows = [{"Timestamp": kusto_time(t), "ObservedTimestamp": kusto_time(t), "Body": {"message": msg},
             "Resource": {"cluster": cl, "namespace": ns, "pod": pod, "container": ct}, "Attributes": {}}
            for t, cl, ns, pod, ct, msg in lines]
    data = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    kcsb = KustoConnectionStringBuilder.with_azure_token_credential(kusto.ingest_url, StaticToken())
    ingest = QueuedIngestClient(kcsb)
    ingest.ingest_from_stream(StreamDescriptor(io.BytesIO(data), source_id=uuid.uuid4()),
                              IngestionProperties("Logs", CONTAINER_LOGS_TABLE, data_format=DataFormat.JSON,
                                                  ingestion_mapping_reference=MAPPING, flush_immediately=True))
    ingest.close()
    kusto.drain()
