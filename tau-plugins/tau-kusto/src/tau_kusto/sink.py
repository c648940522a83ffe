"""The Kusto telemetry sink: scalar records in, typed ``tau.experiment.metric.v1`` events out, by queued ingestion.

``KustoSink(endpoint=..., database="Metrics", spool=DIR, ...)`` is what ``tau_register_telemetry_sinks``'s
``kusto`` factory builds.  ``write(records)``:

1. turns each :class:`~tau_core.telemetry.ScalarRecord` into a :class:`~tau_core.exptelemetry.MetricEvent`
   with its deterministic ``event_id`` (validated by the v1 rules);
2. spools the batch durably (:mod:`tau_kusto.spool`) under its ingest-by tag
   (:func:`~tau_core.exptelemetry.batch_tag`: the sha256 of the sorted event ids);
3. sends every pending batch, oldest first, with azure-kusto-ingest's ``QueuedIngestClient`` into
   ``TauExpMetricEventsV1`` (mapping ``TauExpMetricEventsV1Json``) and the ``TauExpMetrics`` projection, each
   with ``ingest-by:<tag>`` and ``ingestIfNotExists``, so a replayed batch is skipped by Kusto.

When Kusto or its storage cannot be reached, the batch stays spooled and ``write`` reports it as pending
(it does not raise): the next ``write`` or ``flush`` sends the backlog first, so points arrive in order and
none is lost.  Records may carry the metric file's identity in the tags :data:`FILE_ID_TAG` and
:data:`FILE_PATH_TAG`; they become the ``metric_file_id`` / ``metric_file_path`` columns.

Authentication (azure-identity): an explicit ``credential``; else :func:`tau_kusto.auth.select_credential`:
workload identity in the cluster, Tau's own sign-in (an Azure CLI login for the tenant, or msal's device code)
or the machine's Azure CLI login.  No credential, token or env value is ever written into
a row.
"""

from __future__ import annotations

import gzip
import io
import os
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

import attrs

from tau_core.errors import ConfigError
from tau_core.exptelemetry import (
    DEFAULT_DATABASE,
    NAMES,
    EventContext,
    MetricEvent,
    batch_tag,
    kusto_time,
    ndjson,
    projection_row,
    to_event,
)
from tau_core.history import LIFECYCLE_BATCH_PREFIX, LifecycleRow, lifecycle_batch_tag, lifecycle_json
from tau_core.telemetry import ScalarRecord, to_record

from .spool import Batch, Spool

FILE_ID_TAG = "tau.metric_file_id"
FILE_PATH_TAG = "tau.metric_file_path"


def ingest_endpoint_of(endpoint: str) -> str:
    """The Data Management (``ingest-``) endpoint of an engine endpoint; loopback hosts serve both."""
    parsed = urlparse(endpoint)
    host = parsed.hostname or ""
    if host.startswith("ingest-") or host in ("127.0.0.1", "localhost", "::1"):
        return endpoint.rstrip("/")
    return f"{parsed.scheme}://ingest-{parsed.netloc}"


def default_credential(env: Mapping[str, str] | None = None) -> Any:
    """Workload identity in a pod, else Tau's sign-in, else the Azure CLI login (:mod:`tau_kusto.auth`);
    ``ConfigError`` when there is none."""
    from .auth import select_credential

    return select_credential(env)


def _check_endpoint(endpoint: str) -> str:
    parsed = urlparse(endpoint or "")
    if parsed.scheme not in ("https", "http") or not parsed.netloc or parsed.username or parsed.query:
        raise ConfigError(f"Kusto endpoint {endpoint!r} must be an absolute URL without credentials or query",
                          hint="for example https://mycluster.westeurope.kusto.windows.net")
    if parsed.scheme == "http" and parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise ConfigError(f"Kusto endpoint {endpoint!r} must use https", hint="plain http is for loopback only")
    return endpoint.rstrip("/")


class Closable:
    """A ``TokenCredential`` with the ``close()`` azure-kusto-data calls when its client closes (Tau's own
    :class:`~tau_core.azure_auth.TokenCredentialAdapter` has none; closing it must not close the caller's)."""

    def __init__(self, credential: Any) -> None:
        self.credential = credential

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        return self.credential.get_token(*scopes, **kwargs)

    def close(self) -> None:
        return None


