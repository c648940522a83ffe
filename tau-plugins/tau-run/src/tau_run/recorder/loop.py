"""The lifecycle recorder's loop: list once, then watch Jobs, RayJobs, Kueue Workloads and Pods, and write
each new observation through the telemetry-sink hook.

* One list per kind (a missing CRD is ``missing-crd``, unreadable pods ``unavailable``), then one watch per
  kind from the list's resourceVersion; a watch that ends is resumed from the last version seen, a ``410
  Gone`` relists.  No polling: the API requests do not grow with the number of runs.
* Every change re-derives the rows of the affected workloads (:mod:`tau_run.recorder.derive`); rows already
  written (the in-memory seen-set per durable id) are dropped; the rest go out as one batch through the
  sink's ``write_lifecycle`` (ingest-by tag of the sorted observation ids: a replayed batch is skipped).
* A write gets 3 attempts (100 ms × attempt backoff); then, like any persistent error (a watch failing 3
  times in a row), :class:`RecorderError` ends the process non-zero so Kubernetes restarts it.  A restarted
  recorder lists again and writes what it had not, so there are no gaps; what it had written is skipped by
  Kusto (same observation ids, same tags) and deduplicated at query time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from tau_core.errors import TauError
from tau_core.history import LifecycleRow
from tau_core.kube import KubeApiError, KubeSession, api_path

from .derive import Obj, Scope, observe

#: kind -> (apiVersion, plural)
KINDS: dict[str, tuple[str, str]] = {"Job": ("batch/v1", "jobs"), "RayJob": ("ray.io/v1", "rayjobs"),
                                     "Workload": ("kueue.x-k8s.io/v1beta2", "workloads"), "Pod": ("v1", "pods")}
OWNERS = ("Job", "RayJob")
WRITE_ATTEMPTS = 3
WATCH_FAILURES = 3


class RecorderError(TauError):
    """A persistent error: the recorder exits non-zero and Kubernetes restarts it."""


@attrs.define
class Health:
    """What ``/readyz`` reports."""

    ready: bool = False
    statuses: dict[str, str] = attrs.field(factory=dict)
    last_reconciled: str = ""
    batches: int = 0
    rows: int = 0

    def doc(self) -> dict[str, str]:
        return {"rayjobs_status": self.statuses.get("RayJob", ""),
                "workloads_status": self.statuses.get("Workload", ""),
                "pods_status": self.statuses.get("Pod", ""), "last_reconciled": self.last_reconciled}


Writer = Callable[[Sequence[LifecycleRow]], dict[str, Any]]


class Recorder:
    """Watches one namespace and writes its runs' lifecycle (see the module docstring)."""

    def __init__(self, session: KubeSession, scope: Scope, write: Writer, *, once: bool = False,
                 watch_timeout: int = 300, say: Callable[[str], None] = lambda _m: None) -> None:
        self.session, self.scope, self.write, self.once = session, scope, write, once
        self.watch_timeout = watch_timeout
        self.say = say
        self.health = Health()
        self.cache: dict[str, dict[str, Obj]] = {k: {} for k in KINDS}
        self.versions: dict[str, str] = {}
        self.seen: dict[str, set[str]] = {}
        self._pending: list[LifecycleRow] = []
        self._dirty = asyncio.Event()

    # -- listing and watching -------------------------------------------------------------
    def _path(self, kind: str) -> str:
        return api_path(*KINDS[kind], namespace=self.scope.namespace)

    async def _list(self, kind: str) -> None:
        try:
            listing = await self.session.list(self._path(kind))
        except KubeApiError as exc:
            if kind in ("RayJob", "Workload") and exc.not_found:
                self.health.statuses[kind] = "missing-crd"
                return
            if kind == "Pod" and exc.status in (401, 403, 404):
                self.health.statuses[kind] = "unavailable"
                return
            raise RecorderError(f"cannot list {kind}s in namespace {self.scope.namespace}: {exc}",
                                hint=exc.hint) from None
        self.cache[kind] = {_key(o): o for o in listing.get("items") or []}
        self.versions[kind] = str((listing.get("metadata") or {}).get("resourceVersion") or "")
        self.health.statuses[kind] = "ok"

    async def _watch(self, kind: str) -> None:
        failures = 0
        while True:
            try:
                async for event in self.session.watch(self._path(kind), resource_version=self.versions.get(kind),
                                                      timeout_seconds=self.watch_timeout):
                    self._apply(kind, event)
                failures = 0
            except KubeApiError as exc:
                if exc.status == 410:  # the version is too old: list again, then watch from there
                    await self._list(kind)
                    self._dirty.set()
                    continue
                failures += 1
                if failures >= WATCH_FAILURES:
                    raise RecorderError(f"watching {kind}s in namespace {self.scope.namespace} failed "
                                        f"{failures} times: {exc}") from None
                await asyncio.sleep(0.1 * failures)

    def _apply(self, kind: str, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if version:
            self.versions[kind] = version
        if event.get("type") == "BOOKMARK":
            return
        if event.get("type") == "DELETED":
            self.cache[kind].pop(_key(obj), None)
            if kind in OWNERS:  # gone before completion: cancelled (a terminal row already written stays)
                obj = {**obj, "metadata": {"deletionTimestamp": _now(), **(obj.get("metadata") or {})}}
        else:
            self.cache[kind][_key(obj)] = obj
        self._observe_version(kind, obj)
        self._dirty.set()

    def _observe_version(self, kind: str, obj: Obj) -> None:
        """Rows of this very version (a burst of changes between two batches loses no state)."""
        if kind in OWNERS:
            owners = [(kind, obj)]
        else:
            uids = {str(ref.get("uid") or "") for ref in (obj.get("metadata") or {}).get("ownerReferences") or []}
            owners = [(k, self.cache[k][u]) for k in OWNERS for u in uids if u in self.cache[k]]
        workloads, pods = list(self.cache["Workload"].values()), list(self.cache["Pod"].values())
        for owner_kind, owner in owners:
            self._pending += observe(owner_kind, owner, workloads, pods, self.scope)

    # -- reconciling ----------------------------------------------------------------------
    def fresh_rows(self) -> list[LifecycleRow]:
        """Rows of every cached workload not written yet (plus those of workloads deleted since)."""
        rows, self._pending = self._pending, []
        workloads, pods = list(self.cache["Workload"].values()), list(self.cache["Pod"].values())
        for kind in OWNERS:
            for obj in self.cache[kind].values():
                rows += observe(kind, obj, workloads, pods, self.scope)
        out, batch_ids = [], set()
        for row in rows:
            seen = self.seen.setdefault(row.durable_id, set())
            if row.observation_id in seen or row.observation_id in batch_ids:
                continue
            batch_ids.add(row.observation_id)
            out.append(row)
        return out

    async def reconcile(self) -> int:
        """Write the fresh rows (3 attempts); the number written."""
        rows = self.fresh_rows()
        if rows:
            await self._write(rows)
        for row in rows:
            self.seen.setdefault(row.durable_id, set()).add(row.observation_id)
        self.health.ready = True
        self.health.last_reconciled = _now()
        return len(rows)

    async def _write(self, rows: list[LifecycleRow]) -> None:
        error = ""
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            result = await asyncio.to_thread(self.write, rows)
            if not result.get("error") and not result.get("pending"):
                self.health.batches += 1
                self.health.rows += len(rows)
                self.say(f"recorded {len(rows)} observation(s) (batch {result.get('tag', '')[:26]})")
                return
            error = str(result.get("error") or f"{result.get('pending')} batch(es) still pending")
            await asyncio.sleep(0.1 * attempt)
        raise RecorderError(f"writing {len(rows)} lifecycle observation(s) failed {WRITE_ATTEMPTS} times: {error}",
                            hint="check the Kusto endpoint and the recorder's Ingestor role; the batch stays "
                                 "spooled and is sent after the restart")

    async def run(self) -> None:
        """List, write, then (unless ``once``) watch and write every change until an error ends it."""
        for kind in KINDS:
            await self._list(kind)
        await self.reconcile()
        if self.once:
            return
        watchers = [asyncio.create_task(self._watch(k), name=f"watch-{k}")
                    for k in KINDS if self.health.statuses.get(k) == "ok"]
        try:
            while True:
                waiter = asyncio.create_task(self._dirty.wait())
                done, _ = await asyncio.wait([waiter, *watchers], return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task is not waiter:
                        task.result()  # a watcher only ends by raising
                waiter.cancel()
                await asyncio.gather(waiter, return_exceptions=True)
                self._dirty.clear()
                await asyncio.sleep(0.05)  # coalesce a burst of events into one batch
                await self.reconcile()
        finally:
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or meta.get("name") or "")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
