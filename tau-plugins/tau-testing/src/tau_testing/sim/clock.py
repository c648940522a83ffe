"""Clocks for the simulated cluster: a fake one tests advance by hand, and a (scalable) real one."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class FakeClock:
    """Time moves only when ``advance`` is called."""

    is_fake = True

    def __init__(self, start: datetime | None = None) -> None:
        self._now = _aware(start or datetime(2026, 1, 1, tzinfo=UTC)).astimezone(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        with self._lock:
            self._now = self._now + timedelta(seconds=seconds)
            return self._now

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)


class RealClock:
    """Wall-clock time; with ``time_scale`` > 1 simulated durations pass faster than real ones."""

    is_fake = False

    def __init__(self, time_scale: float = 1.0) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.time_scale = time_scale
        self._origin_wall = datetime.now(UTC)
        self._origin_mono = time.monotonic()

    def now(self) -> datetime:
        elapsed = (time.monotonic() - self._origin_mono) * self.time_scale
        return self._origin_wall + timedelta(seconds=elapsed)

    def advance(self, seconds: float) -> datetime:
        raise TypeError("a real clock cannot be advanced; construct the cluster with clock='fake'")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds / self.time_scale)


def rfc3339(value: datetime) -> str:
    """Kubernetes' timestamp format: UTC, second precision, ``Z`` suffix."""
    return _aware(value).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(value: datetime) -> str:
    return _aware(value).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
