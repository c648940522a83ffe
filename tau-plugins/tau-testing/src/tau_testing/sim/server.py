"""The HTTP face of the simulated cluster: a raw ASGI application served by uvicorn in a background thread."""

from __future__ import annotations

import asyncio
import collections
import json
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote

from tau_testing.sim import errors
from tau_testing.sim.auth import Attributes, User, forbidden_message
from tau_testing.sim.errors import ApiError
from tau_testing.sim.faults import RequestRecord
from tau_testing.sim.resources import ResourceType
from tau_testing.sim.selectors import labels_match, parse_field_selector, parse_label_selector
from tau_testing.sim.vap import api_request

if TYPE_CHECKING:
    from tau_testing.sim.cluster import SimCluster

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


class ApiApp:
    """The Kubernetes REST API over a ``SimCluster``."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.closing: asyncio.Event | None = None

    # -- ASGI ------------------------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if self.closing is None:
            self.closing = asyncio.Event()
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers: dict[str, str] = {}
        for raw_key, raw_value in scope["headers"]:
            key, value = raw_key.decode("latin-1").lower(), raw_value.decode("latin-1")
            # repeated headers (Impersonate-Group) are joined the way HTTP allows
            headers[key] = f"{headers[key]},{value}" if key in headers else value
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        path = scope["path"]
        if len(path) > 1 and path.endswith("/") and not path.startswith("/version"):
            path = path.rstrip("/")
        request = Request(scope["method"].upper(), path, query, headers, body)
        record = RequestRecord(request.method, "", request.path, None, None, 0, None, request.path)

        def log(status: int) -> None:
            # recorded when the response starts, so a client that has read a response always finds it logged
            record.status = status
            self.cluster.requests.record(record)

        response = Response(send, log)
        try:
            await self.handle(request, response, record, receive)
        except DroppedConnection:
            raise  # uvicorn closes the transport without ending the chunked body
        except ApiError as exc:
            if not response.started:
                extra = [("retry-after", str(exc.retry_after))] if exc.retry_after is not None else []
                await response.json(exc.code, exc.status_body(), extra)
        except Exception as exc:  # a simulator bug must still answer like an API server
            traceback.print_exc(file=sys.stderr)
            if not response.started:
                err = ApiError(500, "InternalError", f"Internal error occurred: {type(exc).__name__}: {exc}")
                await response.json(500, err.status_body())
        finally:
            if not response.started:
                log(0)

    # -- dispatch --------------------------------------------------------------------------------------------

    def _authenticate(self, request: Request) -> User | None:
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            user = self.cluster.users.by_token(auth[7:].strip())
            if user is None:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            return user
        if request.path in PUBLIC_PATHS:
            return None
        raise ApiError(401, "Unauthorized", "Unauthorized")

    def _impersonate(self, request: Request, user: User) -> User:
        """``Impersonate-User``/``Impersonate-Group``: allowed by the ``impersonate`` verb on users and groups."""
        name = request.headers["impersonate-user"].strip()
        groups = [g.strip() for g in request.headers.get("impersonate-group", "").split(",") if g.strip()]
        wanted = [Attributes(verb="impersonate", resource="users", name=name)] + [
            Attributes(verb="impersonate", resource="groups", name=g) for g in groups]
        for attrs in wanted:
            allowed, _ = self.cluster.authorizer.authorize(user, attrs)
            if not allowed:
                raise ApiError(403, "Forbidden", f'{attrs.resource} "{attrs.name}" is forbidden: User "{user.name}" '
                               f'cannot impersonate resource "{attrs.resource}" in API group "" at the cluster '
                               f'scope', name=attrs.name, kind=attrs.resource)
        known = self.cluster.users._by_name.get(name)
        if not groups and known is not None:
            groups = list(known.groups)
        return User(name, groups, token="", uid=known.uid if known is not None else "")

    async def handle(self, request: Request, response: Response, record: RequestRecord, receive: Any) -> None:
        target = self._resolve(request)
        watch = False
        if target is None:
            attrs = Attributes(verb=request.method.lower(), path=request.path, resource_request=False)
            record.verb = attrs.verb
        else:
            watch = request.flag("watch") and request.method == "GET"
            attrs = Attributes(verb=self._verb(request, target, watch), group=target.group,
                               resource=target.rtype.plural, subresource=target.subresource or "",
                               name=target.name or "", namespace=target.namespace or "")
            record.verb = attrs.verb
            record.resource = (f"{target.rtype.plural}.{target.group}" if target.group else target.rtype.plural) + (
                f"/{target.subresource}" if target.subresource else "")
            record.namespace = target.namespace
            record.name = target.name
        user = self._authenticate(request)
        drop_after: int | None = None
        reset = False
        for fault in self.cluster.faults.pick(request.method, request.path + (
                "?" + "&".join(f"{k}={v[-1]}" for k, v in request.query.items()) if request.query else ""),
                user.name if user else None, watch=watch):
            if fault.latency:
                await asyncio.sleep(fault.latency)
            if fault.drop_watch_after is not None:
                drop_after = fault.drop_watch_after
                reset = reset or fault.reset
            if fault.status:
                message = fault.message or {
                    429: "Too many requests, please try again later.",
                    503: "The server is currently unable to handle the request",
                    500: "Internal error occurred: injected fault",
                }.get(fault.status, f"injected fault {fault.status}")
                raise ApiError(fault.status, None, message, retry_after=fault.retry_after)
        if user is not None and request.headers.get("impersonate-user"):
            user = self._impersonate(request, user)
        record.user = user.name if user else None
        if user is not None:
            allowed, _ = self.cluster.authorizer.authorize(user, attrs)
            if not allowed:
                raise ApiError(403, "Forbidden", forbidden_message(user, attrs), name=attrs.name or None,
                               group=attrs.group, kind=attrs.resource or None)
        if target is None:
            await self._non_resource(request, response)
            return
        assert user is not None
        if watch:
            await self._watch(request, response, target, receive, drop_after, reset)
            return
        wrote = await self._resource(request, response, target, user, receive)
        if wrote:
            try:
                self.cluster.after_write()
            except Exception as exc:  # recorded; the write itself succeeded
                self.cluster.settle_errors.append(exc)
                traceback.print_exc(file=sys.stderr)

    def _verb(self, request: Request, target: Target, watch: bool) -> str:
        method = request.method
        if method == "GET":
            if watch:
                return "watch"
            return "get" if target.name else "list"
        if method == "POST":
            return "create"
        if method == "PUT":
            return "update"
        if method == "PATCH":
            return "patch"
        if method == "DELETE":
            return "delete" if target.name else "deletecollection"
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    def _resolve(self, request: Request) -> Target | None:
        parts = [unquote(p) for p in request.path.strip("/").split("/")] if request.path != "/" else []
        if len(parts) >= 3 and parts[0] == "api" and parts[1] == "v1":
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 4 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        types = self.store.types
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and types.by_plural(group, version, rest[2]) is not None:
            namespace, rest = rest[1], rest[2:]
        rtype = types.by_plural(group, version, rest[0])
        if rtype is None or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        if sub is not None and sub not in rtype.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if namespace is not None and not rtype.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if rtype.namespaced and name is not None and namespace is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return Target(group, version, rtype, namespace, name, sub)

    # -- discovery -------------------------------------------------------------------------------------------

    def version_info(self) -> dict[str, Any]:
        version = self.cluster.kubernetes_version.lstrip("v")
        major, _, rest = version.partition(".")
        minor, _, patch = rest.partition(".")
        return {"major": major, "minor": minor, "emulationMajor": major, "emulationMinor": minor,
                "gitVersion": f"v{major}.{minor}.{patch or '0'}", "gitCommit": "0" * 40,
                "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.0",
                "compiler": "gc", "platform": "linux/amd64"}

    def _group_entry(self, group: str) -> dict[str, Any]:
        types = self.store.types
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in types.versions(group)]
        preferred = types.preferred_version(group) or versions[0]["version"]
        ordered = sorted(versions, key=lambda v: v["version"] != preferred)
        return {"name": group, "versions": ordered,
                "preferredVersion": {"groupVersion": f"{group}/{preferred}", "version": preferred}}

    async def _non_resource(self, request: Request, response: Response) -> None:
        if request.method != "GET":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        path = request.path
        parts = path.strip("/").split("/")
        types = self.store.types
        if path in ("/version", "/version/"):
            await response.json(200, self.version_info())
        elif path in ("/healthz", "/livez", "/readyz"):
            await response.text(200, "ok")
        elif path == "/api":
            await response.json(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.cluster.host}:{self.cluster.port}"}]})
        elif path == "/apis":
            groups = [self._group_entry(g) for g in types.groups() if g]
            await response.json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        elif path == "/api/v1":
            await response.json(200, self._resource_list("", "v1"))
        elif len(parts) == 2 and parts[0] == "apis":
            if not types.versions(parts[1]):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            await response.json(200, {"kind": "APIGroup", "apiVersion": "v1", **self._group_entry(parts[1])})
        elif len(parts) == 3 and parts[0] == "apis":
            if not types.in_group_version(parts[1], parts[2]):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            await response.json(200, self._resource_list(parts[1], parts[2]))
        elif path == "/openapi/v3":
            gvs = [("", "v1")] + [(g, v) for g in types.groups() if g for v in types.versions(g)]
            index = {}
            for g, v in gvs:
                key = f"apis/{g}/{v}" if g else "api/v1"
                index[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={self._gv_hash(g, v)}"}
            await response.json(200, {"paths": index})
        elif path.startswith("/openapi/v3/"):
            rest = path[len("/openapi/v3/"):].split("/")
            if rest[:2] == ["api", "v1"] and len(rest) == 2:
                group, version = "", "v1"
            elif len(rest) == 3 and rest[0] == "apis":
                group, version = rest[1], rest[2]
            else:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if not types.in_group_version(group, version):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            await response.json(200, self._openapi_v3(group, version))
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _gv_hash(self, group: str, version: str) -> str:
        import hashlib

        names = ",".join(sorted(t.plural for t in self.store.types.in_group_version(group, version)))
        return hashlib.sha256(f"{group}/{version}:{names}".encode()).hexdigest()[:32].upper()

    def _openapi_v3(self, group: str, version: str) -> dict[str, Any]:
        """A skeletal OpenAPI v3 document: every resource's operations with their GVK and query parameters.
        It carries no schemas (kubectl then falls back to its built-in patch strategies)."""
        prefix = f"/apis/{group}/{version}" if group else "/api/v1"
        field_validation = {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True},
                            "description": "Ignore, Warn or Strict"}
        dry_run = {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}}
        paths: dict[str, Any] = {}
        for rtype in self.store.types.in_group_version(group, version):
            gvk = {"group": group, "version": version, "kind": rtype.kind}
            base = f"{prefix}/namespaces/{{namespace}}/{rtype.plural}" if rtype.namespaced else \
                f"{prefix}/{rtype.plural}"

            def op(action: str, params: list[dict[str, Any]], gvk: dict[str, str] = gvk,
                   kind: str = rtype.kind) -> dict[str, Any]:
                return {"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
                        "operationId": f"{action}{kind}", "parameters": params,
                        "responses": {"200": {"description": "OK"}}}

            paths[base] = {"get": op("list", []), "post": op("post", [dry_run, field_validation])}
            paths[f"{base}/{{name}}"] = {
                "get": op("get", []), "put": op("put", [dry_run, field_validation]),
                "patch": op("patch", [dry_run, field_validation]), "delete": op("delete", [dry_run]),
                "parameters": [field_validation],
            }
            for sub in rtype.subresources:
                if sub in ("status", "scale"):
                    paths[f"{base}/{{name}}/{sub}"] = {"get": op("get", []),
                                                        "patch": op("patch", [dry_run, field_validation])}
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes (tau-sim)", "version": self.version_info()[
            "gitVersion"]}, "paths": paths, "components": {"schemas": {}}}

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources: list[dict[str, Any]] = []
        for rtype in sorted(self.store.types.in_group_version(group, version), key=lambda t: t.plural):
            resources.extend(rtype.discovery_entries())
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": resources}

    # -- resources -------------------------------------------------------------------------------------------

    def _dry_run(self, request: Request, body: Any = None) -> bool:
        values = request.query.get("dryRun") or []
        if isinstance(body, dict) and isinstance(body.get("dryRun"), list):
            values = values + body["dryRun"]
        for value in values:
            if value != "All":
                raise errors.bad_request(f'Invalid dryRun value: "{value}": supported values: "All"')
        return bool(values)

    def _body_object(self, request: Request, target: Target) -> dict[str, Any]:
        body = request.json()
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        rtype = target.rtype
        body.setdefault("apiVersion", rtype.api_version)
        body.setdefault("kind", rtype.kind)
        if body["apiVersion"] != rtype.api_version or body["kind"] != rtype.kind:
            raise errors.bad_request(f"the API version in the data ({body['apiVersion']}) does not match the "
                                     f"expected API version ({rtype.api_version})" if body["apiVersion"] !=
                                     rtype.api_version else f"the kind in the data ({body['kind']}) does not "
                                     f"match the expected kind ({rtype.kind})")
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if rtype.namespaced and target.namespace is not None:
            if meta.get("namespace") and meta["namespace"] != target.namespace:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent "
                                         "on the request")
            meta["namespace"] = target.namespace
        if target.name is not None:
            if meta.get("name") and meta["name"] != target.name:
                raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the "
                                         f"URL ({target.name})")
            meta["name"] = target.name
        return body

    async def _resource(self, request: Request, response: Response, target: Target, user: User,
                        receive: Any) -> bool:
        """Serve a resource request; True when it committed a write."""
        rtype, method, sub = target.rtype, request.method, target.subresource
        gk = rtype.group_kind
        if sub == "log" and method == "GET":
            await self._logs(request, response, target, receive)
            return False
        if sub == "scale":
            return await self._scale(request, response, target)
        if gk[0] in ("authorization.k8s.io", "authentication.k8s.io"):
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested "
                                                        "resource")
            await self._review(request, response, target, user)
            return False
        if sub in ("binding", "eviction"):
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested "
                                                        "resource")
            return await self._pod_action(request, response, target)
        if method == "GET":
            if target.name is not None:
                obj = self.store.get(rtype.api_version, rtype.kind, target.namespace, target.name)
                if obj is None:
                    raise errors.not_found(rtype.plural, rtype.group, target.name)
                table = self._table(request, rtype, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]})
                await response.json(200, table if table is not None else obj)
            else:
                await self._list(request, response, target)
            return False
        if "create" not in rtype.verbs and method == "POST":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        warnings: list[str] = []
        # the API server's default for clients that do not say is Warn; internal writes pass None (no decode check)
        field_validation = request.param("fieldValidation") or "Warn"
        if field_validation.lower() not in ("strict", "warn", "ignore"):
            raise errors.bad_request(f'fieldValidation "{field_validation}" is not supported: supported values: '
                                     f'"Ignore", "Warn", "Strict"')
        if method == "POST":
            if target.name is not None:
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested "
                                                        "resource")
            obj = self._body_object(request, target)
            dry = self._dry_run(request)
            with api_request(user, warnings, dry):
                created = self.store.create(obj, dry_run=dry, field_validation=field_validation, warnings=warnings)
            await response.json(201, created, _warning_headers(warnings))
            return not dry
        if method == "PUT":
            if target.name is None:
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested "
                                                        "resource")
            obj = self._body_object(request, target)
            dry = self._dry_run(request)
            if sub == "status":
                updated = self.store.update_status(obj, dry_run=dry, warnings=warnings)
            elif sub == "finalize":
                current = self.store.get_or_404(rtype.api_version, rtype.kind, None, target.name)
                current["spec"] = obj.get("spec") or {}
                updated = self.store.update(current, dry_run=dry)
            else:
                with api_request(user, warnings, dry):
                    updated = self.store.update(obj, dry_run=dry, field_validation=field_validation,
                                                warnings=warnings)
            await response.json(200, updated, _warning_headers(warnings))
            return not dry
        if method == "PATCH":
            if target.name is None:
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested "
                                                        "resource")
            if request.headers.get("content-type", "").split(";")[0].strip().lower() == \
                    "application/apply-patch+yaml":
                dry = self._dry_run(request)
                with api_request(user, warnings, dry):
                    applied = self.store.apply(rtype.api_version, rtype.kind, target.namespace, target.name,
                                               self._apply_body(request), request.param("fieldManager"),
                                               force=request.flag("force"), subresource=sub, dry_run=dry,
                                               field_validation=field_validation, warnings=warnings)
                await response.json(200, applied, _warning_headers(warnings))
                return not dry
            patch_type = self._patch_type(request)
            patch = request.json()
            dry = self._dry_run(request)
            with api_request(user, warnings, dry):
                patched = self.store.patch(rtype.api_version, rtype.kind, target.namespace, target.name, patch,
                                           patch_type, sub, dry_run=dry, field_validation=field_validation,
                                           warnings=warnings)
            await response.json(200, patched, _warning_headers(warnings))
            return not dry
        if method == "DELETE":
            options = request.json() or {}
            if not isinstance(options, dict):
                raise errors.bad_request("DeleteOptions must be a JSON object")
            dry = self._dry_run(request, options)
            propagation = options.get("propagationPolicy") or request.param("propagationPolicy")
            orphan = options.get("orphanDependents")
            if orphan is None and request.param("orphanDependents") is not None:
                orphan = request.flag("orphanDependents")
            if propagation is None and orphan is not None:
                propagation = "Orphan" if orphan else "Background"
            if propagation is None and gk == ("batch", "Job"):
                propagation = "Orphan"
                warnings.append("child pods are preserved by default when jobs are deleted; set "
                                "propagationPolicy=Background to remove them or set propagationPolicy=Orphan to "
                                "suppress this warning")
            if target.name is None:
                deleted = self.store.delete_collection(
                    rtype.api_version, rtype.kind, target.namespace, request.param("labelSelector"),
                    request.param("fieldSelector"), propagation, dry_run=dry)
                await response.json(200, {"kind": f"{rtype.kind}List", "apiVersion": rtype.api_version,
                                          "metadata": {"resourceVersion": self.store.resource_version},
                                          "items": deleted}, _warning_headers(warnings))
                return not dry and bool(deleted)
            preconditions = options.get("preconditions") or {}
            result = self.store.delete(rtype.api_version, rtype.kind, target.namespace, target.name, propagation,
                                       preconditions, dry_run=dry)
            pending = result is not None and bool(result["metadata"].get("deletionTimestamp")) and \
                self.store.get(rtype.api_version, rtype.kind, target.namespace, target.name) is not None
            if pending or rtype.custom or gk in RETURNS_DELETED_OBJECT or result is None:
                await response.json(200, result, _warning_headers(warnings))
            else:
                await response.json(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                          "details": {"name": target.name, "group": rtype.group,
                                                      "kind": rtype.plural, "uid": result["metadata"]["uid"]}},
                                    _warning_headers(warnings))
            return not dry
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    @staticmethod
    def _apply_body(request: Request) -> Any:
        text = request.body.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except ValueError:
            import yaml

            try:
                return yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise errors.bad_request(f"the apply configuration is neither JSON nor YAML: {exc}") from exc

    def _patch_type(self, request: Request) -> str:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        patch_type = PATCH_TYPES.get(content_type)
        if patch_type is None:
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of the request was in an unknown format - accepted media types include: "
                           f"application/json-patch+json, application/merge-patch+json, "
                           f"application/strategic-merge-patch+json, application/apply-patch+yaml "
                           f"(got {content_type!r})")
        return patch_type

    async def _list(self, request: Request, response: Response, target: Target) -> None:
        rtype = target.rtype
        items, rv, token, remaining = self.store.list_page(
            rtype.api_version, rtype.kind, target.namespace, request.param("labelSelector"),
            request.param("fieldSelector"), request.int_param("limit"), request.param("continue"))
        meta: dict[str, Any] = {"resourceVersion": rv}
        if token:
            meta["continue"] = token
            meta["remainingItemCount"] = remaining
        table = self._table(request, rtype, items, meta)
        await response.json(200, table if table is not None else {
            "kind": f"{rtype.kind}List", "apiVersion": rtype.api_version, "metadata": meta, "items": items})

    def _table(self, request: Request, rtype: ResourceType, items: list[dict[str, Any]],
               meta: dict[str, Any]) -> dict[str, Any] | None:
        """A Table of ``items`` when the client asked for one (``kubectl get``), else None."""
        from tau_testing.sim import tables

        if not tables.wants_table(request.headers.get("accept", "")):
            return None
        crd = None
        if rtype.custom:
            crd = self.store.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", None,
                                 f"{rtype.plural}.{rtype.group}")
        columns = tables.columns_for(rtype, crd)
        return tables.table(rtype, items, self.cluster.clock.now(), columns, request.param("includeObject"), meta)

    # -- watch -----------------------------------------------------------------------------------------------

    async def _watch(self, request: Request, response: Response, target: Target, receive: Any,
                     drop_after: int | None, reset: bool = False) -> None:
        rtype = target.rtype
        reqs = parse_label_selector(request.param("labelSelector"))
        field_selector = request.param("fieldSelector")
        fmatch = parse_field_selector(field_selector, rtype.group, rtype.kind)
        name_match = target.name
        as_table = "as=Table" in request.headers.get("accept", "")

        def selected(obj: dict[str, Any]) -> bool:
            if name_match is not None and obj["metadata"]["name"] != name_match:
                return False
            if reqs and not labels_match(reqs, obj["metadata"].get("labels")):
                return False
            return not field_selector or fmatch(obj)
        timeout = request.int_param("timeoutSeconds")
        bookmarks = request.flag("allowWatchBookmarks")
        rv = request.param("resourceVersion")
        send_initial = rv in (None, "", "0") or request.flag("sendInitialEvents")
        loop = asyncio.get_running_loop()
        pending: collections.deque[tuple[str, dict[str, Any], dict[str, Any] | None]] = collections.deque()
        wake = asyncio.Event()

        def on_event(event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            pending.append((event_type, obj, old))
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # loop closed during shutdown
                pass

        unsubscribe = self.store.watch(rtype.api_version, rtype.kind, rv, on_event, namespace=target.namespace,
                                       send_initial=send_initial)
        start_rv = int(self.store.resource_version) if send_initial else int(rv or 0)
        last_rv = start_rv
        initial_count = len(pending) if send_initial else 0
        disconnected = asyncio.Event()

        async def listen() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    disconnected.set()
                    wake.set()
                    return

        listener = asyncio.create_task(listen())
        deadline = time.monotonic() + timeout if timeout else None
        sent = 0
        dropped = False
        next_bookmark = time.monotonic() + self.cluster.bookmark_interval
        try:
            await response.start(200, "application/json", [("transfer-encoding", "chunked")])
            assert self.closing is not None
            while not disconnected.is_set() and not self.closing.is_set():
                batch: list[bytes] = []
                while pending:
                    event_type, obj, old = pending.popleft()
                    obj_rv = int(obj["metadata"]["resourceVersion"])
                    last_rv = max(last_rv, obj_rv)
                    if initial_count > 0:
                        initial_count -= 1
                    now_matches = selected(self.store.view(obj, rtype))
                    if event_type == "MODIFIED":
                        # an object moving into or out of the selection is ADDED or DELETED for this watch
                        was = old is not None and selected(self.store.view(old, rtype))
                        if now_matches and not was:
                            event_type = "ADDED"
                        elif was and not now_matches:
                            event_type = "DELETED"
                        elif not now_matches:
                            continue
                    elif not now_matches:
                        continue
                    shown: dict[str, Any] = dict(self.store.view(obj, rtype))
                    shown["apiVersion"] = rtype.api_version
                    if as_table:
                        shown = self._table(request, rtype, [shown], {
                            "resourceVersion": shown["metadata"]["resourceVersion"]}) or shown
                    batch.append(json.dumps({"type": event_type, "object": shown}, separators=(",", ":")).encode()
                                 + b"\n")
                if send_initial and request.flag("sendInitialEvents") and bookmarks and initial_count == 0:
                    batch.append(self._bookmark(rtype, last_rv, initial_end=True))
                    send_initial = False
                for line in batch:
                    if drop_after is not None and sent >= drop_after:
                        break
                    await response.chunk(line)
                    sent += 1
                if drop_after is not None and sent >= drop_after:
                    if reset:
                        raise DroppedConnection
                    return
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    return
                if bookmarks and now >= next_bookmark:
                    with self.store._lock:
                        if not pending:
                            last_rv = max(last_rv, int(self.store.resource_version))
                    await response.chunk(self._bookmark(rtype, last_rv))
                    next_bookmark = now + self.cluster.bookmark_interval
                wait = 0.5
                if deadline is not None:
                    wait = min(wait, max(0.0, deadline - now))
                if bookmarks:
                    wait = min(wait, max(0.0, next_bookmark - now))
                if not pending:
                    try:
                        await asyncio.wait_for(wake.wait(), timeout=max(wait, 0.001))
                    except TimeoutError:
                        pass
                    wake.clear()
        except DroppedConnection:
            dropped = True
            raise
        finally:
            unsubscribe()
            listener.cancel()
            if response.started and not dropped:
                try:
                    await response.chunk(b"", more=False)
                except Exception:  # the client is gone
                    pass

    def _bookmark(self, rtype: ResourceType, rv: int, initial_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv), "creationTimestamp": None}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return json.dumps({"type": "BOOKMARK", "object": {"kind": rtype.kind, "apiVersion": rtype.api_version,
                                                          "metadata": meta}}, separators=(",", ":")).encode() + b"\n"

    # -- pods/log --------------------------------------------------------------------------------------------

    async def _logs(self, request: Request, response: Response, target: Target, receive: Any) -> None:
        assert target.name is not None and target.namespace is not None
        ns, name = target.namespace, target.name
        pod = self.store.get("v1", "Pod", ns, name)
        if pod is None:
            raise errors.not_found("pods", "", name)
        spec = pod.get("spec") or {}
        names = [c.get("name") for c in spec.get("containers") or []]
        init_names = [c.get("name") for c in spec.get("initContainers") or []]
        container = request.param("container")
        if not container:
            if len(names) != 1:
                message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
                if init_names:
                    message += f" or one of the init containers: [{' '.join(init_names)}]"
                raise errors.bad_request(message)
            container = names[0]
        if container not in names and container not in init_names:
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        logs = self.cluster.logs
        previous = request.flag("previous")
        if previous and not logs.has_previous(ns, name, container):
            raise errors.bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
        if not logs.has(ns, name, container):
            statuses = (pod.get("status") or {}).get("containerStatuses", []) + (
                (pod.get("status") or {}).get("initContainerStatuses", []))
            status = next((s for s in statuses if s.get("name") == container), None)
            waiting = ((status or {}).get("state") or {}).get("waiting")
            if waiting is not None or (status is None and (pod.get("status") or {}).get("phase") == "Pending"):
                reason = (waiting or {}).get("reason") or "ContainerCreating"
                raise errors.bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
        tail = request.int_param("tailLines")
        limit = request.int_param("limitBytes")
        timestamps = request.flag("timestamps")
        since: Any = None
        if request.param("sinceSeconds"):
            since = float(request.int_param("sinceSeconds") or 0)
        elif request.param("sinceTime"):
            from tau_testing.sim.clock import parse_time

            since = parse_time(request.param("sinceTime") or "")
        snapshot, _, generation = logs.entries(ns, name, container, previous=previous)
        lines = logs.read(ns, name, container, previous=previous, tail=tail, since=since, timestamps=timestamps,
                          limit_bytes=limit, entries=snapshot)
        if not request.flag("follow") or previous:
            text = "".join(line + "\n" for line in lines)
            if limit is not None:
                text = text.encode()[:limit].decode("utf-8", "ignore")
            await response.text(200, text)
            return
        await response.start(200, "text/plain", [("transfer-encoding", "chunked")])
        used = 0
        disconnected = asyncio.Event()

        async def listen() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    disconnected.set()
                    return

        listener = asyncio.create_task(listen())
        try:
            for line in lines:
                data = (line + "\n").encode()
                if limit is not None:
                    data = data[: max(0, limit - used)]
                used += len(data)
                if data:
                    await response.chunk(data)
            index = len(snapshot)  # continue right after the snapshot the first lines came from
            assert self.closing is not None
            while not disconnected.is_set() and not self.closing.is_set():
                if limit is not None and used >= limit:
                    return
                entries, terminated, gen = logs.entries(ns, name, container, start=index)
                if gen != generation:
                    return
                for entry in entries:
                    data = (logs.format(entry, timestamps) + "\n").encode()
                    if limit is not None:
                        data = data[: max(0, limit - used)]
                    used += len(data)
                    if data:
                        await response.chunk(data)
                index += len(entries)
                if terminated:
                    return
                current = self.store.get("v1", "Pod", ns, name)
                if current is None:
                    return
                if terminated is None and _container_ended(current, container):
                    return  # it ended without writing a line (and without the log book hearing of it)
                await asyncio.sleep(0.02)
        finally:
            listener.cancel()
            try:
                await response.chunk(b"", more=False)
            except Exception:  # the client is gone
                pass

    # -- scale -----------------------------------------------------------------------------------------------

    def _scale_paths(self, rtype: ResourceType) -> tuple[str, str, str | None]:
        if rtype.custom:
            paths = rtype.scale_paths
            return (paths.get("specReplicasPath", ".spec.replicas"), paths.get("statusReplicasPath",
                    ".status.replicas"), paths.get("labelSelectorPath"))
        return ".spec.replicas", ".status.replicas", None

    @staticmethod
    def _dig(obj: Any, path: str) -> Any:
        for part in path.strip(".").split("."):
            if not isinstance(obj, dict):
                return None
            obj = obj.get(part)
        return obj

    def _scale_of(self, obj: dict[str, Any], rtype: ResourceType) -> dict[str, Any]:
        spec_path, status_path, selector_path = self._scale_paths(rtype)
        meta = obj["metadata"]
        selector = ""
        if selector_path:
            selector = str(self._dig(obj, selector_path) or "")
        else:
            sel = (obj.get("spec") or {}).get("selector") or {}
            selector = ",".join(f"{k}={v}" for k, v in (sel.get("matchLabels") or {}).items())
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                             if k in meta},
                "spec": {"replicas": int(self._dig(obj, spec_path) or 0)},
                "status": {"replicas": int(self._dig(obj, status_path) or 0), "selector": selector}}

    async def _scale(self, request: Request, response: Response, target: Target) -> bool:
        rtype = target.rtype
        assert target.name is not None
        obj = self.store.get_or_404(rtype.api_version, rtype.kind, target.namespace, target.name)
        scale = self._scale_of(obj, rtype)
        if request.method == "GET":
            await response.json(200, scale)
            return False
        dry = self._dry_run(request)
        if request.method == "PUT":
            new_scale = request.json() or {}
        elif request.method == "PATCH":
            from tau_testing.sim.patch import json_patch, merge_patch

            patch_type = self._patch_type(request)
            patch = request.json()
            new_scale = json_patch(scale, patch) if patch_type == "json" else merge_patch(scale, patch)
        else:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        replicas = (new_scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise errors.invalid("Scale", "autoscaling", target.name, [errors.field_invalid(
                "spec.replicas", replicas, "must be greater than or equal to 0")])
        rv = (new_scale.get("metadata") or {}).get("resourceVersion")
        if rv and request.method == "PUT" and rv != obj["metadata"]["resourceVersion"]:
            raise errors.conflict(rtype.plural, rtype.group, target.name)
        spec_path = self._scale_paths(rtype)[0].strip(".").split(".")
        node = obj
        for part in spec_path[:-1]:
            node = node.setdefault(part, {})
        node[spec_path[-1]] = replicas
        updated = self.store.update(obj, dry_run=dry)
        await response.json(200, self._scale_of(updated, rtype))
        return not dry

    # -- pod actions, reviews --------------------------------------------------------------------------------

    async def _pod_action(self, request: Request, response: Response, target: Target) -> bool:
        assert target.name is not None
        body = request.json() or {}
        pod = self.store.get_or_404("v1", "Pod", target.namespace, target.name)
        dry = self._dry_run(request, body.get("deleteOptions") if isinstance(body, dict) else None)
        if target.subresource == "binding":
            node = ((body or {}).get("target") or {}).get("name")
            if not node:
                raise errors.invalid("Binding", "", target.name, [errors.field_required("target.name")])
            if (pod.get("spec") or {}).get("nodeName"):
                raise errors.conflict("pods", "", target.name,
                                      f'pod {target.name} is already assigned to node "{pod["spec"]["nodeName"]}"')
            if not dry:
                self.store.patch("v1", "Pod", target.namespace, target.name, {"spec": {"nodeName": node}}, "merge")
        elif not dry:
            self.store.delete("v1", "Pod", target.namespace, target.name, "Background")
        await response.json(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                  "code": 201})
        return not dry

    async def _review(self, request: Request, response: Response, target: Target, user: User) -> None:
        body = request.json() or {}
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        kind = target.rtype.kind
        spec = body.get("spec") or {}
        out = {"kind": kind, "apiVersion": target.rtype.api_version, "metadata": {"creationTimestamp": None},
               "spec": spec}
        if kind == "SelfSubjectReview":
            out["status"] = {"userInfo": {"username": user.name, "uid": user.uid, "groups": user.all_groups}}
            await response.json(201, out)
            return
        subject = user
        if kind == "SubjectAccessReview":
            if not spec.get("user") and not spec.get("groups"):
                raise errors.invalid(kind, "authorization.k8s.io", "", [errors.field_required(
                    "spec.user", "at least one of user or group must be specified")])
            subject = User(spec.get("user", ""), [g for g in spec.get("groups") or []
                                                   if g != "system:authenticated"])
        if kind == "SelfSubjectRulesReview":
            namespace = spec.get("namespace") or ""
            rules = self.cluster.authorizer.rules_for(subject, namespace) if "system:masters" not in \
                subject.groups else [("", {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
                                     ("", {"verbs": ["*"], "nonResourceURLs": ["*"]})]
            resource_rules = [{k: r.get(k, []) for k in ("verbs", "apiGroups", "resources", "resourceNames")
                               if r.get(k) is not None or k != "resourceNames"}
                              for _, r in rules if "nonResourceURLs" not in r]
            non_resource = [{"verbs": r.get("verbs", []), "nonResourceURLs": r["nonResourceURLs"]}
                            for _, r in rules if "nonResourceURLs" in r]
            out["status"] = {"resourceRules": resource_rules, "nonResourceRules": non_resource, "incomplete": False}
            await response.json(201, out)
            return
        ra = spec.get("resourceAttributes")
        nra = spec.get("nonResourceAttributes")
        if ra:
            attrs = Attributes(verb=ra.get("verb", ""), group=ra.get("group", ""), resource=ra.get("resource", ""),
                               subresource=ra.get("subresource", ""), name=ra.get("name", ""),
                               namespace=ra.get("namespace", ""))
        elif nra:
            attrs = Attributes(verb=nra.get("verb", ""), path=nra.get("path", ""), resource_request=False)
        else:
            raise errors.invalid(kind, "authorization.k8s.io", "", [errors.field_required(
                "spec.resourceAttributes", "exactly one of nonResourceAttributes or resourceAttributes must be "
                                           "specified")])
        allowed, why = self.cluster.authorizer.authorize(subject, attrs)
        status: dict[str, Any] = {"allowed": allowed}
        if allowed and why:
            status["reason"] = why
        out["status"] = status
        await response.json(201, out)


def _container_ended(pod: dict[str, Any], container: str) -> bool:
    """The pod says this container's current instance has terminated (or the whole pod has)."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return True
    for entry in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if entry.get("name") == container:
            return "terminated" in (entry.get("state") or {})
    return False


