"""Lifecycle classification with success gates, and the metric-filter grammar.

A run's recorded ``state`` is not trusted blindly: ``succeeded`` becomes ``incomplete`` when a
gate fails (too few steps, non-finite values, a failure-token metric, an unmet metric filter).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from tau_core.errors import UsageError

LIFECYCLE_STATES = ("pending", "running", "failed", "succeeded", "incomplete")
FAILURE_TOKENS = (
    "collapse_bad_steps", "bad_steps", "nan_steps", "inf_steps", "oom", "failed", "failure", "error_count", "errors",
)
MIN_STEP_TAGS = ("tau.success.min_step", "success.min_step", "expected_max_step", "max_step")
FILTER_FIELDS = {
    "latest": "latest_value", "latest_value": "latest_value", "min": "min_value", "min_value": "min_value",
    "max": "max_value", "max_value": "max_value", "count": "count", "finite_count": "finite_count",
    "non_finite_count": "non_finite_count", "latest_step": "latest_step", "min_step": "min_step",
    "max_step": "max_step",
}
_OPS = (">=", "<=", "!=", ">", "<", "=")
_FILTER_RE = re.compile(r"^\s*(?P<lhs>.+?)\s*(?P<op>>=|<=|!=|>|<|=)\s*(?P<rhs>[^=<>!]+?)\s*$")


def normalize_lifecycle(value: str) -> str:
    v = value.strip().lower()
    if v in ("success", "successful"):
        v = "succeeded"
    if v not in LIFECYCLE_STATES:
        raise UsageError(f"lifecycle {value!r} must be one of: {', '.join(LIFECYCLE_STATES)}")
    return v


@dataclass(frozen=True)
class MetricFilter:
    text: str
    metric: str
    field: str  # a metric_summaries column
    op: str
    value: float

    def test(self, summary: dict[str, Any] | None) -> bool:
        if summary is None:
            return False
        actual = summary.get(self.field)
        if actual is None:
            return False
        a = float(actual)
        return {
            ">=": a >= self.value, "<=": a <= self.value, "!=": a != self.value,
            ">": a > self.value, "<": a < self.value, "=": a == self.value,
        }[self.op]

    def sql(self) -> tuple[str, list[Any]]:
        op = "=" if self.op == "=" else self.op
        return f"(metric_name = ? AND {self.field} IS NOT NULL AND {self.field} {op} ?)", [self.metric, self.value]


def parse_metric_filter(text: str) -> MetricFilter:
    """``metric[@field|:field] OP value``, e.g. ``loss@min<0.5`` or ``eval/score>=0.8``."""
    m = _FILTER_RE.match(text)
    if not m:
        raise UsageError(
            f"metric filter {text!r} must contain one of {', '.join(_OPS)}",
            hint="for example --metric-filter 'loss@min<0.5' or --metric-filter 'eval/score>=0.8'",
        )
    lhs, op, rhs = m.group("lhs"), m.group("op"), m.group("rhs")
    metric, field = lhs, "latest"
    if "@" in lhs:
        metric, _, field = lhs.rpartition("@")
    elif ":" in lhs:
        metric, _, field = lhs.rpartition(":")
    metric, field = metric.strip(), field.strip().lower()
    if not metric:
        raise UsageError(f"metric filter {text!r} has no metric name")
    if field not in FILTER_FIELDS:
        raise UsageError(
            f"metric filter {text!r}: field must be latest, min, max, count, finite_count, non_finite_count, "
            "latest_step, min_step, or max_step"
        )
    try:
        value = float(rhs)
    except ValueError:
        raise UsageError(f"metric filter {text!r}: value {rhs!r} is not a number") from None
    if not math.isfinite(value):
        raise UsageError(f"metric filter {text!r}: value must be finite")
    return MetricFilter(text, metric, FILTER_FIELDS[field], op, value)


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def classify(
    run: dict[str, Any],
    tags: dict[str, str],
    summaries: list[dict[str, Any]],
    *,
    min_step: int | None = None,
    metric_filters: tuple[MetricFilter, ...] = (),
) -> tuple[str, bool, list[str]]:
    """``(lifecycle_state, successful, reasons)`` for one run."""
    state = (run.get("state") or "").strip().lower()
    if state in ("pending", "running"):
        return state, False, [f"run is {state}"]
    if state == "failed":
        return "failed", False, ["run state is failed"]
    if state not in ("succeeded", "success", "successful", "completed"):
        if not run.get("completed_at"):
            return "pending", False, ["run has not reached a terminal state"]
        return "incomplete", False, ["run state is not recognized as succeeded"]
    reasons: list[str] = []
    threshold = min_step
    if threshold is None:
        for key in MIN_STEP_TAGS:
            raw = tags.get(key)
            if raw not in (None, ""):
                try:
                    threshold = int(float(raw))
                    break
                except ValueError:
                    continue
    if threshold is not None:
        steps = [s["max_step"] for s in summaries if s.get("max_step") is not None]
        top = max(steps) if steps else None
        if top is None or top < threshold:
            reasons.append(f"max step {'none' if top is None else top} is below required step {threshold}")
    by_name = {s["metric_name"]: s for s in summaries}
    for s in summaries:
        if int(s.get("non_finite_count") or 0) > 0:
            reasons.append(f"{s['metric_name']} has {s['non_finite_count']} non-finite values")
    for s in summaries:
        name = s["metric_name"].lower()
        if int(s.get("finite_count") or 0) > 0 and (s.get("max_value") or 0) > 0 and any(
            t in name for t in FAILURE_TOKENS
        ):
            reasons.append(f"{s['metric_name']} indicates failure with max value {_fmt(s['max_value'])}")
    for f in metric_filters:
        if not f.test(by_name.get(f.metric)):
            reasons.append(f"{f.metric} does not satisfy {f.field}{f.op}{_fmt(f.value)}")
    if reasons:
        return "incomplete", False, reasons
    return "succeeded", True, ["run state succeeded and success gates passed"]
