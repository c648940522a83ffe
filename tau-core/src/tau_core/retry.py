"""Automatic retry policy (``resilience.*``; reference run-config-and-rendering §1.13, §4.3).

Pure functions: the policy read from a run config, exponential backoff, ``retry_on`` matching
(case-insensitive), the environment injected into a retried attempt, and the Kubernetes Event
recorded for each attempt.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tau_core.errors import ConfigError
from tau_core.lifecycle.base import FailureReason

DEFAULT_RETRY_ON = ("Preempted", "Evicted")
RETRYABLE = (FailureReason.OOM_KILLED, FailureReason.PREEMPTED, FailureReason.EVICTED)
DEFAULT_BACKOFF_INITIAL = 30.0
DEFAULT_BACKOFF_MAX = 300.0
EVENT_REPORTER = "tau-cli"

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(value: Any, field: str) -> float:
    """Seconds from ``30s``, ``5m``, ``1h30m``, ``250ms`` or a bare number of seconds."""
    if isinstance(value, bool):
        raise ConfigError(f"{field} must be a duration such as 30s or 5m, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ConfigError(f"{field} must not be negative")
        return float(value)
    text = str(value).strip()
    if not text:
        raise ConfigError(f"{field} must be a duration such as 30s or 5m")
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        pos = m.end()
        total += float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    if pos != len(text):
        raise ConfigError(f"{field} \"{text}\" is not a duration; use a value such as 30s, 5m or 1h")
    return total


def checkpoint_path(name: str, config: Mapping[str, Any] | None = None) -> str:
    resilience = dict((config or {}).get("resilience") or {})
    return str(resilience.get("checkpoint_path") or f"/data/checkpoints/finetunes/{name}")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 0
    retry_on: tuple[str, ...] = DEFAULT_RETRY_ON
    backoff_initial: float = DEFAULT_BACKOFF_INITIAL
    backoff_max: float = DEFAULT_BACKOFF_MAX
    checkpoint_path: str = ""

    @classmethod
    def from_config(cls, name: str, config: Mapping[str, Any]) -> RetryPolicy:
        r = dict(config.get("resilience") or {})
        try:
            max_retries = int(r.get("max_retries") or 0)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"resilience.max_retries must be an integer, got {r.get('max_retries')!r}") from exc
        if max_retries < 0:
            raise ConfigError("resilience.max_retries must not be negative")
        retry_on = r.get("retry_on")
        if retry_on is None:
            retry_on = list(DEFAULT_RETRY_ON)
        if isinstance(retry_on, str) or not isinstance(retry_on, (list, tuple)):
            raise ConfigError("resilience.retry_on must be a list such as [Preempted, Evicted]")
        initial = parse_duration(r.get("backoff_initial", "30s"), "resilience.backoff_initial")
        cap = parse_duration(r.get("backoff_max", "5m"), "resilience.backoff_max")
        return cls(max_retries, tuple(str(x) for x in retry_on), initial, max(cap, initial),
                   checkpoint_path(name, config))

    @property
    def enabled(self) -> bool:
        return self.max_retries > 0

    def allows(self, reason: FailureReason) -> bool:
        """True when ``reason`` is in ``retry_on`` (case-insensitive)."""
        wanted = {r.strip().lower() for r in self.retry_on}
        return reason.value.lower() in wanted

    def backoff(self, attempt: int) -> float:
        """Delay before retry ``attempt`` (1-based): initial × 2^(attempt-1), capped at max."""
        delay: float = self.backoff_initial * (2 ** max(0, attempt - 1))
        return min(delay, self.backoff_max)

    def env(self, attempt: int, reason: FailureReason) -> dict[str, str]:
        """Environment injected into retry ``attempt``."""
        return {
            "TAU_RESUME_FROM": self.checkpoint_path,
            "TAU_RETRY_ATTEMPT": str(attempt),
            "TAU_RETRY_MAX": str(self.max_retries),
            "TAU_RETRY_REASON": reason.value,
        }


def retry_event(*, namespace: str, name: str, attempt: int, max_retries: int, reason: FailureReason,
                signature: str, kind: str, uid: str | None, outcome: str = "attempt",
                now: datetime | None = None) -> dict[str, Any]:
    """The ``v1`` Event recorded for a retry attempt, exhaustion (``exhausted``) or success (``succeeded``)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    suffix, event_reason, etype = {
        "attempt": (f"retry-{attempt}", "RayJobAttempt", "Warning"),
        "exhausted": (f"retries-exhausted-{max_retries}", "RayJobRetriesExhausted", "Warning"),
        "succeeded": (f"retry-succeeded-{attempt}", "RayJobRetrySucceeded", "Normal"),
    }[outcome]
    api_version = "batch/v1" if kind == "Job" else "ray.io/v1"
    involved: dict[str, Any] = {"kind": kind, "apiVersion": api_version, "namespace": namespace, "name": name}
    if uid:
        involved["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}-{suffix}", "namespace": namespace},
        "involvedObject": involved,
        "reason": event_reason,
        "action": "Retry",
        "type": etype,
        "message": f"submission_id={name} attempt={attempt}/{max_retries} failure={reason.value} "
                   f"signature={signature[:160]}",
        "reportingComponent": EVENT_REPORTER,
        "reportingInstance": EVENT_REPORTER,
        "source": {"component": EVENT_REPORTER},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
