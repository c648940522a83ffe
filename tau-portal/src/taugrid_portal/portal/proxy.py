"""The passive Ray dashboard proxy and the route policy of the mounted Stellar (reference §4.5, §4.6).

Ray: ``/api/portal/ray/proxy/{namespace}/{cluster}/{path}`` is forwarded only when ``namespace/cluster``
names a head Service the cache discovered in the request's scope (the SSRF guard), only for GET/HEAD, never
for the dashboard's mutation, profiling, traceback, JVM, dataset or actor routes, and without the browser's
cookies.  WebSocket upgrades pass through under the same guard (:func:`ray_websocket`).
Stellar: GET/HEAD on the read routes only, artifact reads only for an exact run target (:class:`ArtifactGate`);
everything else fails closed with 403.
"""

from __future__ import annotations

import re
import threading
from typing import Any
from urllib.parse import unquote

from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response

from taugrid_portal.portal import boards
from taugrid_portal.portal.state import BoardError, PortalState

RAY_PREFIX = "/api/portal/ray/proxy/"
RAY_BLOCKED = re.compile(r"(^|/)(actors?|logical/actors|worker/(traceback|cpu_profile|gpu_profile|memory_profile)|"
                         r"task/(traceback|cpu_profile)|memory_profile|cpu_profile|traceback|jvm|"
                         r"api/(actors|data/datasets|v0/(tasks/timeline|actors))|data/datasets)"
                         r"(/|$)", re.IGNORECASE)
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
DEFAULT_UPSTREAM = "http://{service}.{namespace}.svc:{port}"
FORWARDED_HEADERS = ("accept", "accept-language", "if-none-match", "if-modified-since")


def _json(status: int, body: dict[str, Any]) -> Response:
    return JSONResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


PATH_ERROR = {"error": "ray proxy path must be /api/portal/ray/proxy/{namespace}/{cluster}/"}
RAY_ROOT_PREFIXES = ("/api/", "/static/", "/nodes", "/logical/", "/actors", "/events", "/log_proxy", "/worker/",
                     "/logo.png")
PORTAL_OWNED = ("/api/portal/", "/api/stellar", "/api/v1/stellar", "/api/v2/stellar")


def _raw_path(request: HTTPConnection) -> str:
    return str(request.scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0])


def guard(state: PortalState, request: HTTPConnection, ns: str, cluster: str, path: str,
          cookie_workspace: str | None = None) -> tuple[dict[str, Any], str] | Response:
    """The SSRF guard: ``ns/cluster`` must be a ready head Service discovered in the request's scope."""
    decoded = unquote(unquote(path))
    if (not _NAME.match(ns) or not _NAME.match(cluster) or ".." in decoded
            or "\\" in decoded or "//" in decoded or decoded.startswith("/") or "@" in decoded
            or any(ord(ch) < 32 for ch in decoded)):
        return _json(400, PATH_ERROR)
    if RAY_BLOCKED.search(decoded):
        return _json(403, {"error": "this Ray dashboard route is blocked by the read-only Portal"})
    try:
        scope = state.scope(request.query_params, request.headers)
        cache = state.require(boards.RAY_KEYS, "ray")
    except BoardError as exc:
        return _json(exc.status, exc.body)
    if cookie_workspace is not None and cookie_workspace != scope.workspace:
        return _json(400, {"error": "invalid Ray target cookie"})
    found = next((c for c in boards.ray_clusters(cache, scope.namespace) if c["namespace"] == ns
                  and c["cluster"] == cluster and c["ready"]), None)
    if found is None:
        return _json(404, {"error": "unknown Ray cluster: no matching head Service discovered"})
    return {**found, "workspace": scope.workspace}, path


def ray_target(state: PortalState, request: HTTPConnection) -> tuple[dict[str, Any], str] | Response:
    """``/api/portal/ray/proxy/{ns}/{cluster}/{path}``: the discovered cluster and the path to forward."""
    raw = _raw_path(request)
    parts = (raw[len(RAY_PREFIX):] if raw.startswith(RAY_PREFIX) else "").split("/", 2)
    if len(parts) < 3 or not parts[0] or not parts[1]:
        return _json(400, PATH_ERROR)
    return guard(state, request, *parts)


