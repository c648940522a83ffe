"""Watching a run: one full read, then watch streams on its objects that keep an in-memory copy current.

A quiet run costs no API requests; a busy one yields at most one frame per ``interval`` seconds.  The
informers run in an anyio task group; leaving a round (terminal, a new workload, a lost watch, or the
consumer stopping) cancels the group's scope, which closes every stream.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio

from tau_core import keys
from tau_core.errors import NotFoundError
from tau_core.kube import KubeApiError, KubeSession, api_path
from tau_core.lifecycle.base import RunRef, RunStatus
from tau_core.status_tree import Snapshot, terminal_state

from .objects import JOB_API, RAYJOB_API, Obj, _labels, _meta
from .status import Status, _collections
from .targeting import ResolvedTarget

Emit = Callable[[RunStatus], Awaitable[None]]


class Watch(Status):
    def watch_status(self, ref: RunRef, *, interval: float = 2.0, max_iterations: int = 0,
                     run_profile: bool = False) -> Iterator[RunStatus]:
        """Status frames while the run changes: one full read, then a frame per observed change."""
        frames = 0
        with closing(self._stream(self._watch, ref, interval, run_profile)) as statuses:
            for status in statuses:
                frames += 1
                yield status
                if status.terminal or (max_iterations and frames >= max_iterations):
                    return

    def wait(self, ref: RunRef) -> RunStatus:
        """Block until the run is terminal (watch-driven: no polling)."""
        last: RunStatus | None = None
        while last is None or not last.terminal:
            for st in self.watch_status(ref, interval=0.0):
                last = st
            if last is not None and not last.extra.exists:
                raise NotFoundError(f"{ref.namespace}/{ref.name} disappeared while waiting for it",
                                    hint="it was deleted (cancelled?); nothing is retried")
        return last

    async def _watch(self, session: KubeSession, ref: RunRef, interval: float, run_profile: bool, *,
                     emit: Emit) -> None:
        target = await self.resolve(session, ref)
        shown: builtins.list[str] = []
        while True:
            snap = await self.snapshot(session, target.namespace, ref.name)
            if await self._watch_round(session, ref, target, snap, interval, run_profile, shown, emit):
                return

    async def _watch_round(self, session: KubeSession, ref: RunRef, target: ResolvedTarget, snap: Snapshot,
                           interval: float, run_profile: bool, shown: builtins.list[str], emit: Emit) -> bool:
        """Frames from one full read until the run ends (True) or must be read again (False)."""
        uid = _meta(snap.workload).get("uid")
        cache = _Cache.from_snapshot(snap)
        async with anyio.create_task_group() as informers:
            for key, (path, labels, fields) in _watch_specs(target.namespace, ref.name, snap).items():
                informers.start_soon(self._informer, session, cache, key, path, labels, fields)
            try:
                while True:
                    status = await self._frame(session, ref, target, cache.snapshot(snap), run_profile, shown, emit)
                    if status.terminal:
                        return True
                    await cache.changed()
                    if _meta(cache.workload()).get("uid") != uid or cache.restart:
                        return False  # a new workload (retry, resubmit) or a lost watch: read everything again
                    await anyio.sleep(interval)
            finally:
                informers.cancel_scope.cancel()
        return False  # not reached: every path above returns or raises

    async def _frame(self, session: KubeSession, ref: RunRef, target: ResolvedTarget, current: Snapshot,
                     run_profile: bool, shown: builtins.list[str], emit: Emit) -> RunStatus:
        """The status of ``current``; emitted when its phase tree differs from the last frame's."""
        if terminal_state(current)[0]:
            current = await self.settle(session, current)
        status = self._status_from(ref, current, target, session.server, session.context)
        key = json.dumps([[p.name, p.state, p.detail] for p in status.phases] + [status.terminal, status.attempt],
                         default=str)
        if not shown or shown[-1] != key:
            shown[:] = [key]
            if run_profile and current.workload is not None:
                from tau_core.run_profile import run_profile as profile_of

                status.extra.run_profile = await profile_of(session, current)
            self.last_requests = session.requests
            await emit(status)
        return status

    async def _informer(self, session: KubeSession, cache: _Cache, key: str, path: str, labels: str | None,
                        fields: str | None) -> None:
        """Keep ``cache[key]`` current from a watch stream, reconnecting from the last seen version."""
        failures = 0
        while True:
            try:
                async for event in session.watch(path, label_selector=labels, field_selector=fields,
                                                 resource_version=cache.versions.get(key) or None,
                                                 timeout_seconds=300):
                    failures = 0
                    if cache.apply(key, event):
                        cache.notify()
            except KubeApiError as exc:
                if exc.status == 410:
                    cache.restart = True  # our version is too old: start over with fresh lists
                    cache.notify()
                    return
                failures += 1
            except (TimeoutError, OSError):
                failures += 1
            if failures > 5:
                cache.restart = True
                cache.notify()
                return
            await anyio.sleep(min(5.0, 0.2 * (2 ** failures)))


