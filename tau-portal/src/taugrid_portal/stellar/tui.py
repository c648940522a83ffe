"""``-o tui``: a readable terminal summary of a Stellar snapshot (plain text, sparklines)."""

from __future__ import annotations

from typing import Any

from tau_core.output import render_table

SPARK_LEVELS = "_.:-=+*#%@"
SPARK_WIDTH = 48
MAX_METRIC_ROWS = 24
MAX_SERIES = 8
MAX_RUNS = 16


def _num(value: Any) -> str:
    if value is None:
        return "-"
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError):
        return str(value)


def _clip(text: Any, width: int) -> str:
    s = "" if text is None else str(text)
    s = "".join(ch if ch.isprintable() else "?" for ch in s)
    return s if len(s) <= width else s[: width - 1] + "…"


def sparkline(values: list[float], width: int = SPARK_WIDTH, lo: float | None = None, hi: float | None = None) -> str:
    """ASCII sparkline: ``width`` columns, each the mean of its slice, scaled to ``lo..hi``."""
    if not values:
        return ""
    lo = min(values) if lo is None else lo
    hi = max(values) if hi is None else hi
    cols = min(width, len(values))
    out = []
    for c in range(cols):
        a = c * len(values) // cols
        b = max(a + 1, (c + 1) * len(values) // cols)
        chunk = values[a:b]
        v = sum(chunk) / len(chunk)
        level = 0 if hi <= lo else round((v - lo) / (hi - lo) * (len(SPARK_LEVELS) - 1))
        out.append(SPARK_LEVELS[max(0, min(len(SPARK_LEVELS) - 1, level))])
    return "".join(out)


def render_tui(snapshot: dict[str, Any]) -> str:
    sections = (_header, _summary, _status, _metrics, _chart, _runs, _actions)
    return "\n".join(line for section in sections for line in section(snapshot))


def _header(snapshot: dict[str, Any]) -> list[str]:
    lines = [f"Stellar dashboard: {_clip(snapshot['target'], 80)} ({snapshot['target_type']})",
             f"store: {snapshot['store_path']}"]
    exp = snapshot.get("experiment")
    if exp:
        lines.append(f"experiment: {_clip(exp.get('name'), 60)} ({_clip(exp.get('experiment_id'), 60)})")
    return [*lines, ""]


def _summary(snapshot: dict[str, Any]) -> list[str]:
    summary = snapshot.get("summary") or {}
    lines = ["SUMMARY", f"  status:   {summary.get('status')}"]
    if summary.get("best_evidence"):
        lines.append(f"  evidence: {_clip(summary['best_evidence'], 120)}")
    if summary.get("next_command"):
        lines.append(f"  next:     {summary['next_command']}")
    return [*lines, ""]


def _status(snapshot: dict[str, Any]) -> list[str]:
    status = snapshot.get("status") or {}
    cols = ["runs", "groups", "configs", "metric_files", "artifacts", "observations"]
    states = status.get("states") or {}
    lifecycle = status.get("lifecycle") or {}
    return ["STATUS", render_table([[status.get(c, 0) for c in cols]], cols),
            "states:    " + (", ".join(f"{k}={v}" for k, v in sorted(states.items())) or "(none)"),
            "lifecycle: " + (", ".join(f"{k}={v}" for k, v in sorted(lifecycle.items())) or "(none)"),
            ""]


def _metrics(snapshot: dict[str, Any]) -> list[str]:
    lines = ["METRICS"]
    rows = []
    for card in snapshot.get("cards", []):
        for g in card["groups"]:
            rows.append([_clip(card["name"], 32), _clip(g["run_group_id"], 24), g["run_count"], g["latest_step"],
                         f"{_num(g['best_value'])} ({card['direction']})", f"{_num(g['min'])}..{_num(g['max'])}"])
    if rows:
        lines.append(render_table(rows[:MAX_METRIC_ROWS], ["metric", "group", "runs", "latest_step", "best", "range"]))
        if len(rows) > MAX_METRIC_ROWS:
            lines.append(f"... {len(rows) - MAX_METRIC_ROWS} more metric group rows")
    else:
        lines.append("(no scalar metrics)")
    return [*lines, ""]


def _chart(snapshot: dict[str, Any]) -> list[str]:
    charts = snapshot.get("charts", [])
    if not charts:
        return []
    chart = charts[0]
    lines = [f"CHART {chart['metric_name']}"]
    if chart["has_data"]:
        lines.append(f"(step {chart['x_min']}..{chart['x_max']}, value {_num(chart['y_min'])}..{_num(chart['y_max'])}; "
                     f"{chart['rendered_points']} of {chart['source_points']} points shown)")
        srows = []
        for s in chart["series"][:MAX_SERIES]:
            latest = s["values"][-1] if s["values"] else None
            srows.append([_clip(s["run_id"], 28), s["source_points"], _num(latest),
                          sparkline(s["values"], lo=chart["y_min"], hi=chart["y_max"])])
        lines.append(render_table(srows, ["run", "points", "latest", "trend"]))
        if len(chart["series"]) > MAX_SERIES:
            lines.append(f"... {len(chart['series']) - MAX_SERIES} more series")
    else:
        lines.append("(no chart data)")
    if len(charts) > 1:
        lines.append("other metrics: " + ", ".join(_clip(c["metric_name"], 40) for c in charts[1:13])
                     + (" ..." if len(charts) > 13 else ""))
    return [*lines, ""]


def _runs(snapshot: dict[str, Any]) -> list[str]:
    lines = ["RUNS"]
    runs = snapshot.get("runs", [])
    if runs:
        rrows = [[_clip(r["run_id"], 28), r["lifecycle_state"], r["state"], _clip(r["run_group_id"], 20),
                  len(r.get("summaries", [])), _clip(r.get("tau_command") or "-", 60)] for r in runs[:MAX_RUNS]]
        lines.append(render_table(rrows, ["run", "lifecycle", "state", "group", "metrics", "command"]))
        if len(runs) > MAX_RUNS:
            lines.append(f"... {len(runs) - MAX_RUNS} more runs")
    else:
        lines.append("(no runs)")
    return [*lines, ""]


def _actions(snapshot: dict[str, Any]) -> list[str]:
    lines = ["ACTIONS", *(f"  {key}: {cmd}" for key, cmd in (snapshot.get("actions") or {}).items())]
    warnings = snapshot.get("warnings") or []
    if warnings:
        lines += ["", "WARNINGS", *(f"- {w}" for w in warnings)]
    return lines