def ray_cookie_target(state: PortalState, request: HTTPConnection) -> tuple[dict[str, Any], str] | Response:
    """A root-relative dashboard request (``/static/...``), routed by the ``ray_target`` cookie."""
    raw = _raw_path(request)
    if raw.startswith(PORTAL_OWNED) or not raw.startswith(RAY_ROOT_PREFIXES):
        return _json(404, {"error": f"no route {request.url.path}"})
    value = request.cookies.get("ray_target")
    if not value:
        return _json(400, {"error": "no Ray dashboard selected: open a cluster from the Ray board first"})
    managed = state.directory is not None
    parts = value.split("|") if managed else value.split("/")
    if len(parts) != (3 if managed else 2):
        return _json(400, {"error": "invalid Ray target cookie"})
    ws = parts[0] if managed else None
    ns, cluster = parts[-2], parts[-1]
    return guard(state, request, ns, cluster, raw.lstrip("/"), cookie_workspace=ws)


async def ray_proxy(state: PortalState, request: Request, upstream: str, *, by_cookie: bool = False) -> Response:
    import aiohttp

    target = ray_cookie_target(state, request) if by_cookie else ray_target(state, request)
    if isinstance(target, Response):
        return target
    found, path = target
    base = upstream.format(service=found["service"], namespace=found["namespace"], port=found["dashboardPort"])
    url = f"{base}/{path}"
    if request.url.query:
        url += "?" + request.url.query
    headers = {k: v for k, v in request.headers.items() if k in FORWARDED_HEADERS}
    try:
        timeout = aiohttp.ClientTimeout(total=15)
        async with aiohttp.ClientSession(timeout=timeout, cookie_jar=aiohttp.DummyCookieJar()) as session:
            async with session.request(request.method, url, headers=headers, allow_redirects=False) as resp:
                body = await resp.read()
                status, ctype = resp.status, resp.headers.get("Content-Type", "application/octet-stream")
    except (aiohttp.ClientError, OSError, TimeoutError):
        return _json(502, {"error": "ray dashboard unreachable: the RayCluster may have been deleted"})
    if 300 <= status < 400:
        status = 502  # the proxy never follows or relays a redirect
        body, ctype = b'{"error":"ray dashboard answered with a redirect"}', "application/json"
    media = ctype.split(";")[0]
    if media == "text/html":  # root-relative URLs of the dashboard stay under this cluster's proxy path
        prefix = f"{RAY_PREFIX}{found['namespace']}/{found['cluster']}/".encode()
        body = re.sub(rb'(src|href)="/(?!/)', rb'\1="' + prefix, body)
    response = Response(body, status_code=status, media_type=media, headers={"Cache-Control": "no-store"})
    managed = state.directory is not None
    value = f"{found['workspace']}|{found['namespace']}|{found['cluster']}" if managed \
        else f"{found['namespace']}/{found['cluster']}"
    # every part is a validated DNS-style name, so the value needs no quoting
    response.headers.append("set-cookie", f"ray_target={value}; HttpOnly; Path=/; SameSite=Strict; Secure")
    return response


async def ray_websocket(state: PortalState, websocket: Any, upstream: str, *, by_cookie: bool = False) -> None:
    """A WebSocket upgrade under the Ray proxy: same-origin browsers only, the same SSRF guard, no cookies."""
    from taugrid_portal.portal.wsproxy import denial, deny, pipe, same_origin

    if not same_origin(websocket):
        await deny(websocket, denial(403, "cross-origin WebSocket refused: open the dashboard from this Portal"))
        return
    target = ray_cookie_target(state, websocket) if by_cookie else ray_target(state, websocket)
    if isinstance(target, Response):
        await deny(websocket, target)
        return
    found, path = target
    base = upstream.format(service=found["service"], namespace=found["namespace"], port=found["dashboardPort"])
    query = websocket.scope.get("query_string", b"").decode("latin-1")
    url = f"{base}/{path}" + (f"?{query}" if query else "")
    await pipe(websocket, url, {}, "ray dashboard unreachable: the RayCluster may have been deleted")


