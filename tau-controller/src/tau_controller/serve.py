"""``/healthz``, ``/readyz`` and Prometheus ``/metrics``, served with aiohttp (kopf's own HTTP stack)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tau_controller.addresses import LOOPBACK, bind_address

log = logging.getLogger("tau_controller")


def parse_address(text: str, flag: str) -> tuple[str, int] | None:
    """:func:`bind_address`, with a warning when the address is reachable from other hosts."""
    address = bind_address(text, flag)
    if address is not None and address[0] not in (LOOPBACK, "localhost", "::1"):
        log.warning("%s binds %s:%s, reachable from other hosts (the chart does this for the kubelet's probes)",
                    flag, *address)
    return address


class Metrics:
    """Reconcile counts, errors and durations per kind, plus queue depth and leadership."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.reconciles = Counter("tau_controller_reconcile_total", "Reconciles by kind and result",
                                  ["kind", "result"], registry=self.registry)
        self.errors = Counter("tau_controller_reconcile_errors_total", "Failed reconciles by kind", ["kind"],
                              registry=self.registry)
        self.duration = Histogram("tau_controller_reconcile_duration_seconds", "Reconcile duration by kind",
                                  ["kind"], registry=self.registry)
        self.leader = Gauge("tau_controller_leader", "1 while this replica holds the leader Lease",
                            registry=self.registry)

    def observe(self, kind: str, started: float, error: bool) -> None:
        self.reconciles.labels(kind, "error" if error else "success").inc()
        if error:
            self.errors.labels(kind).inc()
        self.duration.labels(kind).observe(time.monotonic() - started)

    def text(self) -> bytes:
        return generate_latest(self.registry)


class Servers:
    """The health and metrics listeners (either may be disabled)."""

    def __init__(self, metrics: Metrics, ready: Callable[[], bool]) -> None:
        self.metrics = metrics
        self.ready = ready
        self.runners: list[web.AppRunner] = []
        self.bound: dict[str, tuple[str, int]] = {}

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok") if self.ready() else web.Response(status=503, text="not ready")

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.text(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _serve(self, name: str, address: tuple[str, int], routes: list[Any]) -> None:
        app = web.Application()
        app.add_routes(routes)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, address[0], address[1])
        await site.start()
        self.runners.append(runner)
        server: Any = site._server
        sockets = [s.getsockname() for s in (server.sockets if server is not None else [])]
        self.bound[name] = (address[0], int(sockets[0][1]) if sockets else address[1])

    async def start(self, health: tuple[str, int] | None, metrics: tuple[str, int] | None) -> None:
        if health is not None:
            await self._serve("health", health, [web.get("/healthz", self._healthz), web.get("/readyz", self._readyz)])
        if metrics is not None:
            await self._serve("metrics", metrics, [web.get("/metrics", self._metrics)])

    async def stop(self) -> None:
        for runner in self.runners:
            await runner.cleanup()
        self.runners.clear()
