"""A deduplicating, delaying work queue (controller-runtime's semantics, on asyncio).

A key is queued at most once; a key added while it is being processed is processed again afterwards; a delayed
add keeps only the earliest wake-up; failures back off exponentially per key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

BASE_BACKOFF = 0.05
MAX_BACKOFF = 30.0


class WorkQueue:
    def __init__(self) -> None:
        self._ready: asyncio.Queue[Hashable] = asyncio.Queue()
        self._queued: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._dirty: set[Hashable] = set()
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        self._failures: dict[Hashable, int] = {}

    def add(self, key: Hashable) -> None:
        if key in self._processing:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._ready.put_nowait(key)

    def add_after(self, key: Hashable, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        timer = self._timers.get(key)
        if timer is not None and not timer.cancelled():
            if timer.when() <= when:
                return
            timer.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def get(self) -> Hashable:
        key = await self._ready.get()
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: Hashable) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def failed(self, key: Hashable) -> float:
        """Record a failure of ``key``; returns the backoff before its retry."""
        count = self._failures.get(key, 0) + 1
        self._failures[key] = count
        return float(min(MAX_BACKOFF, BASE_BACKOFF * 2 ** (count - 1)))

    def succeeded(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def __len__(self) -> int:
        return len(self._queued)
