"""The Prometheus remote-write 1.0 wire format: a snappy (block format) compressed protobuf ``WriteRequest``.

Shared by the writer (``taugrid-portal experiment offload metrics --remote-write-endpoint``, which sends to
adx-mon) and the loopback adx-mon receiver of the tests (``tau_testing.kusto.adxmon``), so both speak the
same bytes.  The four message types (``WriteRequest``, ``TimeSeries``, ``Label``, ``Sample``; field numbers
of the 1.0 protocol, metadata left out) are built once, at first use, from a ``FileDescriptorProto`` written
here: no protoc, no generated module.  ``google.protobuf`` and ``cramjam`` are imported lazily (extra
``tau-core[remote-write]``), so importing this module costs nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

#: The HTTP headers of a remote-write 1.0 request.
HEADERS = {"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
           "X-Prometheus-Remote-Write-Version": "0.1.0", "User-Agent": "taugrid-remote-write/1"}
NAME_LABEL = "__name__"
_PACKAGE = "tau.remotewrite.v1"


@attrs.frozen
class Series:
    """One time series with one sample: ``labels`` as (name, value) pairs, ``timestamp_ms`` since the epoch."""

    labels: tuple[tuple[str, str], ...]
    value: float
    timestamp_ms: int

    def label(self, name: str) -> str:
        return next((v for k, v in self.labels if k == name), "")


def _utf8(text: str) -> str:
    """Protobuf strings must be valid UTF-8: a lone surrogate (legal in JSON) becomes ``?``."""
    return text.encode("utf-8", "replace").decode("utf-8")


def series(metric: str, labels: Iterable[tuple[str, str]], value: float, timestamp_ms: int) -> Series:
    """A series named ``metric``; labels with empty values are dropped and the rest sorted by name, as the
    protocol requires."""
    pairs = {NAME_LABEL: metric, **{_utf8(k): _utf8(v) for k, v in labels if v != ""}}
    return Series(tuple(sorted(pairs.items())), float(value), int(timestamp_ms))


def _file() -> Any:
    from google.protobuf import descriptor_pb2

    f = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="tau_remote_write_v1.proto", package=_PACKAGE, syntax="proto3")

    def message(name: str, fields: Sequence[tuple[str, int, int, str]]) -> None:
        msg = fd.message_type.add(name=name)
        for field_name, number, kind, type_name in fields:
            repeated = bool(type_name)
            msg.field.add(name=field_name, number=number, type=kind,
                          label=f.LABEL_REPEATED if repeated else f.LABEL_OPTIONAL,
                          type_name=f".{_PACKAGE}.{type_name}" if type_name else None)

    message("Label", [("name", 1, f.TYPE_STRING, ""), ("value", 2, f.TYPE_STRING, "")])
    message("Sample", [("value", 1, f.TYPE_DOUBLE, ""), ("timestamp", 2, f.TYPE_INT64, "")])
    message("TimeSeries", [("labels", 1, f.TYPE_MESSAGE, "Label"), ("samples", 2, f.TYPE_MESSAGE, "Sample")])
    message("WriteRequest", [("timeseries", 1, f.TYPE_MESSAGE, "TimeSeries")])
    return fd


@functools.cache
def _write_request_class() -> Any:
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.WriteRequest"))


def encode(batch: Sequence[Series]) -> bytes:
    """The request body for ``batch``: a ``WriteRequest``, serialized, snappy block-compressed."""
    import cramjam

    request = _write_request_class()()
    for item in batch:
        ts = request.timeseries.add()
        for name, value in item.labels:
            ts.labels.add(name=name, value=value)
        ts.samples.add(value=item.value, timestamp=item.timestamp_ms)
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


class DecodeError(ValueError):
    """A body that is not snappy-compressed protobuf ``WriteRequest``."""


def decode(body: bytes) -> list[Series]:
    """The series of a request body, one per sample (``DecodeError`` for a malformed body)."""
    import cramjam
    from google.protobuf.message import DecodeError as ProtoDecodeError

    try:
        raw = bytes(cramjam.snappy.decompress_raw(body))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise DecodeError(f"not snappy block-compressed: {exc}") from None
    request = _write_request_class()()
    try:
        request.ParseFromString(raw)
    except ProtoDecodeError as exc:
        raise DecodeError(f"not a remote-write WriteRequest: {exc}") from None
    out: list[Series] = []
    for ts in request.timeseries:
        labels = tuple((label.name, label.value) for label in ts.labels)
        out.extend(Series(labels, sample.value, sample.timestamp) for sample in ts.samples)
    return out
