"""Scriptable faults (errors, latency, dropped watches) and the request log."""

from __future__ import annotations

import random
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Fault:
    """One injected fault. ``status`` None means latency only; ``drop_watch_after`` ends matching watches."""

    method: str | None = None
    path_regex: str | None = None
    status: int | None = 503
    rate: float = 1.0
    count: int | None = None
    retry_after: int | None = None
    latency: float = 0.0
    message: str | None = None
    drop_watch_after: int | None = None  # events delivered before a matching watch is cut
    reset: bool = False  # cut the TCP connection instead of ending the stream cleanly
    user: str | None = None
    fired: int = 0
    _owner: FaultInjector | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._pattern = re.compile(self.path_regex) if self.path_regex else None

    def matches(self, method: str, path: str, user: str | None) -> bool:
        if self.method and self.method.upper() != method.upper():
            return False
        if self._pattern is not None and not self._pattern.search(path):
            return False
        if self.user and self.user != user:
            return False
        return self.count is None or self.fired < self.count

    def remove(self) -> None:
        if self._owner is not None:
            self._owner.remove(self)

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.fired >= self.count


class FaultInjector:
    """``cluster.faults.add(method="GET", path_regex="/pods", status=503, rate=0.2, count=None, retry_after=1)``."""

    def __init__(self, seed: int = 4) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._random = random.Random(seed)

    def add(self, method: str | None = None, path_regex: str | None = None, status: int | None = 503,
            rate: float = 1.0, count: int | None = None, retry_after: int | None = None, latency: float = 0.0,
            message: str | None = None, user: str | None = None) -> Fault:
        fault = Fault(method=method, path_regex=path_regex, status=status, rate=rate, count=count,
                      retry_after=retry_after, latency=latency, message=message, user=user, _owner=self)
        with self._lock:
            self._faults.append(fault)
        return fault

    def latency(self, seconds: float, method: str | None = None, path_regex: str | None = None,
                count: int | None = None) -> Fault:
        return self.add(method=method, path_regex=path_regex, status=None, latency=seconds, count=count)

    def drop_watches(self, after_events: int = 0, path_regex: str | None = None, count: int | None = None,
                     reset: bool = False) -> Fault:
        """Cut matching watch streams after ``after_events`` events: a clean early end of the response, or
        with ``reset=True`` a dropped connection (the chunked response never terminates)."""
        fault = Fault(method="GET", path_regex=path_regex, status=None, count=count,
                      drop_watch_after=after_events, reset=reset, _owner=self)
        with self._lock:
            self._faults.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        with self._lock:
            if fault in self._faults:
                self._faults.remove(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def __len__(self) -> int:
        return len(self._faults)

    def pick(self, method: str, path: str, user: str | None, *, watch: bool = False) -> list[Fault]:
        """The faults that fire for this request (each counts as fired)."""
        fired: list[Fault] = []
        with self._lock:
            for fault in self._faults:
                if fault.drop_watch_after is not None and not watch:
                    continue
                if not fault.matches(method, path, user):
                    continue
                if fault.rate < 1.0 and self._random.random() >= fault.rate:
                    continue
                fault.fired += 1
                fired.append(fault)
        return fired


@dataclass
class RequestRecord:
    method: str
    verb: str
    resource: str  # "pods", "jobs.batch", "pods/log", or the path for non-resource requests
    namespace: str | None
    name: str | None
    status: int
    user: str | None
    path: str


class RequestLog:
    """Every request the server answered, with counts per (verb, resource)."""

    def __init__(self, limit: int = 100_000) -> None:
        self._records: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._limit = limit
        self._counts: Counter[tuple[str, str]] = Counter()
        self.total = 0

    def record(self, record: RequestRecord) -> None:
        with self._lock:
            self.total += 1
            self._counts[(record.verb, record.resource)] += 1
            self._records.append(record)
            if len(self._records) > self._limit:
                del self._records[: len(self._records) - self._limit]

    @property
    def entries(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def counts(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._counts)

    def count(self, verb: str | None = None, resource: str | None = None, **filters: Any) -> int:
        if not filters:
            with self._lock:
                return sum(n for (v, r), n in self._counts.items()
                           if (verb is None or v == verb) and (resource is None or r == resource))
        return sum(1 for rec in self.entries
                   if (verb is None or rec.verb == verb) and (resource is None or rec.resource == resource)
                   and all(getattr(rec, k) == v for k, v in filters.items()))

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
            self._counts.clear()
            self.total = 0
