"""The HTTP face of the simulated cluster: a raw ASGI application served by uvicorn in a background thread."""

from __future__ import annotations

import asyncio
import sys
import traceback
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote

from tau_testing.sim import errors
from tau_testing.sim.auth import Attributes, User, forbidden_message
from tau_testing.sim.errors import ApiError
from tau_testing.sim.faults import RequestRecord
from tau_testing.sim.routes.discovery import DiscoveryRoutes
from tau_testing.sim.routes.logs import LogRoutes
from tau_testing.sim.routes.subresources import SubresourceRoutes
from tau_testing.sim.routes.watch import WatchRoutes
from tau_testing.sim.routes.wire import (
    PATCH_TYPES,
    PUBLIC_PATHS,
    RETURNS_DELETED_OBJECT,
    DroppedConnection,
    Request,
    Response,
    Target,
    _warning_headers,
)
from tau_testing.sim.vap import api_request
from tau_testing.uvicorn_thread import UvicornThread, listen

if TYPE_CHECKING:
    from tau_testing.sim.cluster import SimCluster

__all__ = ["PATCH_TYPES", "PUBLIC_PATHS", "RETURNS_DELETED_OBJECT", "ApiApp", "DroppedConnection", "Request",
           "Response", "ServerThread", "Target"]


class ApiApp(DiscoveryRoutes, WatchRoutes, LogRoutes, SubresourceRoutes):
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

    # -- resources -------------------------------------------------------------------------------------------

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
        writers = {"POST": self._create, "PUT": self._replace, "PATCH": self._patch_object, "DELETE": self._delete}
        writer = writers.get(method)
        if writer is None:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        return await writer(request, response, target, user, warnings, field_validation)

    async def _create(self, request: Request, response: Response, target: Target, user: User, warnings: list[str],
                      field_validation: str) -> bool:
        """Create the object in the body; True when it committed."""
        if target.name is not None:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested "
                                                    "resource")
        obj = self._body_object(request, target)
        dry = self._dry_run(request)
        with api_request(user, warnings, dry):
            created = self.store.create(obj, dry_run=dry, field_validation=field_validation, warnings=warnings)
        await response.json(201, created, _warning_headers(warnings))
        return not dry

    async def _replace(self, request: Request, response: Response, target: Target, user: User, warnings: list[str],
                       field_validation: str) -> bool:
        """Replace the object (or its status, or a namespace's finalizers); True when it committed."""
        rtype, sub = target.rtype, target.subresource
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

    async def _patch_object(self, request: Request, response: Response, target: Target, user: User,
                            warnings: list[str], field_validation: str) -> bool:
        """Patch or server-side apply; True when it committed."""
        rtype, sub = target.rtype, target.subresource
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

    async def _delete(self, request: Request, response: Response, target: Target, user: User, warnings: list[str],
                      field_validation: str) -> bool:
        """Delete one object or a collection; True when it committed."""
        rtype = target.rtype
        gk = rtype.group_kind
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


class ServerThread:
    """uvicorn serving ``ApiApp`` on 127.0.0.1 (random port) from a daemon thread with its own event loop."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.app = ApiApp(cluster)
        self._serving: UvicornThread | None = None

    def start(self) -> None:
        sock = listen(self.cluster.host, self.cluster.port or 0, backlog=256)
        self.cluster.port = sock.getsockname()[1]
        ssl_options: dict[str, Any] = {}
        if self.cluster.tls:
            from tau_testing.sim.tls import make_certificates

            ssl_options = make_certificates(self.cluster)
        self._serving = UvicornThread(self.app, sock, name=f"tau-sim-{self.cluster.port}",
                                      what="simulated API server", timeout_keep_alive=30, **ssl_options)
        self._serving.start()

    def stop(self) -> None:
        serving, self._serving = self._serving, None
        if serving is None:
            return
        if self.app.closing is not None:
            serving.call_soon(self.app.closing.set)
        serving.stop()
