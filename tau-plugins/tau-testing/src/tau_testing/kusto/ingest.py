"""Queued ingestion through Azurite: the resources the endpoint hands out, and the drain into its tables.

``.get ingestion resources`` answers path-style Azurite URIs with an account SAS
(``http://127.0.0.1:<port>/devstoreaccount1/<name>?<sas>``): azure-kusto-ingest's ``QueuedIngestClient`` uploads
the (gzipped) data blob to the ``TempStorage`` container and posts its ingestion message (base64 JSON) to the
``SecuredReadyForAggregationQueue``, exactly as against a real cluster.  :class:`QueueDrain` then does the
Data Management service's part: it reads the messages, downloads the blobs, applies the mapping and
``ingestIfNotExists`` tags, appends the rows as one extent, and deletes the message.
"""

from __future__ import annotations

import gzip
import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from ..azurite import DEV_ACCOUNT, DEV_KEY, Azurite
from .store import KustoFakeError, Store

CONTAINER = "tempstorage"
QUEUES = {"SecuredReadyForAggregationQueue": "readyforaggregation-secured",
          "FailedIngestionsQueue": "failedingestions", "SuccessfulIngestionsQueue": "successfulingestions"}


def _credential() -> Any:
    from azure.core.credentials import AzureNamedKeyCredential

    return AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY)


def ingestion_resources(azurite: Azurite) -> list[tuple[str, str]]:
    """Create the container and queues, and the ``.get ingestion resources`` rows pointing at them."""
    from azure.storage.blob import AccountSasPermissions, BlobServiceClient, ResourceTypes
    from azure.storage.blob import generate_account_sas as blob_sas
    from azure.storage.queue import AccountSasPermissions as QueuePermissions
    from azure.storage.queue import QueueServiceClient
    from azure.storage.queue import ResourceTypes as QueueTypes
    from azure.storage.queue import generate_account_sas as queue_sas

    BlobServiceClient(azurite.blob_url, credential=_credential()).create_container(CONTAINER)
    queues = QueueServiceClient(azurite.queue_url, credential=_credential())
    for name in QUEUES.values():
        queues.create_queue(name)
    expiry = datetime.now(UTC) + timedelta(days=2)
    allowed = {"read": True, "write": True, "add": True, "create": True, "list": True, "process": True,
               "update": True, "delete": True}
    bsas = blob_sas(DEV_ACCOUNT, DEV_KEY, ResourceTypes(service=True, container=True, object=True),
                    AccountSasPermissions(**allowed), expiry)
    qsas = queue_sas(DEV_ACCOUNT, DEV_KEY, QueueTypes(service=True, container=True, object=True),
                     QueuePermissions(**allowed), expiry)
    rows = [(kind, f"{azurite.queue_url}/{name}?{qsas}") for kind, name in QUEUES.items()]
    rows.append(("TempStorage", f"{azurite.blob_url}/{CONTAINER}?{bsas}"))
    rows.append(("IngestionsStatusTable", f"http://127.0.0.1:1/{DEV_ACCOUNT}/ingestionsstatus?{bsas}"))
    return rows


def _rows(data: bytes, fmt: str) -> list[dict[str, Any]]:
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if fmt not in ("json", "multijson"):
        raise KustoFakeError(f"the loopback endpoint ingests JSON only, got format {fmt!r}")
    rows = [json.loads(line) for line in data.splitlines() if line.strip()]
    if any(not isinstance(r, dict) for r in rows):
        raise KustoFakeError("each JSON record must be an object")
    return rows


@attrs.define
class QueueDrain:
    """The Data Management side: moves queued ingestions from Azurite into the tables."""

    store: Store
    azurite: Azurite
    failures: list[str] = attrs.Factory(list)
    ingested: int = 0
    _lock: threading.Lock = attrs.Factory(threading.Lock)
    _stop: threading.Event = attrs.Factory(threading.Event)
    _thread: threading.Thread | None = None

    def _queue(self) -> Any:
        from azure.storage.queue import QueueClient, TextBase64DecodePolicy

        return QueueClient(self.azurite.queue_url, QUEUES["SecuredReadyForAggregationQueue"],
                           credential=_credential(), message_decode_policy=TextBase64DecodePolicy())

    def drain(self) -> int:
        """Ingest every queued message now; returns the rows appended (skipped duplicates count 0)."""
        from azure.storage.blob import BlobClient

        added = 0
        with self._lock:
            queue = self._queue()
            for msg in queue.receive_messages(messages_per_page=32, visibility_timeout=30):
                info = json.loads(msg.content)
                try:
                    added += self._ingest(info, BlobClient.from_blob_url(info["BlobPath"]).download_blob().readall())
                except (KustoFakeError, ValueError, KeyError) as exc:
                    self.failures.append(f"{info.get('TableName')}: {exc}")
                queue.delete_message(msg)
            self.ingested += added
        return added

    def _ingest(self, info: dict[str, Any], data: bytes) -> int:
        props = info.get("AdditionalProperties") or {}
        table = self.store.table(info["TableName"])
        ref = props.get("ingestionMappingReference")
        if ref:
            if ref not in table.mappings:
                raise KustoFakeError(f"mapping {ref!r} does not exist on table {table.name}")
            mapping = table.mappings[ref]
        else:
            mapping = list(json.loads(props["ingestionMapping"])) if props.get("ingestionMapping") else []
        tags = json.loads(props.get("tags") or "[]")
        if_not = json.loads(props.get("ingestIfNotExists") or "[]")
        return self.store.ingest(table.name, _rows(data, str(props.get("format", "json"))), mapping=mapping,
                                 extent=str(info.get("Id")), tags=tags, if_not_exists=if_not)

    def start(self, interval: float = 0.2) -> None:
        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.drain()
                except Exception as exc:  # Azurite stopping under us: keep the message for the next pass
                    self.failures.append(f"drain: {type(exc).__name__}: {exc}")

        self._thread = threading.Thread(target=loop, name="kusto-drain", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
