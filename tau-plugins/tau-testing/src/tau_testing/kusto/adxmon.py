"""A loopback adx-mon receiver: ``POST /receive`` (Prometheus remote-write 1.0) into the loopback Kusto tables.

It decodes the body with the same libraries as the writer (:mod:`tau_core.promwrite`: snappy block format,
protobuf ``WriteRequest``) and appends one row per sample to the table adx-mon would use for the metric
(``experiment_metrics`` -> ``ExperimentMetrics``), with the reference's columns: ``Timestamp, SeriesId,
Labels (dynamic, without __name__), Value, Container, Namespace, Pod, Cluster, Host``.  What it leaves out is
listed in README.md (no WAL, no batching, no out-of-order handling, no v2 protocol, no metadata).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import UTC, datetime
from typing import Any

import attrs
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from .store import Store

#: The columns adx-mon creates for a metric table (reference §5.2).
COLUMNS = [("Timestamp", "datetime"), ("SeriesId", "long"), ("Labels", "dynamic"), ("Value", "real"),
           ("Container", "string"), ("Namespace", "string"), ("Pod", "string"), ("Cluster", "string"),
           ("Host", "string")]
_METRIC = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def table_name(metric: str) -> str:
    """adx-mon's table for a metric: the name in PascalCase (``experiment_metrics`` -> ``ExperimentMetrics``)."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[_:]", metric) if part)


def series_id(labels: tuple[tuple[str, str], ...]) -> int:
    """A stable id of a label set, as a non-negative int64."""
    blob = "\x00".join(f"{k}\x01{v}" for k, v in sorted(labels))
    return int.from_bytes(hashlib.sha256(blob.encode()).digest()[:8], "big") >> 1


@attrs.define
class AdxMonReceiver:
    """State behind ``/receive``: ``down`` answers 503 (adx-mon restarting), counters for tests."""

    store: Store
    cluster: str = "loopback"
    host: str = "127.0.0.1"
    down: bool = False
    requests: int = 0
    samples: int = 0
    refused: int = 0

    def append(self, body: bytes) -> int:
        """Decode a request body and append its samples; ``ValueError`` for a malformed body."""
        from tau_core.promwrite import NAME_LABEL, decode

        tables: dict[str, list[dict[str, Any]]] = {}
        for item in decode(body):
            metric = item.label(NAME_LABEL)
            if not _METRIC.match(metric):
                raise ValueError(f"series without a valid {NAME_LABEL} label: {metric!r}")
            labels = {k: v for k, v in item.labels if k != NAME_LABEL}
            tables.setdefault(table_name(metric), []).append({
                "Timestamp": datetime.fromtimestamp(item.timestamp_ms / 1000, UTC), "SeriesId": series_id(item.labels),
                "Labels": labels, "Value": item.value, "Container": labels.get("container", ""),
                "Namespace": labels.get("namespace", ""), "Pod": labels.get("pod", ""), "Cluster": self.cluster,
                "Host": self.host})
        for table, rows in tables.items():
            self.store.create_merge(table, COLUMNS)
            self.store.ingest(table, rows, mapping=None, extent=f"adxmon-{uuid.uuid4().hex}")
        return sum(len(rows) for rows in tables.values())

    async def receive(self, request: Request) -> Response:
        if self.down:
            return PlainTextResponse("the loopback adx-mon receiver is down", status_code=503)
        if request.headers.get("content-encoding", "").lower() != "snappy":
            self.refused += 1
            return PlainTextResponse("Content-Encoding must be snappy", status_code=415)
        if not request.headers.get("content-type", "").startswith("application/x-protobuf"):
            self.refused += 1
            return PlainTextResponse("Content-Type must be application/x-protobuf", status_code=415)
        try:
            added = self.append(await request.body())
        except ValueError as exc:
            self.refused += 1
            return PlainTextResponse(str(exc), status_code=400)
        self.requests += 1
        self.samples += added
        return Response(status_code=204)
