"""Leader election through a ``coordination.k8s.io`` Lease (``tau-core-controller.tau.azure.com``).

The timing follows client-go's leader election, so that two replicas never write at once even when their wall
clocks disagree or the machine is slow:

* A standby measures expiry on its **own monotonic clock, from when it last saw the Lease change**, never by
  comparing the holder's ``renewTime`` with its own wall clock: it takes over only after the record stayed
  unchanged for ``leaseDurationSeconds`` (or at once when the holder released it).
* The leader's authority lasts ``renew_deadline`` from the **start** of its last successful renewal round (the
  moment before the ``renewTime`` it wrote, so a slow reply never extends it).  Every write the controller sends
  passes :meth:`LeaderElector.may_write` first (:class:`GatedSession`), so a leader that could not renew stops
  writing at that instant, before the loop has even noticed; then it stops altogether.
* ``renew_deadline`` < ``lease_duration``: the difference is the margin for a write already on the wire.

Updates carry the Lease's ``resourceVersion``, so two candidates cannot both win one round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from tau_controller.api import LEASE
from tau_core import keys
from tau_core.kube import KubeApiError, KubeSession

log = logging.getLogger("tau_controller")
READS = ("GET", "HEAD")


def _micro(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class NotLeading(KubeApiError):
    """A write refused locally because this replica's leadership may have lapsed (never sent)."""


class GatedSession(KubeSession):
    """tau_core's session with a write gate: with leader election, no write leaves without the Lease."""

    gate: Callable[[], bool] | None = None

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if method not in READS and self.gate is not None and not self.gate():
            raise NotLeading(f"{method} {path} refused: this replica does not hold the leader Lease",
                             hint="another replica leads; this one is stopping")
        return await super().request(method, path, **kwargs)


class LeaderElector:
    def __init__(self, session: KubeSession, options: Any, metrics: Any, on_lost: Callable[[], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        if options.renew_deadline >= options.lease_duration:
            from tau_core.errors import UsageError

            raise UsageError("--renew-deadline must be shorter than --lease-duration",
                             hint="the defaults are 10 and 15 seconds")
        self.session = session
        self.namespace = options.system_namespace
        self.identity = options.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.duration = options.lease_duration
        self.deadline = options.renew_deadline
        self.period = options.retry_period
        self.metrics = metrics
        self.on_lost = on_lost
        self.clock = clock
        self.leading = False
        self._valid_until = 0.0  # monotonic: end of this replica's authority to write
        self._observed: tuple[Any, ...] | None = None  # the Lease record last seen ...
        self._observed_at = 0.0  # ... and when (monotonic) it was first seen
        self._renewer: asyncio.Task[None] | None = None

    @property
    def path(self) -> str:
        return LEASE.path(self.namespace, keys.CONTROLLER_LEASE)

    def may_write(self) -> bool:
        """True while this replica leads and its last renewal is younger than ``renew_deadline``."""
        return self.leading and self.clock() < self._valid_until

    def _observe(self, spec: Mapping[str, Any], now: float) -> None:
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("acquireTime"),
                  spec.get("leaseDurationSeconds"), spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, now

    async def _try(self) -> bool:
        """One acquire-or-renew round; True when this replica holds the Lease afterwards (its authority then
        lasts ``renew_deadline`` from the start of this round)."""
        started = self.clock()
        wall = datetime.now(UTC)
        lease = await self.session.get(self.path, missing_ok=True)
        spec: dict[str, Any] = {"holderIdentity": self.identity, "leaseDurationSeconds": max(1, round(self.duration)),
                                "acquireTime": _micro(wall), "renewTime": _micro(wall), "leaseTransitions": 0}
        if lease is None:
            body = {"apiVersion": LEASE.api_version, "kind": "Lease",
                    "metadata": {"name": keys.CONTROLLER_LEASE, "namespace": self.namespace}, "spec": spec}
            try:
                await self.session.create(LEASE.path(self.namespace), body)
            except KubeApiError as exc:
                if exc.status == 409:
                    return False
                raise
            self._valid_until = started + self.deadline
            return True
        current = lease.get("spec") or {}
        self._observe(current, self.clock())
        holder = current.get("holderIdentity")
        held_for = float(current.get("leaseDurationSeconds") or self.duration)
        if holder and holder != self.identity and self._observed_at + held_for > self.clock():
            return False
        if holder == self.identity:
            spec["acquireTime"] = current.get("acquireTime") or spec["acquireTime"]
            spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0)
        else:
            spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
        try:
            written = await self.session.request("PUT", self.path, body=dict(lease, spec=spec))
        except KubeApiError as exc:
            if exc.status == 409:
                return False
            raise
        self._observe((written or {}).get("spec") or spec, self.clock())
        self._valid_until = started + self.deadline
        return True

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait until this replica leads (True) or ``stop`` is set (False)."""
        log.info("waiting for the leader Lease %s/%s as %s", self.namespace, keys.CONTROLLER_LEASE, self.identity)
        while not stop.is_set():
            try:
                if await self._try():
                    break
            except Exception as exc:
                log.warning("leader election round failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.period)
        else:
            return False
        self.leading = True
        self.metrics.leader.set(1)
        log.info("acquired the leader Lease as %s", self.identity)
        self._renewer = asyncio.create_task(self._renew(), name="tau-leader-renew")
        return True

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(min(self.period, max(0.0, self._valid_until - self.clock())))
            left = self._valid_until - self.clock()
            ok = False
            if left > 0:
                try:
                    ok = await asyncio.wait_for(self._try(), left)
                except Exception as exc:
                    log.warning("renewing the leader Lease failed: %s", describe(exc))
            if not ok and not self.may_write():
                self.leading = False
                self.metrics.leader.set(0)
                self.on_lost()
                return

    async def release(self) -> None:
        """Stop renewing and give the Lease up so that a standby takes over without waiting for expiry."""
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._renewer
        if self._renewer is None:
            return  # never led
        self.leading = False
        self.metrics.leader.set(0)
        try:
            lease = await self.session.get(self.path, missing_ok=True)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = dict(lease["spec"], holderIdentity=None, leaseDurationSeconds=1)
                await self.session.request("PUT", self.path, body=dict(lease, spec=spec))
        except Exception as exc:
            log.warning("releasing the leader Lease failed: %s", describe(exc))


def describe(exc: BaseException) -> str:
    """``TimeoutError()`` prints as nothing; say what it was."""
    return str(exc) or type(exc).__name__
