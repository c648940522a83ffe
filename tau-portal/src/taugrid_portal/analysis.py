"""Status, group comparison and the deterministic SVG plot, built on the store's read API."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau_core.errors import NotFoundError, UsageError
from taugrid_portal.store import ExperimentStore

if TYPE_CHECKING:
    import polars as pl

COMPARE_SCHEMA = "tau.exp.compare.v0"
PLOT_SCHEMA = "tau.exp.plot.v0"
STATUS_SCHEMA = "tau.exp.status.v0"
PRIMARY_METRICS = (
    "final/macro_auprc", "detect/macro_auprc", "eval/macro_auprc", "final/mean_episode_return",
    "eval/mean_episode_return", "final/reward", "eval/reward", "final/return", "eval/return",
    "final/success_rate", "eval/success_rate", "final/win_rate", "eval/win_rate", "final/pass_rate",
    "eval/pass_rate", "final/exact_match", "eval/exact_match", "final/accuracy", "eval/accuracy",
    "final/score", "eval/score",
)
PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#ca8a04", "#4f46e5",
           "#0f766e", "#a16207", "#db2777")


def primary_metric(names: list[str]) -> str | None:
    present = set(names)
    for name in PRIMARY_METRICS:
        if name in present:
            return name
    return None


def status(store: ExperimentStore, name: str) -> dict[str, Any]:
    target = store.resolve_target(name)
    runs = store.runs(run_ids=target.run_ids) if target.run_ids else []
    counts = store.counts(target.run_ids) if target.run_ids else {
        "runs": 0, "groups": 0, "configs": 0, "metric_files": 0, "artifacts": 0, "observations": 0}
    events = store.events(target.run_ids) if target.run_ids else []
    latest_event = events[-1]["time"] if events else max(
        (r.completed_at or r.started_at or r.created_at for r in runs), default=None)
    return {
        "schema_version": STATUS_SCHEMA, "store_path": str(store.root), "target": name, "target_type": target.type,
        "target_id": target.id, "project": target.project, **counts, "latest_event": latest_event,
        "states": dict(sorted(Counter(r.state for r in runs).items())),
        "lifecycle": dict(sorted(Counter(r.lifecycle_state for r in runs).items())),
        "runs_detail": [
            {"run_id": r.run_id, "run_group_id": r.run_group_id, "state": r.state,
             "lifecycle_state": r.lifecycle_state, "success_reasons": r.success_reasons,
             "metric_names": r.metric_names} for r in runs
        ],
    }


def _quantile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1] if 0 < q < 1 else (
        values[0] if q == 0 else values[-1])


def compare(store: ExperimentStore, name: str, *, metric: str | None, direction: str = "max") -> dict[str, Any]:
    if direction not in ("max", "min"):
        raise UsageError("--direction must be one of: max, min")
    target = store.resolve_target(name)
    names = store.metric_names(target.run_ids) if target.run_ids else []
    if not names:
        raise NotFoundError(f"no scalar metrics were found for target {name!r}",
                            hint="import history first with `taugrid-portal experiment import jsonl`")
    if metric is None:
        metric = primary_metric(names)
        if metric is None:
            raise UsageError(
                f"no --metric given and target {name!r} has no primary outcome metric",
                hint="pass --metric; available: " + ", ".join(names[:12]) + (" ..." if len(names) > 12 else ""),
            )
    if metric not in names:
        raise NotFoundError(f"metric {metric!r} was not found for target {name!r}",
                            hint="available: " + ", ".join(names[:12]) + (" ..." if len(names) > 12 else ""))
    runs = {r.run_id: r for r in store.runs(run_ids=target.run_ids)}
    sums = [s for s in store.summaries(target.run_ids, metric=metric) if s["latest_value"] is not None]
    run_values = sorted(
        ({"run_id": s["run_id"], "run_group_id": runs[s["run_id"]].run_group_id, "state": runs[s["run_id"]].state,
          "owner": runs[s["run_id"]].owner, "latest_step": s["latest_step"], "value": s["latest_value"],
          "unit": None} for s in sums if s["run_id"] in runs),
        key=lambda v: (v["run_group_id"], v["run_id"]),
    )
    def better(a: float, b: float) -> bool:
        return a > b if direction == "max" else a < b

    groups: dict[str, list[dict[str, Any]]] = {}
    for v in run_values:
        groups.setdefault(v["run_group_id"], []).append(v)
    group_rows = []
    for gid in sorted(groups):
        vals = groups[gid]
        ordered = sorted(x["value"] for x in vals)
        best = vals[0]
        for v in vals[1:]:
            if better(v["value"], best["value"]):
                best = v
        group_rows.append({
            "metric_name": metric, "direction": direction, "run_group_id": gid, "run_count": len(vals),
            "latest_step": max((x["latest_step"] for x in vals if x["latest_step"] is not None), default=None),
            "min": ordered[0], "p25": _quantile(ordered, 0.25), "median": statistics.median(ordered),
            "p75": _quantile(ordered, 0.75), "max": ordered[-1], "best_value": best["value"],
            "best_run_id": best["run_id"], "unit": None, "winner": False,
        })
    best_group = None
    for g in group_rows:
        if best_group is None or better(g["best_value"], best_group["best_value"]):
            best_group = g
    if best_group is not None:
        best_group["winner"] = True
    return {
        "schema_version": COMPARE_SCHEMA, "target": name, "target_type": target.type, "metric_name": metric,
        "direction": direction, "best_group_id": best_group["run_group_id"] if best_group else None,
        "best_run_id": best_group["best_run_id"] if best_group else None, "run_groups": len(group_rows),
        "runs": len(run_values), "metric_files": len(store.metric_files(target.run_ids)), "groups": group_rows,
        "run_values": run_values,
        "warnings": [] if run_values else [f"metric {metric!r} has no finite values for target {name!r}"],
    }


def _bucket_minmax(steps: list[int], values: list[float], budget: int) -> tuple[list[int], list[float]]:
    """Deterministic min/max-per-bucket reduction keeping first and last points."""
    n = len(steps)
    if n <= budget:
        return steps, values
    buckets = max(1, budget // 2)
    keep: set[int] = {0, n - 1}
    size = n / buckets
    for b in range(buckets):
        lo, hi = int(b * size), min(n, int((b + 1) * size))
        if lo >= hi:
            continue
        seg = range(lo, hi)
        keep.add(min(seg, key=lambda i: values[i]))
        keep.add(max(seg, key=lambda i: values[i]))
    idx = sorted(keep)
    return [steps[i] for i in idx], [values[i] for i in idx]


def _fmt_num(v: float) -> str:
    return f"{v:.4g}"


def plot(store: ExperimentStore, name: str, *, metric: str | None, out: Path) -> dict[str, Any]:
    from taugrid_portal.store._util import atomic_write_bytes

    target = store.resolve_target(name)
    names = store.metric_names(target.run_ids) if target.run_ids else []
    if metric is None:
        metric = primary_metric(names) or ("loss" if "loss" in names else (names[0] if names else None))
    if metric is None:
        raise NotFoundError(f"no scalar metrics were found for target {name!r}")
    df = store.series(target.run_ids, metric)
    df = df.filter(df["step"].is_not_null() & df["value"].is_finite())
    if df.height == 0:
        raise NotFoundError(f"metric {metric!r} has no chartable points for target {name!r}",
                            hint="available: " + ", ".join(names[:12]))
    series, warnings = _plot_series(store, target.run_ids, df)
    data = _svg(f"Tau experiment plot: {metric}", series)
    out = out.expanduser().absolute()
    if out.exists() and out.is_dir():
        raise UsageError(f"--out {out} is a directory")
    atomic_write_bytes(out, data)
    return {
        "schema_version": PLOT_SCHEMA, "target": name, "target_type": target.type, "metric_name": metric,
        "out": str(out), "bytes": len(data),
        "series": [{k: v for k, v in s.items() if k not in ("steps", "values")} for s in series],
        "warnings": warnings,
    }


def _plot_series(
    store: ExperimentStore, run_ids: list[str], df: pl.DataFrame
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each run's points of ``df`` (``run_id, step, value``), min/max per bucket down to 700, and a warning
    per run drawn with fewer points than it has."""
    runs = {r.run_id: r for r in store.runs(run_ids=run_ids)}
    series = []
    warnings: list[str] = []
    for run_id in sorted(set(df["run_id"].to_list())):
        part = df.filter(df["run_id"] == run_id)
        steps, values = _bucket_minmax(part["step"].to_list(), part["value"].to_list(), 700)
        if len(steps) < part.height:
            warnings.append(f"{run_id}: {len(steps)} of {part.height} points drawn (min/max per bucket)")
        series.append({"run_id": run_id, "run_group_id": runs[run_id].run_group_id if run_id in runs else "",
                       "points": part.height, "rendered_points": len(steps), "steps": steps, "values": values})
    return series, warnings


