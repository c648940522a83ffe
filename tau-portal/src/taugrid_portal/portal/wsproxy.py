"""WebSocket pass-through for the Ray dashboard and KueueViz proxies (reference §4.6: "WebSocket upgrades pass
through").

* The browser side must be same-origin: an ``Origin`` header, when sent (browsers always send it), must name the
  host the request was addressed to; anything else is refused before the upgrade (cross-site WebSocket hijacking).
* The upstream side gets no browser cookie and no identity header; the Ray upstream gets no ``Origin`` at all,
  the KueueViz backend gets the one origin the chart allows.  Redirects are never followed.
* The target is chosen by the same guards as the HTTP proxies (the Ray SSRF guard; KueueViz only ``ws/*``).
* Refusals are answered as HTTP responses before the upgrade when the server supports it (uvicorn does), else
  the socket is closed with policy-violation code 1008.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import anyio
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket, WebSocketDisconnect

DENIAL_EXTENSION = "websocket.http.response"
MAX_MESSAGE = 16 * 2**20


def same_origin(websocket: WebSocket) -> bool:
    """No ``Origin`` (not a browser) or one whose host:port equals the ``Host`` the request was sent to."""
    origin = websocket.headers.get("origin")
    if origin is None:
        return True
    host = websocket.headers.get("host", "")
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False
    return parts.netloc.lower() == host.lower()


async def deny(websocket: WebSocket, response: Response) -> None:
    """Refuse an upgrade: the HTTP answer itself when the server supports it, else close with 1008."""
    if DENIAL_EXTENSION in (websocket.scope.get("extensions") or {}):
        await websocket.send_denial_response(response)
    else:
        await websocket.close(code=1008)


def denial(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers={"Cache-Control": "no-store"})


async def _refuse_redirect(session: Any, context: Any, params: Any) -> None:
    """aiohttp's WebSocket handshake follows redirects; the proxy never does (an SSRF hop)."""
    import aiohttp

    raise aiohttp.ClientError(f"upstream redirected the WebSocket handshake ({params.response.status})")


async def pipe(websocket: WebSocket, url: str, headers: dict[str, str], unreachable: str) -> None:
    """Connect to ``url`` and relay frames both ways until either side closes."""
    import aiohttp

    protocols = [p.strip() for p in websocket.headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    timeout = aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5)
    trace = aiohttp.TraceConfig()
    trace.on_request_redirect.append(_refuse_redirect)
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(), trace_configs=[trace],
                                     timeout=aiohttp.ClientTimeout(total=None, connect=10)) as session:
        try:
            upstream = await session.ws_connect(url, headers=headers, protocols=protocols, timeout=timeout,
                                                max_msg_size=MAX_MESSAGE)
        except (aiohttp.ClientError, OSError, TimeoutError):
            await deny(websocket, denial(502, unreachable))
            return
        async with upstream:
            await websocket.accept(subprotocol=upstream.protocol)
            await _relay(websocket, upstream)


async def _relay(websocket: WebSocket, upstream: Any) -> None:
    import aiohttp

    async with anyio.create_task_group() as tg:
        async def downstream() -> None:  # upstream -> browser
            async for msg in upstream:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    await websocket.send_text(msg.data)
                elif msg.type == aiohttp.WSMsgType.BINARY:
                    await websocket.send_bytes(msg.data)
                else:
                    break
            tg.cancel_scope.cancel()

        async def upstream_side() -> None:  # browser -> upstream
            try:
                while True:
                    message = await websocket.receive()
                    if message["type"] == "websocket.disconnect":
                        break
                    if message.get("text") is not None:
                        await upstream.send_str(message["text"])
                    elif message.get("bytes") is not None:
                        await upstream.send_bytes(message["bytes"])
            except WebSocketDisconnect:
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(downstream)
        tg.start_soon(upstream_side)
    with anyio.CancelScope(shield=True):
        try:
            await websocket.close()
        except RuntimeError:  # already closed by the browser
            pass