class KustoSink:
    """A telemetry sink shipping metric points to Kusto (see the module docstring)."""

    def __init__(self, endpoint: str = "", *, database: str = DEFAULT_DATABASE, ingest_endpoint: str = "",
                 spool: str | os.PathLike[str] | None = None, credential: Any = None, workspace_id: str = "",
                 cluster: str = "", namespace: str = "", source_store_id: str = "", projection: bool = True,
                 lifecycle_table: str = NAMES.lifecycle_table, **_options: Any) -> None:
        self.endpoint = _check_endpoint(endpoint)
        self.ingest_url = _check_endpoint(ingest_endpoint) if ingest_endpoint else ingest_endpoint_of(self.endpoint)
        self.database = database
        self.context = EventContext(workspace_id=workspace_id, cluster=cluster, namespace=namespace,
                                    source_store_id=source_store_id)
        self.projection = projection
        self.lifecycle_table = lifecycle_table
        self.spool = Spool(spool)
        self._credential = credential
        self._client: Any = None
        self._sent: list[str] = []
        self.last_error = ""

    # -- events ---------------------------------------------------------------------------
    def events(self, records: Iterable[ScalarRecord | Mapping[str, Any]],
               exported_at: datetime | None = None) -> list[MetricEvent]:
        exported = exported_at or datetime.now(UTC)
        out = []
        contexts: dict[tuple[str, str], EventContext] = {}
        for item in records:
            record = to_record(item)
            tags = dict(record.tags)
            file_id, file_path = tags.pop(FILE_ID_TAG, ""), tags.pop(FILE_PATH_TAG, "")
            key = (file_id, file_path)
            context = contexts.get(key)
            if context is None:
                context = contexts[key] = attrs.evolve(self.context, metric_file_id=file_id,
                                                       metric_file_path=file_path)
            out.append(to_event(record, context, exported, tags))
        return out

    def write(self, records: Iterable[ScalarRecord | Mapping[str, Any]]) -> dict[str, Any]:
        """Spool one batch and send the backlog: ``{events, tag, sent, pending, error}``."""
        events = self.events(records)
        if not events:
            return {"events": 0, "tag": "", **self.flush()}
        tag = batch_tag([e.event_id for e in events])
        exported = kusto_time(events[0].exported_at)
        rows = [e.row(exported) for e in events]
        self.spool.add(tag, ndjson(rows), rows)
        return {"events": len(events), "tag": tag, **self.flush()}

    def write_lifecycle(self, rows: Iterable[LifecycleRow]) -> dict[str, Any]:
        """Spool one batch of lifecycle observations for ``TauExpRunLifecycle`` and send the backlog, exactly
        like :meth:`write` (ingest-by ``tau-lifecycle-<sha256 of the sorted observation ids>``)."""
        objs = [lifecycle_json(r) for r in rows]
        if not objs:
            return {"rows": 0, "tag": "", **self.flush()}
        tag = lifecycle_batch_tag([str(o["observation_id"]) for o in objs])
        self.spool.add(tag, ndjson(objs), objs)
        return {"rows": len(objs), "tag": tag, **self.flush()}

    # -- delivery -------------------------------------------------------------------------
    def _ingest_client(self) -> Any:
        if self._client is None:
            from azure.kusto.data import KustoConnectionStringBuilder
            from azure.kusto.ingest import QueuedIngestClient

            credential = self._credential if self._credential is not None else default_credential()
            kcsb = KustoConnectionStringBuilder.with_azure_token_credential(self.ingest_url, Closable(credential))
            self._client = QueuedIngestClient(kcsb)
        return self._client

    def _send(self, batch: Batch) -> None:
        from azure.kusto.data.data_format import DataFormat
        from azure.kusto.ingest import IngestionProperties, ReportLevel, StreamDescriptor

        targets = [(NAMES.events_table, NAMES.events_mapping, batch.data)]
        if batch.tag.startswith(LIFECYCLE_BATCH_PREFIX):
            targets = [(self.lifecycle_table, NAMES.lifecycle_mapping, batch.data)]
        elif self.projection:
            import json

            events = batch.rows if batch.rows is not None else [json.loads(x) for x in batch.data.splitlines() if x]
            targets.append((NAMES.projection_table, NAMES.projection_mapping,
                            ndjson([projection_row(r) for r in events])))
        client = self._ingest_client()
        for table, mapping, data in targets:
            props = IngestionProperties(self.database, table, data_format=DataFormat.JSON,
                                        ingestion_mapping_reference=mapping, ingest_by_tags=[batch.tag],
                                        ingest_if_not_exists=[batch.tag], flush_immediately=True,
                                        report_level=ReportLevel.FailuresOnly)
            source = uuid.uuid4()  # the blob's name: a resend after a crash mid-upload must not collide
            packed = gzip.compress(data, compresslevel=1)  # the client's own gzip runs at level 9: 5x the CPU
            client.ingest_from_stream(StreamDescriptor(io.BytesIO(packed), source_id=source, is_compressed=True),
                                      props)

    def flush(self) -> dict[str, Any]:
        """Send every spooled batch in order; stop at the first failure (kept for the next flush)."""
        from azure.core.exceptions import AzureError
        from azure.kusto.data.exceptions import KustoError

        sent = 0
        pending = self.spool.pending()
        for batch in pending:
            try:
                self._send(batch)
            except (KustoError, AzureError, OSError) as exc:
                self.last_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                self._client = None  # resources are fetched again on the next attempt
                break
            self.spool.done(batch, self._sent)
            sent += 1
            self.last_error = ""
        return {"sent": sent, "pending": len(pending) - sent, "error": self.last_error}

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

