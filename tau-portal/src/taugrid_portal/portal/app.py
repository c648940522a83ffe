"""The Portal's ASGI application: routes, the read-only guard, security headers, the cache's lifetime."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from taugrid_portal.portal.cache import WatchCache, connect_session
from taugrid_portal.portal.config import PortalConfig
from taugrid_portal.portal.directory import Directory
from taugrid_portal.portal.proxy import (
    DEFAULT_UPSTREAM,
    RAY_PREFIX,
    StellarPolicy,
    is_stellar,
    ray_proxy,
    ray_websocket,
)
from taugrid_portal.portal.state import BoardError, PortalState

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "frame-ancestors 'self'; base-uri 'none'; form-action 'self'; object-src 'none'")
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"SAMEORIGIN"),
    (b"referrer-policy", b"no-referrer"),
    (b"content-security-policy", CSP.encode()),
]
READ_METHODS = ("GET", "HEAD")


class Guard:
    """Outermost ASGI layer: refuse every write verb, and put the security headers on every response."""

    def __init__(self, app: Any, stellar: Any) -> None:
        self.app = app
        self.stellar = stellar

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        started = time.perf_counter()

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in SECURITY_HEADERS if k not in names]
                took = (time.perf_counter() - started) * 1000
                extra.append((b"server-timing", f"app;dur={took:.2f}".encode()))
                message = {**message, "headers": list(message.get("headers", [])) + extra}
            await send(message)

        if is_stellar(scope["path"]):
            await self.stellar(scope, receive, with_headers)  # the route policy answers every method itself
            return
        if scope["method"] not in READ_METHODS:
            from starlette.responses import JSONResponse

            response = JSONResponse({"error": "the Portal is read-only: only GET and HEAD are served"},
                                    status_code=405, headers={"Allow": "GET, HEAD"})
            await response(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)


def refused_viewer(state: PortalState, conn: Any) -> Any:
    """Managed mode: the answer to a request without an authorized viewer (401/403/431), else None.  The
    KueueViz board, cluster-wide by nature, needs an authorized viewer like every other board."""
    if state.directory is None:
        return None
    from starlette.responses import JSONResponse

    try:
        state.scope(conn.query_params, conn.headers)
    except BoardError as exc:
        return JSONResponse(exc.body, status_code=exc.status, headers={"Cache-Control": "no-store"})
    return None


def create_app(config: PortalConfig, *, directory: Directory | None = None, cache: WatchCache | None = None,
               ray_upstream: str = DEFAULT_UPSTREAM, kueueviz_upstream: str | None = None,
               start_cache: bool = True, cache_options: dict[str, Any] | None = None) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route, WebSocketRoute

    from taugrid_portal.portal import api, kueueviz, pages

    if cache is None and config.use_kubernetes:
        cache = WatchCache(lambda: connect_session(config.kubeconfig or None, config.context, config.in_cluster),
                           namespace=config.namespace, **(cache_options or {}))
    state = PortalState(config, directory, cache)
    stellar_app = None
    if config.store is not None:
        from taugrid_portal.stellar.server import allowed_hosts
        from taugrid_portal.stellar.server import create_app as stellar_create

        # the mounted Stellar keeps its DNS-rebinding guard: the bound name, loopback and
        # TAU_STELLAR_ALLOWED_HOSTS (a Portal behind an ingress lists the ingress host there)
        stellar_app = stellar_create(config.store, default_target=config.default_target,
                                     hosts=allowed_hosts(config.host))
    policy = StellarPolicy(stellar_app, state)

    async def ray(request: Request) -> Response:
        return await ray_proxy(state, request, ray_upstream)

    async def ray_root(request: Request) -> Response:
        return await ray_proxy(state, request, ray_upstream, by_cookie=True)

    async def ray_ws(websocket: Any) -> None:
        await ray_websocket(state, websocket, ray_upstream)

    async def ray_root_ws(websocket: Any) -> None:
        await ray_websocket(state, websocket, ray_upstream, by_cookie=True)

    async def not_found(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": f"no route {request.url.path}"}, status_code=404,
                            headers={"Cache-Control": "no-store"})

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        import anyio

        if cache is None or not start_cache:
            yield
            return
        async with anyio.create_task_group() as tg:
            async def run_cache() -> None:
                try:
                    await cache.run()
                except Exception as exc:  # e.g. an unusable kubeconfig: boards answer 503 with the reason
                    print(f"portal: Kubernetes cache stopped: {exc}", file=sys.stderr)
                    for inf in cache.informers.values():
                        inf.error = str(exc)

            tg.start_soon(run_cache)
            yield
            tg.cancel_scope.cancel()

    routes = [
        *api.make_routes(state),
        *kueueviz.make_routes(config.kueueviz, kueueviz_upstream or kueueviz.DEFAULT_UPSTREAM,
                             lambda conn: refused_viewer(state, conn)),
        Route(RAY_PREFIX + "{rest:path}", ray, methods=list(READ_METHODS)),
        WebSocketRoute(RAY_PREFIX + "{rest:path}", ray_ws),
        *pages.make_routes(state),
        Route("/{rest:path}", ray_root, methods=list(READ_METHODS)),  # last: the dashboard's root-relative URLs
        WebSocketRoute("/{rest:path}", ray_root_ws),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found})
    app.state.portal = state
    return Guard(app, policy)
