"""What every Portal route shares: the configuration, the directory, the cache, and the degradation contract."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from taugrid_portal.portal.cache import WatchCache
from taugrid_portal.portal.config import PortalConfig
from taugrid_portal.portal.directory import Directory, Scope
from taugrid_portal.portal.scoping import ScopeError, resolve

NO_KUBE = "portal started without Kubernetes access"
NO_KUSTO = "portal started without a Kusto query command"
MEMO_SECONDS = 5
JOBS_DISABLED = ("jobs board unavailable: no Jobs scope mode is configured; set --jobs-scope-mode "
                 "(Helm: portal.jobs.scopeMode) to workspace or operator")


class BoardError(Exception):
    """A board answer other than 200: ``status`` and a JSON body (``{reason, state}`` or ``{error}``)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(str(body))
        self.status = status
        self.body = body


def unavailable(reason: str, status: int = 503, **extra: Any) -> BoardError:
    return BoardError(status, {"reason": reason, "state": "unavailable", **extra})


class PortalState:
    def __init__(self, config: PortalConfig, directory: Directory | None, cache: WatchCache | None) -> None:
        self.config = config
        self.directory = directory
        self.cache = cache
        self._memo: dict[tuple[Any, ...], tuple[tuple[int, int], bytes, bytes]] = {}

    def scope(self, query: Mapping[str, str], headers: Mapping[str, str], *,
              allow_override: tuple[str, ...] = ()) -> Scope:
        try:
            return resolve(query, headers, self.config, self.directory, allow_override=allow_override)
        except ScopeError as exc:
            raise BoardError(exc.status, exc.body) from None

    def require(self, keys: tuple[str, ...], board: str) -> WatchCache:
        """The cache, when it holds current data for ``keys``; else a 503 that says why."""
        if self.cache is None:
            raise unavailable(f"{board} board unavailable: {NO_KUBE}")
        if not self.cache.ready(keys):
            health = self.cache.health(keys)
            reason = (f"{board} board unavailable: the Kubernetes API server cannot be reached; "
                      "no data is shown until the Portal has re-read it")
            raise unavailable(reason, cache=health)
        return self.cache

    def stamp(self) -> tuple[int, int]:
        """What a memoised answer is valid for: the cache generation, and a time bucket (ages in a board are
        relative to now, so even an unchanged cache is re-rendered every :data:`MEMO_SECONDS`)."""
        generation = self.cache.generation if self.cache is not None else -1
        return generation, int(time.monotonic() // MEMO_SECONDS)

    def recall(self, key: tuple[Any, ...]) -> tuple[bytes, bytes] | None:
        hit = self._memo.get(key)
        if hit is not None and hit[0] == self.stamp():
            return hit[1], hit[2]
        return None

    def remember(self, key: tuple[Any, ...], stamp: tuple[int, int], body: bytes) -> tuple[bytes, bytes]:
        """Keep ``body`` and its gzip form for ``key`` while :meth:`stamp` still equals ``stamp``."""
        import gzip

        packed = gzip.compress(body, compresslevel=5, mtime=0)
        if len(self._memo) > 256:
            self._memo.clear()
        self._memo[key] = (stamp, body, packed)
        return body, packed

    def memo(self, key: tuple[Any, ...], build: Callable[[], dict[str, Any]]) -> tuple[bytes, bytes]:
        """The JSON bytes of ``build()`` and their gzip form, recomputed only when the cache changed."""
        hit = self.recall(key)
        if hit is not None:
            return hit
        stamp = self.stamp()
        return self.remember(key, stamp, json.dumps(build(), separators=(",", ":")).encode())


def scoped(payload: dict[str, Any], scope: Scope, cache: WatchCache | None, keys: tuple[str, ...],
           empty: bool) -> dict[str, Any]:
    """The scoped-response envelope: payload plus ``scope``, ``state`` and the cache's staleness."""
    out = dict(payload)
    out["scope"] = scope.to_json()
    out["state"] = "no_data" if empty else "ready"
    if cache is not None:
        out["cache"] = cache.health(keys)
    return out
