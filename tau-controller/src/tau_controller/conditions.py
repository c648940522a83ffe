"""metav1 Conditions: building them, keeping ``lastTransitionTime`` and comparing statuses semantically."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(ctype: str, status: str, reason: str, message: str, generation: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": ctype, "status": status, "reason": reason, "message": message}
    if generation is not None:
        out["observedGeneration"] = generation
    return out


def merge_conditions(previous: Iterable[Mapping[str, Any]] | None,
                     desired: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``desired`` with ``lastTransitionTime`` carried over from ``previous`` when its status, reason and message
    are all unchanged (control-plane.md §2.2).

    A condition that changed in any of the three (or that is new) gets the current time.
    """
    old = {c.get("type"): c for c in previous or [] if isinstance(c, Mapping)}
    stamp = now()
    out = []
    for c in desired:
        item = dict(c)
        before = old.get(item["type"])
        if before is not None and before.get("lastTransitionTime") and all(
                before.get(k) == item.get(k) for k in ("status", "reason", "message")):
            item["lastTransitionTime"] = before["lastTransitionTime"]
        else:
            item["lastTransitionTime"] = stamp
        out.append(item)
    return out


def find(conditions: Iterable[Mapping[str, Any]] | None, ctype: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions or [] if isinstance(c, Mapping) and c.get("type") == ctype), None)


def _strip_times(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_times(v) for k, v in value.items() if k != "lastTransitionTime"}
    if isinstance(value, list):
        items = [_strip_times(v) for v in value]
        if all(isinstance(i, dict) and "type" in i for i in items):
            items.sort(key=lambda i: str(i["type"]))
        return items
    return value


def status_equal(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """True when two statuses differ at most in condition order and ``lastTransitionTime``."""
    return bool(_strip_times(dict(current or {})) == _strip_times(dict(desired)))
