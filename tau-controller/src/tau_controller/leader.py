"""Leader election through a ``coordination.k8s.io`` Lease (``tau-core-controller.tau.azure.com``).

A replica reconciles only after it holds the Lease, renews it every ``retry_period``, and stops (exits) when it
could not renew within ``renew_deadline``; the Lease expires ``lease_duration`` after the last renewal, so a new
leader starts only after the old one stopped writing (``renew_deadline`` < ``lease_duration``).  Updates use the
Lease's ``resourceVersion``, so two candidates cannot both win one round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from tau_controller.api import LEASE
from tau_core import keys
from tau_core.kube import KubeApiError, KubeSession

log = logging.getLogger("tau_controller")


def _micro(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


class LeaderElector:
    def __init__(self, session: KubeSession, options: Any, metrics: Any, on_lost: Callable[[], None]) -> None:
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
        self.leading = False
        self._renewer: asyncio.Task[None] | None = None

    @property
    def path(self) -> str:
        return LEASE.path(self.namespace, keys.CONTROLLER_LEASE)

    async def _try(self) -> bool:
        """One acquire-or-renew round; True when this replica holds the Lease afterwards."""
        now = datetime.now(UTC)
        lease = await self.session.get(self.path, missing_ok=True)
        spec: dict[str, Any] = {"holderIdentity": self.identity, "leaseDurationSeconds": max(1, round(self.duration)),
                                "acquireTime": _micro(now), "renewTime": _micro(now), "leaseTransitions": 0}
        if lease is None:
            body = {"apiVersion": LEASE.api_version, "kind": "Lease",
                    "metadata": {"name": keys.CONTROLLER_LEASE, "namespace": self.namespace}, "spec": spec}
            try:
                await self.session.create(LEASE.path(self.namespace), body)
            except KubeApiError as exc:
                if exc.status == 409:
                    return False
                raise
            return True
        current = lease.get("spec") or {}
        holder = current.get("holderIdentity")
        renewed = _parse(current.get("renewTime"))
        held_for = timedelta(seconds=float(current.get("leaseDurationSeconds") or self.duration))
        if holder and holder != self.identity and renewed is not None and renewed + held_for > now:
            return False
        if holder == self.identity:
            spec["acquireTime"] = current.get("acquireTime") or spec["acquireTime"]
            spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0)
        else:
            spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
        try:
            await self.session.request("PUT", self.path, body=dict(lease, spec=spec))
        except KubeApiError as exc:
            if exc.status == 409:
                return False
            raise
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
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(self.period)
            try:
                ok = await asyncio.wait_for(self._try(), max(0.1, self.deadline - (loop.time() - last)))
            except Exception as exc:
                log.warning("renewing the leader Lease failed: %s", exc)
                ok = False
            if ok:
                last = loop.time()
            elif loop.time() - last >= self.deadline:
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
        if not self.leading:
            return
        self.leading = False
        self.metrics.leader.set(0)
        try:
            lease = await self.session.get(self.path, missing_ok=True)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = dict(lease["spec"], holderIdentity=None, leaseDurationSeconds=1)
                await self.session.request("PUT", self.path, body=dict(lease, spec=spec))
        except Exception as exc:
            log.warning("releasing the leader Lease failed: %s", exc)
