"""``/healthz`` (always 200) and ``/readyz`` (503 until the first reconcile succeeded, then the watch statuses
as JSON), served with aiohttp (already there: kubernetes-asyncio's HTTP client) on 127.0.0.1 by default."""

from __future__ import annotations

import ipaddress
from typing import Any

import attrs

from tau_core.errors import UsageError

from .loop import Health


@attrs.frozen
class Address:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_address(text: str) -> Address:
    """``HOST:PORT`` or ``:PORT`` (all interfaces, as the chart passes it)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--health-addr {text!r} must be HOST:PORT or :PORT")
    return Address(host.strip("[]") or "0.0.0.0", int(port))  # an explicit ":PORT" asks for every interface


async def serve_health(address: Address, health: Health) -> Any:
    """Start the server; returns the aiohttp runner (``await runner.cleanup()`` stops it)."""
    from aiohttp import web

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_request: web.Request) -> web.Response:
        if not health.ready:
            return web.Response(status=503, text="first reconcile has not succeeded\n")
        return web.json_response(health.doc())

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, address.host, address.port)
    await site.start()
    return runner