class ServerThread:
    """uvicorn serving ``ApiApp`` on 127.0.0.1 (random port) from a daemon thread with its own event loop."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.app = ApiApp(cluster)
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._error: BaseException | None = None

    def start(self) -> None:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((self.cluster.host, self.cluster.port or 0))
        sock.listen(256)
        sock.setblocking(False)
        self.cluster.port = sock.getsockname()[1]
        ssl_options: dict[str, Any] = {}
        if self.cluster.tls:
            from tau_testing.sim.tls import make_certificates

            ssl_options = make_certificates(self.cluster)
        # "critical": the only exceptions reaching uvicorn are injected connection drops (the app answers every
        # other error itself and prints unexpected ones)
        config = uvicorn.Config(self.app, lifespan="off", log_level="critical", access_log=False, ws="none",
                                timeout_graceful_shutdown=1, timeout_keep_alive=30, **ssl_options)
        self._server = uvicorn.Server(config)

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._server.serve(sockets=[sock]))
            except BaseException as exc:  # surfaced by start()
                self._error = exc
            finally:
                sock.close()
                loop.close()

        self._thread = threading.Thread(target=run, name=f"tau-sim-{self.cluster.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if self._error is not None or not self._thread.is_alive():
                raise RuntimeError(f"the simulated API server did not start: {self._error}")
            if time.monotonic() > deadline:
                raise RuntimeError("the simulated API server did not start within 10 s")
            time.sleep(0.002)

    def stop(self) -> None:
        if self._server is None:
            return
        loop = self._loop
        if loop is not None and self.app.closing is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self.app.closing.set)
            except RuntimeError:
                pass
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
