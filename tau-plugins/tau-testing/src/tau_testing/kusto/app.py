"""The loopback Kusto endpoint's HTTP surface: the real REST protocol the azure-kusto-data client speaks.

* ``POST /v2/rest/query``: a v2 data set (a JSON array of frames: ``DataSetHeader``, one ``DataTable`` of
  kind ``PrimaryResult``, ``DataSetCompletion``) for a query in the subset of :mod:`tau_testing.kusto.kql`.
* ``POST /v1/rest/mgmt``: a v1 response (``{"Tables": [...]}``) for the management commands Tau sends:
  ``.create-merge table``, ``.create[-or-alter] table T ingestion json mapping``, ``.create-or-alter function``,
  ``.create ifnotexists materialized-view`` (recorded, not materialized), ``.get ingestion resources``,
  ``.get kusto identity token``, ``.show version`` and ``.show tables``.
* ``GET /v1/rest/auth/metadata``: the cloud metadata the client asks for before its first token.
* ``POST /receive``: the loopback adx-mon receiver (:mod:`tau_testing.kusto.adxmon`), Prometheus remote write
  into the same tables (no bearer token: on the platform the sidecar reaches adx-mon on its node).

Every request needs ``Authorization: Bearer <token>``; ``KustoEndpoint.verify`` decides which tokens pass.
``KustoEndpoint.down`` makes every call answer 503, as a cluster that is unreachable for a while.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

import attrs
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .adxmon import AdxMonReceiver
from .kql import run_query
from .store import KustoFakeError, Store

_CREATE_MERGE = re.compile(r"^\.create-merge\s+table\s+(\w+)\s*\((.*)\)\s*$", re.S)
_MAPPING = re.compile(r"^\.create(?:-or-alter)?\s+table\s+(\w+)\s+ingestion\s+json\s+mapping\s+"
                      r"[\"']([^\"']+)[\"']\s+'(.*)'\s*$", re.S)
_FUNCTION = re.compile(r"^\.create-or-alter\s+function\b.*?\b(\w+)\s*\(\)\s*\{", re.S)
_VIEW = re.compile(r"^\.create\s+(?:ifnotexists\s+)?materialized-view\b.*?\b(\w+)\s+on\s+table\s+(\w+)", re.S)
_V1_TYPES = {"string": "String", "long": "Int64", "real": "Double", "datetime": "DateTime", "dynamic": "Object",
             "bool": "Boolean"}


@attrs.define
class KustoEndpoint:
    """State behind the app: the tables, the ingestion resources to hand out, and fault switches."""

    store: Store
    resources: list[tuple[str, str]] = attrs.Factory(list)
    verify: Callable[[str], bool] = lambda token: bool(token)
    down: bool = False
    functions: dict[str, str] = attrs.Factory(dict)
    views: dict[str, str] = attrs.Factory(dict)
    commands: list[str] = attrs.Factory(list)
    queries: list[str] = attrs.Factory(list)
    adxmon: AdxMonReceiver = attrs.field(default=attrs.Factory(lambda self: AdxMonReceiver(self.store),
                                                               takes_self=True))

    def management(self, csl: str) -> tuple[list[tuple[str, str]], list[list[Any]]]:
        text = csl.strip()
        self.commands.append(text)
        if m := _CREATE_MERGE.match(text):
            cols = [tuple(c.strip().split(":", 1)) for c in m.group(2).split(",") if c.strip()]
            if any(len(c) != 2 for c in cols):
                raise KustoFakeError(f"malformed column list in {text[:80]!r}")
            table = self.store.create_merge(m.group(1), [(c[0].strip(), c[1].strip()) for c in cols])
            return [("TableName", "string"), ("ColumnName", "string"), ("ColumnType", "string")], \
                [[table.name, c, k] for c, k in table.columns]
        if m := _MAPPING.match(text):
            table = self.store.table(m.group(1))
            table.mappings[m.group(2)] = json.loads(m.group(3))
            return [("Name", "string"), ("Kind", "string")], [[m.group(2), "Json"]]
        if m := _FUNCTION.match(text):
            self.functions[m.group(1)] = text
            return [("Name", "string")], [[m.group(1)]]
        if m := _VIEW.match(text):
            self.store.table(m.group(2))
            self.views[m.group(1)] = text
            return [("Name", "string"), ("SourceTable", "string")], [[m.group(1), m.group(2)]]
        if text == ".get ingestion resources":
            return [("ResourceTypeName", "string"), ("StorageRoot", "string")], [list(r) for r in self.resources]
        if text == ".get kusto identity token":
            return [("AuthorizationContext", "string")], [[f"loopback-{uuid.uuid4().hex}"]]
        if text == ".show version":
            return [("BuildVersion", "string"), ("ServiceType", "string")], [["1.0.0.0", "DataManagement"]]
        if text == ".show tables":
            return [("TableName", "string"), ("DatabaseName", "string")], [[t, "Metrics"] for t in self.store.tables]
        raise KustoFakeError(f"management command not supported by the loopback endpoint: {text[:80]!r}")


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, "@type": "Kusto.Data.Exceptions",
                                   "@message": message, "@permanent": status < 500}}, status_code=status)


def v2_frames(columns: list[tuple[str, str]], rows: list[list[Any]]) -> list[dict[str, Any]]:
    return [
        {"FrameType": "DataSetHeader", "IsProgressive": False, "Version": "v2.0", "IsFragmented": False,
         "ErrorReportingPlacement": "EndOfTable"},
        {"FrameType": "DataTable", "TableId": 0, "TableKind": "PrimaryResult", "TableName": "PrimaryResult",
         "Columns": [{"ColumnName": c, "ColumnType": k} for c, k in columns], "Rows": rows},
        {"FrameType": "DataSetCompletion", "HasErrors": False, "Cancelled": False},
    ]


def v1_tables(columns: list[tuple[str, str]], rows: list[list[Any]]) -> dict[str, Any]:
    return {"Tables": [{"TableName": "Table_0", "Rows": rows,
                        "Columns": [{"ColumnName": c, "DataType": _V1_TYPES.get(k, "String"), "ColumnType": k}
                                    for c, k in columns]}]}


def build_app(endpoint: KustoEndpoint) -> Starlette:
    async def gate(request: Request) -> tuple[str, str] | Response:
        if endpoint.down:
            return _error(503, "ServiceUnavailable", "the loopback Kusto endpoint is down (KustoEndpoint.down)")
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer ") or not endpoint.verify(auth[7:]):
            return _error(401, "Unauthorized", "a valid bearer token is required")
        body = await request.json()
        return str(body.get("db") or ""), str(body.get("csl") or "")

    async def query(request: Request) -> Response:
        got = await gate(request)
        if isinstance(got, Response):
            return got
        endpoint.queries.append(got[1])
        try:
            columns, rows = run_query(endpoint.store, got[1], endpoint.functions)
        except KustoFakeError as exc:
            return _error(exc.status, exc.code, str(exc))
        return JSONResponse(v2_frames(columns, rows))

    async def mgmt(request: Request) -> Response:
        got = await gate(request)
        if isinstance(got, Response):
            return got
        try:
            columns, rows = endpoint.management(got[1])
        except KustoFakeError as exc:
            return _error(exc.status, exc.code, str(exc))
        return JSONResponse(v1_tables(columns, rows))

    async def metadata(request: Request) -> Response:
        if endpoint.down:
            return _error(503, "ServiceUnavailable", "the loopback Kusto endpoint is down")
        base = f"{request.url.scheme}://{request.url.netloc}"
        return JSONResponse({"AzureAD": {
            "LoginEndpoint": "https://login.microsoftonline.com", "LoginMfaRequired": False,
            "KustoClientAppId": "db662dc1-0cfe-4e1c-a843-19a68e65be58",
            "KustoClientRedirectUri": "https://microsoft/kustoclient", "KustoServiceResourceId": base,
            "FirstPartyAuthorityUrl": "https://login.microsoftonline.com/f8cdef31-a31e-4b4a-93e4-5f571e91255a"}})

    return Starlette(routes=[Route("/v2/rest/query", query, methods=["POST"]),
                             Route("/v1/rest/mgmt", mgmt, methods=["POST"]),
                             Route("/v1/rest/auth/metadata", metadata, methods=["GET"]),
                             Route("/receive", endpoint.adxmon.receive, methods=["POST"])])
