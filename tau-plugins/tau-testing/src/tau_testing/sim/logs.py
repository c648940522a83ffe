"""Container log streams for ``pods/log``."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tau_testing.sim.clock import rfc3339_micro

StreamKey = tuple[str, str, str]


@dataclass
class _Stream:
    lines: list[tuple[datetime, str]] = field(default_factory=list)
    previous: list[tuple[datetime, str]] | None = None
    terminated: bool = False
    generation: int = 0  # bumps on restart so followers of the old instance stop


class LogBook:
    """Thread-safe log lines per (namespace, pod, container), with the previous instance kept on restart."""

    def __init__(self, clock: Any = None) -> None:
        self.clock = clock
        self._streams: dict[StreamKey, _Stream] = {}
        self._cond = threading.Condition()

    def _now(self) -> datetime:
        return self.clock.now() if self.clock is not None else datetime.now(UTC)

    def _stream(self, key: StreamKey) -> _Stream:
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = _Stream()
        return stream

    def append(self, namespace: str, pod: str, container: str, line: str, ts: datetime | None = None) -> None:
        with self._cond:
            stream = self._stream((namespace, pod, container))
            for part in str(line).rstrip("\n").split("\n"):
                stream.lines.append((ts or self._now(), part))
            self._cond.notify_all()

    def extend(self, namespace: str, pod: str, container: str, lines: list[str]) -> None:
        for line in lines:
            self.append(namespace, pod, container, line)

    def mark_terminated(self, namespace: str, pod: str, container: str) -> None:
        with self._cond:
            self._stream((namespace, pod, container)).terminated = True
            self._cond.notify_all()

    def restart(self, namespace: str, pod: str, container: str) -> None:
        """The container restarted: its current log becomes the previous one."""
        with self._cond:
            stream = self._stream((namespace, pod, container))
            stream.previous = stream.lines
            stream.lines = []
            stream.terminated = False
            stream.generation += 1
            self._cond.notify_all()

    def forget(self, namespace: str, pod: str) -> None:
        with self._cond:
            for key in [k for k in self._streams if k[0] == namespace and k[1] == pod]:
                self._streams[key].terminated = True
                del self._streams[key]
            self._cond.notify_all()

    def has(self, namespace: str, pod: str, container: str) -> bool:
        with self._cond:
            return (namespace, pod, container) in self._streams

    def has_previous(self, namespace: str, pod: str, container: str) -> bool:
        with self._cond:
            stream = self._streams.get((namespace, pod, container))
            return stream is not None and stream.previous is not None

    def is_terminated(self, namespace: str, pod: str, container: str) -> bool:
        with self._cond:
            stream = self._streams.get((namespace, pod, container))
            return stream is None or stream.terminated

    def entries(self, namespace: str, pod: str, container: str, *, previous: bool = False,
                start: int = 0) -> tuple[list[tuple[datetime, str]], bool | None, int]:
        """Raw entries from index ``start``: (entries, terminated, generation).  ``terminated`` is None when
        nothing was ever written or marked for the container: the log book cannot tell a container that has
        not written its first line from one that ended in silence, so the caller asks the pod."""
        with self._cond:
            stream = self._streams.get((namespace, pod, container))
            if stream is None:
                return [], (True if previous else None), 0
            lines = (stream.previous or []) if previous else stream.lines
            return list(lines[start:]), (True if previous else stream.terminated), stream.generation

    @staticmethod
    def format(entry: tuple[datetime, str], timestamps: bool) -> str:
        ts, text = entry
        return f"{rfc3339_micro(ts)[:-1]}000Z {text}" if timestamps else text

    def read(self, namespace: str, pod: str, container: str, *, previous: bool = False, tail: int | None = None,
             since: datetime | float | None = None, timestamps: bool = False,
             limit_bytes: int | None = None, entries: list[tuple[datetime, str]] | None = None) -> list[str]:
        """Lines as ``pods/log`` returns them (without trailing newlines); ``entries`` reads a snapshot
        taken with ``entries()`` instead of the live stream."""
        if entries is None:
            entries, _, _ = self.entries(namespace, pod, container, previous=previous)
        if since is not None:
            if not isinstance(since, datetime):
                from datetime import timedelta

                since = self._now() - timedelta(seconds=float(since))
            entries = [e for e in entries if e[0] >= since]
        if tail is not None and tail >= 0:
            entries = entries[-tail:] if tail else []
        lines = [self.format(e, timestamps) for e in entries]
        if limit_bytes is not None:
            out: list[str] = []
            used = 0
            for line in lines:
                size = len(line.encode()) + 1
                if used + size > limit_bytes:
                    remaining = limit_bytes - used
                    if remaining > 0:
                        out.append(line.encode()[:remaining].decode("utf-8", "ignore"))
                    break
                out.append(line)
                used += size
            lines = out
        return lines

    def wait(self, namespace: str, pod: str, container: str, count: int, timeout: float) -> bool:
        """Block until the stream has more than ``count`` lines or has ended; False on timeout."""
        with self._cond:
            def ready() -> bool:
                stream = self._streams.get((namespace, pod, container))
                return stream is None or stream.terminated or len(stream.lines) > count

            return self._cond.wait_for(ready, timeout)