def _svg(title: str, series: list[dict[str, Any]]) -> bytes:
    """The SVG line chart of ``series`` (at least one, each with points): grid, axes and a legend."""
    x0 = min(s["steps"][0] for s in series)
    x1 = max(s["steps"][-1] for s in series)
    y0 = min(min(s["values"]) for s in series)
    y1 = max(max(s["values"]) for s in series)
    if x1 == x0:
        x1 = x0 + 1
    if math.isclose(y0, y1):
        y0, y1 = y0 - 0.5, y1 + 0.5
    left, right, top, bottom = 28 + 40, 732, 28, 192
    height = 286 + 18 * len(series)

    def px(x: float) -> float:
        return float(left + (x - x0) / (x1 - x0) * (right - left))

    def py(y: float) -> float:
        return float(bottom - (y - y0) / (y1 - y0) * (bottom - top))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="900" height="{height}" viewBox="0 0 900 {height}" '
        f'font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        '<rect width="100%" height="100%" fill="#ffffff"/>',
        f'<text x="{left}" y="18" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    for i in range(5):
        yv = y0 + (y1 - y0) * i / 4
        y = py(yv)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        parts.append(f'<text x="{left - 4}" y="{y + 3:.1f}" text-anchor="end" fill="#4b5563">{_fmt_num(yv)}</text>')
    for i in range(5):
        xv = x0 + (x1 - x0) * i / 4
        x = px(xv)
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#f3f4f6"/>')
        parts.append(f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle" fill="#4b5563">{int(xv)}</text>')
    parts.append(f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" '
                 'stroke="#9ca3af"/>')
    parts.append(f'<text x="{(left + right) / 2}" y="{bottom + 30}" text-anchor="middle">step</text>')
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(s["steps"], s["values"], strict=True))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}">'
                     f"<title>{escape(s['run_id'])}</title></polyline>")
        ly = 250 + 18 * i
        parts.append(f'<rect x="{left}" y="{ly - 9}" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{left + 18}" y="{ly + 1}">{escape(s["run_id"])} group={escape(s["run_group_id"])}'
                     f"</text>")
    parts.append("</svg>")
    return ("\n".join(parts) + "\n").encode("utf-8")