# -- Stellar ------------------------------------------------------------------------------------------------------
STELLAR_PREFIXES = ("/stellar", "/api/stellar", "/api/v1/stellar", "/api/v2/stellar")
STELLAR_ALLOWED = frozenset({"/stellar", "/stellar/", "/api/stellar/snapshot", "/api/stellar/series"})
ARTIFACT_INDEX, ARTIFACT_CONTENT = "/api/stellar/artifacts", "/api/stellar/artifact"
LEGACY_DENIAL = {"error": "this Stellar route is not available in Portal"}


class ArtifactGate:
    """Artifact reads through the Portal need an exact run target (reference §4.5): one ``target`` that
    resolves to exactly one run and names it, no ``run``/``run_id`` hint that disagrees, and for content
    exactly one ``artifact`` of that run.  Experiment and run-group targets are refused."""

    def __init__(self, store_path: Any) -> None:
        self.store_path = store_path
        self._store: Any = None
        self._lock = threading.Lock()

    def _open(self) -> Any:
        if self._store is None:
            from taugrid_portal.store import ExperimentStore

            self._store = ExperimentStore.open(self.store_path)
        return self._store

    def allows(self, path: str, query: Any) -> bool:
        from tau_core.errors import TauError

        targets = query.getlist("target")
        if len(targets) != 1 or not targets[0].strip():
            return False
        target = targets[0]
        if any(v != target for hint in ("run", "run_id") for v in query.getlist(hint)):
            return False
        artifacts = query.getlist("artifact")
        if len(artifacts) != (1 if path == ARTIFACT_CONTENT else 0):
            return False
        try:
            with self._lock:  # one connection, queried from worker threads one at a time
                store = self._open()
                resolved = store.resolve_target(target)
                if resolved.type != "run" or resolved.id != target or list(resolved.run_ids) != [target]:
                    return False
                return not artifacts or bool(store.artifact(artifacts[0])["run_id"] == target)
        except TauError:
            return False


def is_stellar(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in STELLAR_PREFIXES)


class StellarPolicy:
    """ASGI wrapper of the mounted Stellar app: GET/HEAD on the read routes; deny everything else."""

    def __init__(self, app: Any, state: PortalState) -> None:
        self.app = app
        self.state = state
        store = state.config.store
        self.artifacts = ArtifactGate(store) if store is not None else None

    def permitted(self, method: str, path: str, query: Any) -> bool:
        if method not in ("GET", "HEAD"):
            return False
        if path in (ARTIFACT_INDEX, ARTIFACT_CONTENT):
            return self.artifacts is not None and self.artifacts.allows(path, query)
        return path in STELLAR_ALLOWED

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        import anyio

        request = Request(scope)
        path = scope["path"]
        if path in (ARTIFACT_INDEX, ARTIFACT_CONTENT):  # the gate reads the store: off the event loop
            allowed = await anyio.to_thread.run_sync(self.permitted, scope["method"], path, request.query_params)
        else:
            allowed = self.permitted(scope["method"], path, request.query_params)
        if not allowed:
            managed = self.state.directory is not None
            body = {"reason": "this Stellar route is not workspace-scoped in managed Portal mode",
                    "state": "forbidden"} if managed else LEGACY_DENIAL
            await _json(403, body)(scope, receive, send)
            return
        if self.app is None:
            await _json(503, {"reason": "experiments unavailable: portal started without an experiment store",
                              "state": "unavailable"})(scope, receive, send)
            return
        ws = request.query_params.get("workspace")
        try:
            resolved = self.state.scope({"workspace": ws} if ws else {}, request.headers)
        except BoardError as exc:
            await _json(exc.status, exc.body)(scope, receive, send)
            return
        if ws is not None and ws != resolved.workspace:
            await _json(403, {"error": "workspace query conflicts with configured workspace"})(scope, receive, send)
            return

        async def framed_same_origin(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = []
                for k, v in message.get("headers", []):
                    if k.lower() == b"x-frame-options":
                        v = b"SAMEORIGIN"
                    elif k.lower() == b"content-security-policy":
                        v = v.replace(b"frame-ancestors 'none'", b"frame-ancestors 'self'")
                    headers.append((k, v))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, framed_same_origin)
