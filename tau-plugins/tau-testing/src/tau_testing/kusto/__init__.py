"""A loopback Kusto (Azure Data Explorer) endpoint for tests: see README.md in this directory.

::

    kusto = start_kusto(tmp_path)          # Azurite (blob + queue) + the endpoint on 127.0.0.1
    kusto.query_url, kusto.ingest_url      # point azure-kusto-data / azure-kusto-ingest here
    kusto.drain()                          # move queued ingestions into the tables now
    kusto.store.rows("TauExpMetricEventsV1")
    kusto.endpoint.down = True             # every call answers 503 until set back
    kusto.remote_write_url                 # the loopback adx-mon receiver (POST /receive) into the same tables
    kusto.endpoint.adxmon.down = True      # /receive answers 503 until set back
    kusto.stop()
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from ..azurite import Azurite, azurite_launcher, repo_root, start_azurite
from ..uvicorn_thread import UvicornThread, listen
from .adxmon import AdxMonReceiver
from .app import KustoEndpoint, build_app
from .ingest import QueueDrain, ingestion_resources
from .store import KustoFakeError, Store

__all__ = ["AdxMonReceiver", "KustoEndpoint", "KustoFakeError", "LoopbackKusto", "StaticToken", "Store", "start_kusto"]

#: The bearer token the loopback endpoint accepts by default (a test credential returns it).
TEST_TOKEN = "loopback-kusto-token"


class StaticToken:
    """An azure-core ``TokenCredential`` that returns :data:`TEST_TOKEN` for any scope (tests only)."""

    def __init__(self, token: str = TEST_TOKEN) -> None:
        self.token = token
        self.scopes: list[str] = []

    def get_token(self, *scopes: str, **_kwargs: Any) -> Any:
        import time

        from azure.core.credentials import AccessToken

        self.scopes.extend(scopes)
        return AccessToken(self.token, int(time.time()) + 3600)

    def close(self) -> None:
        return None


@attrs.define
class LoopbackKusto:
    store: Store
    endpoint: KustoEndpoint
    server: UvicornThread
    port: int
    azurite: Azurite | None
    queue: QueueDrain | None

    @property
    def query_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    #: The same app answers the engine and the Data Management (ingest-) calls.
    ingest_url = query_url

    @property
    def remote_write_url(self) -> str:
        """The loopback adx-mon receiver (Prometheus remote write into ``ExperimentMetrics``)."""
        return f"{self.query_url}/receive"

    def client(self, token: str = TEST_TOKEN) -> Any:
        """A real azure-kusto-data ``KustoClient`` pointed at the endpoint."""
        from azure.kusto.data import KustoClient, KustoConnectionStringBuilder

        return KustoClient(KustoConnectionStringBuilder.with_azure_token_credential(self.query_url,
                                                                                    StaticToken(token)))

    def query(self, kql: str, database: str = "Metrics") -> list[dict[str, Any]]:
        """The primary result of ``kql``, through the real client, as dicts."""
        return [r.to_dict() for r in self.client().execute(database, kql).primary_results[0]]

    def drain(self) -> int:
        if self.queue is None:
            raise RuntimeError("started without Azurite: there is no ingestion queue to drain")
        return self.queue.drain()

    def stop(self) -> None:
        if self.queue is not None:
            self.queue.stop()
        self.server.stop()
        if self.azurite is not None:
            self.azurite.stop()


def start_kusto(workdir: Path, *, queued: bool = True, background_drain: bool = False,
                token: str = TEST_TOKEN) -> LoopbackKusto:
    """The endpoint (and, with ``queued``, Azurite and the queue drain) on loopback ports."""
    store = Store()
    endpoint = KustoEndpoint(store, verify=lambda got: got == token)
    azurite = queue = None
    if queued:
        workdir.mkdir(parents=True, exist_ok=True)
        azurite = start_azurite(azurite_launcher(repo_root()), workdir)
        endpoint.resources = ingestion_resources(azurite)
        queue = QueueDrain(store, azurite)
        if background_drain:
            queue.start()
    sock = listen()
    port = int(sock.getsockname()[1])
    server = UvicornThread(build_app(endpoint), sock, name="kusto-loopback", what="loopback Kusto endpoint")
    server.start()
    return LoopbackKusto(store, endpoint, server, port, azurite, queue)
