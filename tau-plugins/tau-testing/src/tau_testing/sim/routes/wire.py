"""The wire side of the simulated API server: the request, its target, and the response writer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tau_testing.sim import errors
from tau_testing.sim.resources import ResourceType

PUBLIC_PATHS = {"/version", "/version/", "/healthz", "/livez", "/readyz"}
PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
}
# Types whose DELETE answers with the deleted object rather than a Status.
RETURNS_DELETED_OBJECT = {("", "Pod"), ("", "Service"), ("", "Namespace")}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else default

    def flag(self, name: str) -> bool:
        return (self.param(name) or "").lower() in ("true", "1")

    def int_param(self, name: str) -> int | None:
        value = self.param(name)
        if value in (None, ""):
            return None
        try:
            return int(str(value))
        except ValueError as exc:
            raise errors.bad_request(f"invalid value for {name}: {value!r}") from exc

    def json(self) -> Any:
        if not self.body:
            return None
        if self.headers.get("content-type", "").startswith("application/vnd.kubernetes.protobuf"):
            from tau_testing.sim.protobuf import decode

            return decode(self.body)
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise errors.bad_request(f"the request body is not valid JSON: {exc}") from exc


@dataclass
class Target:
    group: str
    version: str
    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


class DroppedConnection(Exception):
    """Raised through uvicorn on purpose: the server closes the connection mid-response (an injected fault)."""


class Response:
    """Collects what the app sent, for the request log."""

    def __init__(self, send: Any, on_start: Any = None) -> None:
        self._send = send
        self.status = 0
        self.started = False
        self._on_start = on_start

    async def start(self, status: int, content_type: str = "application/json",
                    headers: list[tuple[str, str]] | None = None, length: int | None = None) -> None:
        self.status = status
        self.started = True
        if self._on_start is not None:
            self._on_start(status)
        raw = [(b"content-type", content_type.encode()), (b"cache-control", b"no-cache, private"),
               (b"audit-id", b"tau-sim")]
        if length is not None:
            raw.append((b"content-length", str(length).encode()))
        for k, v in headers or []:
            raw.append((k.lower().encode(), v.encode("latin-1", "replace")))
        await self._send({"type": "http.response.start", "status": status, "headers": raw})

    async def chunk(self, data: bytes, more: bool = True) -> None:
        await self._send({"type": "http.response.body", "body": data, "more_body": more})

    async def json(self, status: int, body: Any, headers: list[tuple[str, str]] | None = None) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        await self.start(status, "application/json", headers, len(data))
        await self.chunk(data, more=False)

    async def text(self, status: int, text: str, content_type: str = "text/plain; charset=utf-8") -> None:
        data = text.encode()
        await self.start(status, content_type, None, len(data))
        await self.chunk(data, more=False)


def _warning_headers(warnings: list[str]) -> list[tuple[str, str]]:
    escaped = (w.replace("\\", "\\\\").replace('"', '\\"') for w in warnings)
    return [("warning", f'299 - "{w}"') for w in escaped]

