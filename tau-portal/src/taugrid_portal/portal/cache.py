"""The Portal's watch-backed cache: one list+watch "informer" per resource kind, run with anyio.

Each informer lists once, then watches from the list's resourceVersion.  A watch the server ends is resumed
from the last version seen; a 410 (version too old) or a failed watch makes it list again.  While an
informer cannot reach the API server its data is kept but marked stale, and :meth:`WatchCache.health` says
so; the boards refuse to serve stale data as fresh.  Every change bumps :attr:`WatchCache.generation`, which
the boards use to memoise what they compute.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import anyio
import attrs

from tau_core.kube import KubeApiError, KubeSession, api_path

Obj = dict[str, Any]


@attrs.frozen
class Kind:
    key: str
    api_version: str
    plural: str
    namespaced: bool = True
    optional: bool = False  # a missing API group (KubeRay, Kueue) means "none", not an error


KINDS: tuple[Kind, ...] = (
    Kind("jobs", "batch/v1", "jobs"),
    Kind("rayjobs", "ray.io/v1", "rayjobs", optional=True),
    Kind("pods", "v1", "pods"),
    Kind("nodes", "v1", "nodes", namespaced=False),
    Kind("workloads", "kueue.x-k8s.io/v1beta2", "workloads", optional=True),
    Kind("localqueues", "kueue.x-k8s.io/v1beta2", "localqueues", optional=True),
    Kind("clusterqueues", "kueue.x-k8s.io/v1beta2", "clusterqueues", namespaced=False, optional=True),
    Kind("services", "v1", "services"),
    Kind("daemonsets", "apps/v1", "daemonsets"),
)


@attrs.define
class Informer:
    kind: Kind
    path: str
    items: dict[str, Obj] = attrs.field(factory=dict)
    version: str = ""
    synced: bool = False
    connected: bool = False
    absent: bool = False
    last_sync: float = 0.0
    last_sync_at: str = ""
    error: str = ""
    lists: int = 0
    watches: int = 0


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


WATCH_TIMEOUT = 300  # seconds a watch stays open before the server ends it and the informer re-opens it


class WatchCache:
    """Informers for :data:`KINDS`; :meth:`run` keeps them current until cancelled."""

    def __init__(self, session_factory: Callable[[], Any], namespace: str | None = None,
                 *, watch_timeout: int = WATCH_TIMEOUT, silence_grace: float = 60.0, backoff_max: float = 5.0) -> None:
        self.session_factory = session_factory
        self.namespace = namespace or None
        self.watch_timeout = watch_timeout
        #: a watch silent for longer than its server-side timeout plus this grace is a hung connection
        self.silence_grace = silence_grace
        self.backoff_max = backoff_max
        self.generation = 0
        self.session: KubeSession | None = None
        self.informers: dict[str, Informer] = {
            k.key: Informer(k, api_path(k.api_version, k.plural, namespace=self.namespace if k.namespaced else None))
            for k in KINDS}
        self.changed = anyio.Event()

    # -- reading ------------------------------------------------------------------------------
    def items(self, key: str) -> list[Obj]:
        return list(self.informers[key].items.values())

    def get(self, key: str, namespace: str, name: str) -> Obj | None:
        return self.informers[key].items.get(f"{namespace}/{name}")

    def ready(self, keys: tuple[str, ...]) -> bool:
        """Every informer in ``keys`` has listed, is connected, and heard from the server recently."""
        horizon = time.monotonic() - (self.watch_timeout + self.silence_grace)
        return all(self.informers[k].synced and self.informers[k].connected and self.informers[k].last_sync > horizon
                   for k in keys)

    def health(self, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
        """The staleness report every response carries (a function of :attr:`generation`, so it can be memoised).

        ``syncedAt`` is the oldest of the informers' latest confirmations (a list, an event or a cleanly ended
        watch); ``fresh`` is false while any of them is disconnected or has never listed."""
        chosen = [self.informers[k] for k in (keys or tuple(self.informers))]
        synced = [i for i in chosen if i.synced]
        stale = [i.kind.key for i in chosen if not (i.synced and i.connected)]
        return {
            "fresh": not stale,
            "stale": stale,
            "syncedAt": min((i.last_sync_at for i in synced), default=""),
            "generation": self.generation,
            "errors": {i.kind.key: i.error for i in chosen if i.error},
        }

    def requests(self) -> dict[str, int]:
        return {"lists": sum(i.lists for i in self.informers.values()),
                "watches": sum(i.watches for i in self.informers.values()),
                "http": self.session.requests if self.session is not None else 0}

    # -- running ------------------------------------------------------------------------------
    def _bump(self) -> None:
        self.generation += 1
        self.changed.set()
        self.changed = anyio.Event()

    async def run(self) -> None:
        self.session = await self.session_factory()
        try:
            async with anyio.create_task_group() as tg:
                for informer in self.informers.values():
                    tg.start_soon(self._loop, informer)
        finally:
            await self.session.close()

    async def _loop(self, inf: Informer) -> None:
        failures = 0
        while True:
            try:
                if not inf.synced or not inf.version:
                    await self._list(inf)
                with anyio.fail_after(self.watch_timeout + self.silence_grace):
                    await self._watch(inf)  # a hung connection (no end, no bookmark) times out here
                failures = 0
            except KubeApiError as exc:
                if exc.status == 410:
                    inf.version = ""  # too old: list again at once
                    inf.synced = False
                    continue
                if exc.status == 404 and inf.kind.optional:
                    await self._mark_absent(inf)
                    await anyio.sleep(60)
                    continue
                failures += 1
                self._disconnect(inf, exc.message)
            except (OSError, TimeoutError) as exc:
                failures += 1
                self._disconnect(inf, str(exc) or type(exc).__name__)
            await anyio.sleep(min(self.backoff_max, 0.1 * (2 ** min(failures, 6))))

    async def _mark_absent(self, inf: Informer) -> None:
        inf.absent, inf.synced, inf.connected, inf.error = True, True, True, ""
        inf.items.clear()
        self._stamp(inf)
        self._bump()

    def _disconnect(self, inf: Informer, message: str) -> None:
        if inf.connected or inf.error != message:
            inf.connected = False
            inf.error = message
            inf.version = ""  # after an outage, list again rather than trust a resumed watch
            self._bump()

    def _stamp(self, inf: Informer) -> None:
        inf.last_sync = time.monotonic()
        inf.last_sync_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    async def _list(self, inf: Informer) -> None:
        assert self.session is not None
        inf.lists += 1
        result = await self.session.list(inf.path)
        inf.items = {_key(o): o for o in result.get("items") or []}
        inf.version = str((result.get("metadata") or {}).get("resourceVersion") or "")
        inf.synced = inf.connected = True
        inf.absent, inf.error = False, ""
        self._stamp(inf)
        self._bump()

    async def _watch(self, inf: Informer) -> None:
        assert self.session is not None
        inf.watches += 1
        async for event in self.session.watch(inf.path, resource_version=inf.version or None,
                                              timeout_seconds=self.watch_timeout):
            kind, obj = event.get("type"), event.get("object") or {}
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            if version:
                inf.version = version
            if kind == "BOOKMARK":
                self._stamp(inf)  # the server vouches for our version: still current
                continue
            if kind == "DELETED":
                inf.items.pop(_key(obj), None)
            elif kind in ("ADDED", "MODIFIED"):
                inf.items[_key(obj)] = obj
            else:
                continue
            self._stamp(inf)
            self._bump()
        self._stamp(inf)  # the server ended the watch cleanly: still current


async def connect_session(kubeconfig: str | None, context: str | None, in_cluster: bool) -> KubeSession:
    """The one Kubernetes client stack (tau_core's session), from a kubeconfig or the in-cluster account."""
    if not in_cluster:
        return await KubeSession.connect(kubeconfig=kubeconfig, context=context)
    return await KubeSession.require_in_cluster()
