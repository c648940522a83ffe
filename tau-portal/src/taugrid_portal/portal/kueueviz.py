"""The optional KueueViz board (``--kueueviz``): a passive HTTP proxy to the KueueViz Services (reference §4.6).

* ``/api/portal/kueueviz/env.js`` is generated here: the page's WebSocket URL points back at this Portal.
* ``ws/*`` and ``auth/*`` go to the backend Service (port 8080) with ``Origin`` rewritten to the one origin the
  chart allows (``KUEUEVIZ_ALLOWED_ORIGINS``); everything else goes to the frontend Service, with the page's
  root-relative asset URLs rewritten under the proxy prefix.
* Loading a page sets ``kueueviz_target=1`` (HttpOnly, SameSite=Strict, Secure behind TLS), which routes the
  frontend's ``/assets/*`` requests; without it ``/assets/*`` is refused.
* Only GET and HEAD; no browser cookie or credential is forwarded; redirects are not followed.
* WebSocket upgrades on ``ws/*`` (KueueViz's live updates) pass through to the backend Service with the same
  ``Origin`` rewrite, from same-origin browsers only (:mod:`taugrid_portal.portal.wsproxy`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response

from taugrid_portal.portal.config import KueueVizConfig

PREFIX = "/api/portal/kueueviz"
ALLOWED_ORIGIN = "http://portal.kueueviz.local"
DEFAULT_UPSTREAM = "http://{service}.{namespace}.svc:8080"
FORWARDED = ("accept", "accept-language", "if-none-match", "if-modified-since")
_SAFE_PATH = re.compile(r"^[A-Za-z0-9._~/-]*$")
_HOST = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^\[[0-9a-fA-F:]+\](:[0-9]{1,5})?$")


def _json(status: int, body: dict[str, Any]) -> Response:
    return JSONResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


def _secure(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "").lower() == "https"


def env_js(request: Request) -> Response:
    host = request.headers.get("host", "")
    if not _HOST.match(host):
        return _json(400, {"error": "invalid Host header"})
    url = f"{'wss' if _secure(request) else 'ws'}://{host}{PREFIX}"
    body = f"window.env = {json.dumps({'VITE_WEBSOCKET_URL': url, 'REACT_APP_WEBSOCKET_URL': url})};\n"
    return Response(body, media_type="text/javascript", headers={"Cache-Control": "no-store"})


async def forward(request: Request, config: KueueVizConfig, path: str, upstream: str) -> Response:
    import aiohttp

    if not _SAFE_PATH.match(path) or ".." in path.split("/") or "//" in path:
        return _json(400, {"error": "invalid KueueViz path"})
    backend = path.startswith(("ws/", "auth/"))
    service = config.backend_service if backend else config.frontend_service
    url = upstream.format(service=service, namespace=config.namespace) + "/" + path
    if request.url.query:
        url += "?" + request.url.query
    headers = {k: v for k, v in request.headers.items() if k in FORWARDED}
    if backend:
        headers["Origin"] = ALLOWED_ORIGIN
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15),
                                         cookie_jar=aiohttp.DummyCookieJar()) as session:
            async with session.request(request.method, url, headers=headers, allow_redirects=False) as resp:
                body, status = await resp.read(), resp.status
                ctype = resp.headers.get("Content-Type", "application/octet-stream").split(";")[0]
    except (aiohttp.ClientError, OSError, TimeoutError):
        return _json(502, {"error": "kueueviz unreachable: the KueueViz backend/frontend Services may not be deployed"})
    if 300 <= status < 400:
        return _json(502, {"error": "kueueviz answered with a redirect"})
    if ctype == "text/html":
        body = re.sub(rb'(src|href)="/(?!/)', rb'\1="' + PREFIX.encode() + rb"/", body)
    response = Response(body, status_code=status, media_type=ctype, headers={"Cache-Control": "no-store"})
    if ctype == "text/html":
        secure = "; Secure" if _secure(request) else ""
        response.headers.append("set-cookie", f"kueueviz_target=1; HttpOnly; Path=/; SameSite=Strict{secure}")
    return response


def make_routes(config: KueueVizConfig | None, upstream: str = DEFAULT_UPSTREAM,
                identify: Callable[[HTTPConnection], Response | None] = lambda conn: None) -> list[Any]:
    """The board's routes; ``identify`` answers a request the Portal refuses (managed mode without an
    authorized viewer) before anything is forwarded."""
    from starlette.routing import Route, WebSocketRoute

    methods = ["GET", "HEAD"]
    if config is None:
        async def disabled(request: Request) -> Response:
            return _json(503, {"reason": "kueue (live) board unavailable: portal started without --kueueviz",
                               "state": "unavailable"})

        return [Route(PREFIX, disabled, methods=methods), Route(PREFIX + "/{rest:path}", disabled, methods=methods)]

    async def proxied(request: Request) -> Response:
        refused = identify(request)
        if refused is not None:
            return refused
        rest = request.path_params.get("rest", "")
        if rest == "env.js":
            return env_js(request)
        return await forward(request, config, rest, upstream)

    async def assets(request: Request) -> Response:
        refused = identify(request)
        if refused is not None:
            return refused
        if request.cookies.get("kueueviz_target") != "1":
            return _json(400, {"error": "no KueueViz page loaded: open the Kueue (Live) board first"})
        return await forward(request, config, "assets/" + request.path_params["rest"], upstream)

    async def live(websocket: Any) -> None:
        from taugrid_portal.portal.wsproxy import denial, deny, pipe, same_origin

        rest = websocket.path_params["rest"]
        if not same_origin(websocket):
            await deny(websocket, denial(403, "cross-origin WebSocket refused: open KueueViz from this Portal"))
            return
        refused = identify(websocket)
        if refused is not None:
            await deny(websocket, refused)
            return
        if not _SAFE_PATH.match(rest) or ".." in rest.split("/") or "//" in rest:
            await deny(websocket, denial(400, "invalid KueueViz path"))
            return
        url = upstream.format(service=config.backend_service, namespace=config.namespace) + "/ws/" + rest
        query = websocket.scope.get("query_string", b"").decode("latin-1")
        await pipe(websocket, url + (f"?{query}" if query else ""), {"Origin": ALLOWED_ORIGIN},
                   "kueueviz unreachable: the KueueViz backend/frontend Services may not be deployed")

    return [Route(PREFIX, proxied, methods=methods), Route(PREFIX + "/{rest:path}", proxied, methods=methods),
            Route("/assets/{rest:path}", assets, methods=methods),
            WebSocketRoute(PREFIX + "/ws/{rest:path}", live)]