def _watch_specs(ns: str, name: str, snap: Snapshot) -> dict[str, tuple[str, str | None, str | None]]:
    api = RAYJOB_API if snap.kind == "RayJob" else JOB_API
    specs: dict[str, tuple[str, str | None, str | None]] = {
        "workload": (api_path(*api, namespace=ns), None, f"metadata.name={name}")}
    if snap.workload is None:
        specs["rayjob"] = (api_path(*RAYJOB_API, namespace=ns), None, f"metadata.name={name}")
        return specs
    for key, (path, labels) in _collections(ns, name, snap).items():
        specs[key] = (path, labels, None)
    if snap.kind == "RayJob" and not ((snap.rayjob or {}).get("status") or {}).get("rayClusterName"):
        specs["pods"] = (api_path("v1", "pods", namespace=ns), None, None)
    return specs


@dataclass
class _Cache:
    """The objects of one run, kept current by watch events."""

    objects: dict[str, dict[str, Obj]] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    kind: str | None = None
    restart: bool = False
    _changed: anyio.Event = field(default_factory=anyio.Event)

    def notify(self) -> None:
        self._changed.set()

    async def changed(self) -> None:
        """Wait for the next change (any change since the last call counts)."""
        await self._changed.wait()
        self._changed = anyio.Event()

    @classmethod
    def from_snapshot(cls, snap: Snapshot) -> _Cache:
        cache = cls(kind=snap.kind)
        workload = snap.workload
        cache.objects["workload"] = {_meta(workload)["name"]: workload} if workload else {}
        cache.objects["rayjob"] = {}
        for key, items in (("workloads", snap.workloads), ("pods", snap.pods), ("events", snap.events)):
            cache.objects[key] = {_meta(o).get("name", ""): o for o in items}
        cache.versions = dict(snap.versions)
        if workload is not None:
            cache.versions["workload"] = str(_meta(workload).get("resourceVersion") or "")
        return cache

    def apply(self, key: str, event: Mapping[str, Any]) -> bool:
        obj = dict(event.get("object") or {})
        rv = _meta(obj).get("resourceVersion")
        if rv:
            self.versions[key] = str(rv)
        etype = event.get("type")
        if etype == "BOOKMARK":
            return False
        bucket = self.objects.setdefault(key, {})
        name = _meta(obj).get("name", "")
        if etype == "DELETED":
            gone = bucket.pop(name, None)
            if key == "pods":
                self.objects.setdefault("departed", {})[name] = obj or gone or {}
        else:
            bucket[name] = obj
        if key == "rayjob" and etype != "DELETED":
            self.restart = True  # the run turned out to be a RayJob: read it properly
        return True

    def workload(self) -> Obj | None:
        items = list(self.objects.get("workload", {}).values())
        return items[0] if items else None

    def snapshot(self, base: Snapshot) -> Snapshot:
        workload = self.workload()
        return Snapshot(
            namespace=base.namespace, name=base.name,
            job=workload if self.kind == "Job" or (self.kind is None and workload) else None,
            rayjob=workload if self.kind == "RayJob" else None,
            workloads=list(self.objects.get("workloads", {}).values()),
            pods=[p for p in self.objects.get("pods", {}).values() if _belongs(p, base)],
            claims=base.claims, events=list(self.objects.get("events", {}).values()),
            now=datetime.now(UTC), versions=dict(self.versions),
            departed=[*base.departed, *self.objects.get("departed", {}).values()])


def _belongs(pod: Obj, base: Snapshot) -> bool:
    if base.kind != "RayJob":
        return True
    labels = _labels(pod)
    cluster = ((base.rayjob or {}).get("status") or {}).get("rayClusterName")
    return bool((cluster and labels.get(keys.RAY_CLUSTER) == cluster) or labels.get(keys.JOB_NAME) == base.name)
