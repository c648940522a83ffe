"""Decode the Kubernetes protobuf envelope for the few typed requests kubectl sends as protobuf.

kubectl's typed clients (``kubectl create namespace|configmap|secret``, ``kubectl auth can-i``, ``auth whoami``)
send ``application/vnd.kubernetes.protobuf`` bodies. The simulator answers in JSON (clients accept it) and decodes
request bodies of the kinds listed in ``SCHEMAS``; other kinds get 415 with a hint to use JSON.
"""

from __future__ import annotations

import base64
from typing import Any

from tau_testing.sim.errors import ApiError

MAGIC = b"k8s\x00"

TYPE_META = {1: ("apiVersion", "string"), 2: ("kind", "string")}
OWNER_REF = {1: ("kind", "string"), 3: ("name", "string"), 4: ("uid", "string"), 5: ("apiVersion", "string"),
             6: ("controller", "bool"), 7: ("blockOwnerDeletion", "bool")}
OBJECT_META = {
    1: ("name", "string"), 2: ("generateName", "string"), 3: ("namespace", "string"), 5: ("uid", "string"),
    6: ("resourceVersion", "string"), 7: ("generation", "int"), 11: ("labels", ("map", "string")),
    12: ("annotations", ("map", "string")), 13: ("ownerReferences", ("repeated", OWNER_REF)),
    14: ("finalizers", ("repeated", "string")),
}
RESOURCE_ATTRS = {1: ("namespace", "string"), 2: ("verb", "string"), 3: ("group", "string"),
                  4: ("version", "string"), 5: ("resource", "string"), 6: ("subresource", "string"),
                  7: ("name", "string")}
NON_RESOURCE_ATTRS = {1: ("path", "string"), 2: ("verb", "string")}
DELETE_OPTIONS = {1: ("gracePeriodSeconds", "int"), 2: ("preconditions", {1: ("uid", "string"),
                                                                         2: ("resourceVersion", "string")}),
                  3: ("orphanDependents", "bool"), 4: ("propagationPolicy", "string"),
                  5: ("dryRun", ("repeated", "string"))}
SCHEMAS: dict[str, dict[int, tuple[str, Any]]] = {
    "Namespace": {1: ("metadata", OBJECT_META), 2: ("spec", {1: ("finalizers", ("repeated", "string"))})},
    "ConfigMap": {1: ("metadata", OBJECT_META), 2: ("data", ("map", "string")), 3: ("binaryData", ("map", "bytes")),
                  4: ("immutable", "bool")},
    "Secret": {1: ("metadata", OBJECT_META), 2: ("data", ("map", "bytes")), 3: ("type", "string"),
               4: ("stringData", ("map", "string")), 5: ("immutable", "bool")},
    "ServiceAccount": {1: ("metadata", OBJECT_META)},
    "SelfSubjectAccessReview": {1: ("metadata", OBJECT_META), 2: ("spec", {
        1: ("resourceAttributes", RESOURCE_ATTRS), 2: ("nonResourceAttributes", NON_RESOURCE_ATTRS)})},
    "SubjectAccessReview": {1: ("metadata", OBJECT_META), 2: ("spec", {
        1: ("resourceAttributes", RESOURCE_ATTRS), 2: ("nonResourceAttributes", NON_RESOURCE_ATTRS),
        3: ("user", "string"), 4: ("groups", ("repeated", "string")), 6: ("uid", "string")})},
    "SelfSubjectRulesReview": {1: ("metadata", OBJECT_META), 2: ("spec", {1: ("namespace", "string")})},
    "SelfSubjectReview": {1: ("metadata", OBJECT_META)},
    "DeleteOptions": DELETE_OPTIONS,
    "Eviction": {1: ("metadata", OBJECT_META), 2: ("deleteOptions", DELETE_OPTIONS)},
    "Binding": {1: ("metadata", OBJECT_META), 2: ("target", {1: ("kind", "string"), 2: ("namespace", "string"),
                                                            3: ("name", "string")})},
}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value = data[pos:pos + length]
            pos += length
        elif wire == 1:
            value = data[pos:pos + 8]
            pos += 8
        elif wire == 5:
            value = data[pos:pos + 4]
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _scalar(kind: str, value: Any) -> Any:
    if kind == "string":
        return bytes(value).decode("utf-8")
    if kind == "bytes":
        return base64.b64encode(bytes(value)).decode()
    if kind == "bool":
        return bool(value)
    if kind == "int":
        return value - (1 << 64) if value >= 1 << 63 else value
    raise ValueError(kind)


def _message(schema: dict[int, tuple[str, Any]], data: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, _wire, value in _fields(data):
        if number not in schema:
            continue
        name, kind = schema[number]
        if isinstance(kind, dict):
            out[name] = _message(kind, value)
        elif isinstance(kind, tuple) and kind[0] == "map":
            entry = {k: v for k, _, v in _fields(value)}
            out.setdefault(name, {})[_scalar("string", entry.get(1, b""))] = _scalar(kind[1], entry.get(2, b""))
        elif isinstance(kind, tuple) and kind[0] == "repeated":
            item = _message(kind[1], value) if isinstance(kind[1], dict) else _scalar(kind[1], value)
            out.setdefault(name, []).append(item)
        else:
            out[name] = _scalar(kind, value)
    return out


def decode(body: bytes) -> dict[str, Any]:
    """A protobuf-encoded Kubernetes object as a JSON-like dict."""
    if not body.startswith(MAGIC):
        raise ApiError(400, "BadRequest", "the protobuf body lacks the Kubernetes envelope prefix")
    try:
        envelope = _fields(body[len(MAGIC):])
        type_meta: dict[str, Any] = {}
        raw = b""
        for number, _wire, value in envelope:
            if number == 1:
                type_meta = _message(TYPE_META, value)
            elif number == 2:
                raw = bytes(value)
        kind = type_meta.get("kind", "")
        schema = SCHEMAS.get(kind)
        if schema is None:
            raise ApiError(415, "UnsupportedMediaType",
                           f"the simulated API server does not decode protobuf bodies of kind {kind!r}; "
                           f"send application/json")
        obj = _message(schema, raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "BadRequest", f"the protobuf body could not be decoded: {exc}") from exc
    out = {"apiVersion": type_meta.get("apiVersion", ""), "kind": kind, **obj}
    if kind == "DeleteOptions" and not out["apiVersion"]:
        out["apiVersion"] = "v1"
    return out
