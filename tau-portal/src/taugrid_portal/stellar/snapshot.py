"""Build the Stellar snapshot: everything a dashboard shows for one target, as plain JSON data.

``-o json`` prints exactly this dict, ``-o html`` renders the page from it, ``-o tui`` summarises
it, and the server's ``/api/stellar/snapshot`` returns it. Shape (``tau.exp.cockpit.v0``)::

    schema_version payload_mode generated_at store_path target target_type project
    experiment status summary run_groups runs metric_options chart charts cards
    best_group_id sampling actions warnings

Chart series are columnar (``steps`` / ``values`` arrays) and already downsampled for display;
the raw history stays in the store (see :mod:`.downsample`).
"""

from __future__ import annotations

import json
import math
import shlex
import statistics
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tau_core.errors import ConfigError, NotFoundError, UsageError

from . import downsample

SCHEMA_VERSION = "tau.exp.cockpit.v0"
SERIES_SCHEMA_VERSION = "tau.exp.cockpit.series.v0"
PALETTE = (
    "#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2",
    "#be185d", "#ca8a04", "#4f46e5", "#0f766e", "#a16207", "#db2777",
)
# The primary decision metric is the first of these that the target has (reference §3.1).
PRIMARY_METRICS = (
    "final/macro_auprc", "detect/macro_auprc", "eval/macro_auprc", "final/mean_episode_return",
    "eval/mean_episode_return", "final/reward", "eval/reward", "final/return", "eval/return",
    "final/success_rate", "eval/success_rate", "final/win_rate", "eval/win_rate", "final/pass_rate",
    "eval/pass_rate", "final/exact_match", "eval/exact_match", "final/accuracy", "eval/accuracy",
    "final/score", "eval/score",
)
# Names that are better when smaller; everything else is better when larger.
LOWER_IS_BETTER = ("loss", "error", "err", "perplexity", "ppl", "mse", "mae", "rmse", "nll", "latency", "time")
# The whole page draws at most this many points; the per-series budget shrinks as series grow
# so that 100 runs x 10 metrics still gives a page of a few megabytes.
PAGE_POINT_BUDGET = 200_000
MIN_SERIES_BUDGET = 64
BATCH_POINTS = 1_000_000
COMMAND = "taugrid-portal experiment"


def direction_of(metric: str) -> str:
    leaf = metric.lower().rsplit("/", 1)[-1]
    return "min" if any(tok in leaf for tok in LOWER_IS_BETTER) else "max"


def primary_metric(names: Sequence[str]) -> str | None:
    present = set(names)
    for name in PRIMARY_METRICS:
        if name in present:
            return name
    for name in names:
        if name == "loss" or name.endswith("/loss"):
            return name
    return sorted(names)[0] if names else None


def series_budget(max_points: int | None, series_count: int) -> int:
    """Points per series: ``--max-points`` when given, else a share of the page budget."""
    if max_points is not None:
        if max_points < 1:
            raise UsageError("--max-points must be at least 1")
        if max_points > downsample.MAX_POINTS_LIMIT:
            raise UsageError(f"--max-points must be at most {downsample.MAX_POINTS_LIMIT}")
        return max_points
    if series_count <= 0:
        return downsample.DEFAULT_MAX_POINTS
    share = PAGE_POINT_BUDGET // series_count
    return max(MIN_SERIES_BUDGET, min(downsample.DEFAULT_MAX_POINTS, share))


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _quantile(sorted_values: list[float], q: float) -> float:
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _config_view(row: dict[str, Any]) -> dict[str, Any]:
    normalized = row.get("normalized_json")
    try:
        parsed = json.loads(normalized) if normalized else None
    except ValueError:
        parsed = normalized
    return {
        "config_hash": row.get("config_hash"),
        "format": row.get("format"),
        "uri": row.get("uri"),
        "config": parsed,
    }


SUMMARY_FIELDS = ("metric_name", "count", "finite_count", "non_finite_count", "min_step", "max_step", "latest_step",
                  "latest_wall_time", "latest_value", "min_value", "max_value")


def _summary_view(row: dict[str, Any]) -> dict[str, Any]:
    view = {k: row.get(k) for k in SUMMARY_FIELDS}
    for key in ("latest_value", "min_value", "max_value"):
        view[key] = _finite(view[key])
    return view


def _artifact_view(row: dict[str, Any]) -> dict[str, Any]:
    keep = ("artifact_id", "type", "name", "uri", "durable_ref", "content_type", "digest", "size_bytes",
            "step", "direction", "caption", "created_at")
    return {k: row.get(k) for k in keep}


def _output_dir(store: Any, result_uri: str | None) -> str | None:
    """Where a run's outputs are: a URI or absolute path as recorded, or a store-relative
    path (what importers record) made absolute when it stays inside the store."""
    if not result_uri:
        return None
    text = result_uri.strip()
    if "://" in text or text.startswith("/") or ":" in text.split("/", 1)[0]:
        return text
    root = Path(store.root).resolve()
    candidate = (root / text).resolve()
    return str(candidate) if candidate.is_relative_to(root) else None


def _store_path(store: Any) -> str:
    return str(getattr(store, "root", ""))


def _target_runs(store: Any, target: str) -> tuple[Any, list[Any]]:
    resolved = store.resolve_target(target)
    runs = store.runs(run_ids=list(resolved.run_ids)) if resolved.run_ids else []
    order = {rid: i for i, rid in enumerate(resolved.run_ids)}
    runs.sort(key=lambda r: order.get(r.run_id, len(order)))
    return resolved, runs


def _assemble_chart(
    metric: str,
    run_ids: Sequence[str],
    rows: dict[str, dict[str, Any]],
    budget: int,
    colors: dict[str, str],
) -> dict[str, Any]:
    """The ``charts[]`` element for ``metric`` from per-run sampled rows (steps, values, counts)."""
    series: list[dict[str, Any]] = []
    x_min = x_max = y_min = y_max = None
    totals = {"source_points": 0, "finite_points": 0, "rendered_points": 0, "non_finite_points": 0}
    for rid in run_ids:
        row = rows.get(rid)
        if row is None:
            continue
        steps, values = row["steps"], row["values"]
        series.append({
            "run_id": rid,
            "color": colors.get(rid, PALETTE[0]),
            "steps": steps,
            "values": values,
            "source_points": row["source_points"],
            "non_finite_points": row["non_finite_points"],
            "finite_points": row["finite_points"],
            "rendered_points": len(steps),
            "decimated": len(steps) < row["finite_points"],
        })
        for key in totals:
            totals[key] += len(steps) if key == "rendered_points" else row[key]
        if steps:
            x_min = steps[0] if x_min is None else min(x_min, steps[0])
            x_max = steps[-1] if x_max is None else max(x_max, steps[-1])
            lo, hi = min(values), max(values)
            y_min = lo if y_min is None else min(y_min, lo)
            y_max = hi if y_max is None else max(y_max, hi)
    return {
        "metric_name": metric,
        "direction": direction_of(metric),
        "has_data": totals["rendered_points"] > 0,
        "x_min": x_min,
        "x_max": x_max,
        "y_min": y_min,
        "y_max": y_max,
        **totals,
        "decimated": totals["rendered_points"] < totals["finite_points"],
        "max_points_per_series": budget,
        "series": series,
    }


def _rounded(frame: Any) -> Any:
    import polars as pl

    return frame.with_columns(pl.col("values").list.eval(pl.element().round_sig_figs(downsample.DISPLAY_SIG_FIGS)))


def chart_series(
    store: Any,
    run_ids: Sequence[str],
    metric: str,
    budget: int,
    colors: dict[str, str],
    *,
    start_step: int | None = None,
    end_step: int | None = None,
) -> dict[str, Any]:
    """One metric across runs (optionally a step range), downsampled: the series API body."""
    import polars as pl

    points, run_of = load_points(store, run_ids, metric=metric, start_step=start_step, end_step=end_step)
    sampled = _rounded(downsample.downsample_runs(points, budget, run_of))
    counts = (
        points.group_by(pl.col("run_id").cast(pl.String)).agg(
            pl.len().alias("source_points"),
            (~pl.col("value").is_finite().fill_null(False)).sum().alias("non_finite_points"),
        )
        .with_columns(pl.col("run_id").replace_strict(run_of, return_dtype=pl.String))
        .group_by("run_id").agg(pl.col("source_points").sum(), pl.col("non_finite_points").sum())
    )
    totals = {r["run_id"]: r for r in counts.iter_rows(named=True)}
    rows = {}
    for row in sampled.iter_rows(named=True):
        row.update(totals.get(row["run_id"], {"source_points": row["finite_points"], "non_finite_points": 0}))
        rows[row["run_id"]] = row
    return _assemble_chart(metric, run_ids, rows, budget, colors)


def load_points(
    store: Any,
    run_ids: Sequence[str],
    *,
    metric: str | None = None,
    start_step: int | None = None,
    end_step: int | None = None,
) -> tuple[Any, dict[str, str]]:
    """Every scalar point of ``run_ids`` (or of one ``metric``, optionally a step range) in one
    scan over their immutable metric files.

    Returns ``(frame, run_of)``: the frame has ``run_id, metric_name, step, value`` where
    ``run_id`` is the source file (categorical) and ``run_of`` maps each file to its run, as the
    index records it (every metric file holds one run), so no per-row run column is decoded.
    Files are read in write order (``created_at``, ``file_id``), so later writes of a step win.
    """
    import polars as pl

    root = Path(store.root).resolve()
    wanted = set(run_ids)
    run_of: dict[str, str] = {}
    for f in store.metric_files(list(run_ids)):
        if f.get("run_id") not in wanted or (f.get("format") or "parquet") != "parquet":
            continue
        path = (root / f["path"]).resolve()
        if not path.is_relative_to(root):
            raise ConfigError(f"metric file {f['path']!r} in {root} escapes the store root")
        run_of[str(path)] = f["run_id"]
    if not run_of:
        return pl.DataFrame(schema={"run_id": pl.Categorical, "metric_name": pl.Categorical, "step": pl.Int64,
                                    "value": pl.Float64}), run_of
    scan = pl.scan_parquet(list(run_of), include_file_paths="_source")
    if metric is not None:
        scan = scan.filter(pl.col("metric_name") == metric)
    if start_step is not None:
        scan = scan.filter(pl.col("step") >= start_step)
    if end_step is not None:
        scan = scan.filter(pl.col("step") <= end_step)
    frame = scan.select(
        pl.col("_source").cast(pl.Categorical).alias("run_id"), pl.col("metric_name").cast(pl.Categorical),
        pl.col("step").cast(pl.Int64), pl.col("value").cast(pl.Float64),
    ).collect()
    return frame, run_of


def all_charts(
    store: Any,
    run_ids: Sequence[str],
    metrics: Sequence[str],
    summaries: dict[tuple[str, str], dict[str, Any]],
    budget: int,
    colors: dict[str, str],
) -> list[dict[str, Any]]:
    """Every metric's chart from one read of the metric files (the dashboard path).

    Runs are processed in batches of about :data:`BATCH_POINTS` points (every file of a run in
    the same batch), which keeps the working set small: less memory traffic, same result.
    """
    import polars as pl

    frames = []
    raw_runs = list(run_ids)
    if budget >= 4:
        # Runs whose every charted series has an import-time display copy at this budget's
        # level (and more points than the budget) skip the raw history: same points, no scan.
        display = store.display_series(list(run_ids), downsample.bucket_count(budget))
        covered = [
            rid for rid in run_ids
            if any((rid, m) in summaries for m in metrics)
            and all((rid, m) in display and display[(rid, m)]["points"] > budget
                    for m in metrics if (rid, m) in summaries)
        ]
        if covered:
            keys = [(rid, m) for rid in covered for m in metrics if (rid, m) in summaries]
            frames.append(pl.DataFrame(
                {
                    "run_id": [k[0] for k in keys], "metric_name": [k[1] for k in keys],
                    "steps": [display[k]["steps"] for k in keys], "values": [display[k]["values"] for k in keys],
                    "finite_points": [display[k]["points"] for k in keys],
                },
                schema=downsample.out_schema(),
            ))
            done = set(covered)
            raw_runs = [rid for rid in run_ids if rid not in done]
    sizes: dict[str, int] = {rid: 0 for rid in raw_runs}
    for f in store.metric_files(raw_runs) if raw_runs else []:
        if f.get("run_id") in sizes:
            sizes[f["run_id"]] += int(f.get("row_count") or 0)
    batches: list[list[str]] = [[]]
    total = 0
    for rid in raw_runs:
        if batches[-1] and total + sizes[rid] > BATCH_POINTS:
            batches.append([])
            total = 0
        batches[-1].append(rid)
        total += sizes[rid]
    for batch in batches:
        if not batch:
            continue
        points, run_of = load_points(store, batch)
        frames.append(downsample.downsample_runs(points, budget, run_of))
    sampled = _rounded(pl.concat(frames) if frames else pl.DataFrame(schema=downsample.out_schema()))
    by_metric: dict[str, dict[str, dict[str, Any]]] = {m: {} for m in metrics}
    for row in sampled.iter_rows(named=True):
        rows = by_metric.get(row["metric_name"])
        if rows is None:
            continue
        summary = summaries.get((row["run_id"], row["metric_name"]), {})
        count = int(summary.get("count") or 0)
        non_finite = int(summary.get("non_finite_count") or 0)
        row["source_points"] = max(count, row["finite_points"] + non_finite)
        row["non_finite_points"] = non_finite
        rows[row["run_id"]] = row
    return [_assemble_chart(m, run_ids, by_metric[m], budget, colors) for m in metrics]


def _cards(
    metrics: Sequence[str], runs: Sequence[Any], summaries: dict[tuple[str, str], dict[str, Any]]
) -> list[dict[str, Any]]:
    cards = []
    for metric in metrics:
        direction = direction_of(metric)
        groups: dict[str, list[tuple[str, float, int | None]]] = {}
        for run in runs:
            s = summaries.get((run.run_id, metric))
            value = _finite(s.get("latest_value")) if s else None
            if s is None or value is None:
                continue
            groups.setdefault(run.run_group_id, []).append((run.run_id, value, s.get("latest_step")))
        rows = []
        for gid in sorted(groups):
            entries = groups[gid]
            values = sorted(v for _, v, _ in entries)
            pick = min if direction == "min" else max
            best_run, best_value, _ = pick(sorted(entries), key=lambda e: e[1])
            steps = [st for _, _, st in entries if st is not None]
            rows.append({
                "run_group_id": gid,
                "run_count": len(entries),
                "latest_step": max(steps) if steps else None,
                "min": values[0],
                "p25": _quantile(values, 0.25),
                "median": statistics.median(values),
                "p75": _quantile(values, 0.75),
                "max": values[-1],
                "best_value": best_value,
                "best_run_id": best_run,
            })
        cards.append({"name": metric, "direction": direction, "groups": rows})
    return cards


def _run_views(store: Any, runs: list[Any], colors: dict[str, str], summaries: dict[tuple[str, str], Any],
               metric_names: list[str]) -> list[dict[str, Any]]:
    """Each run as the table shows it: its record, color, summaries, configs, artifacts and output dir."""
    views = []
    for run in runs:
        view = run.to_dict()
        view["color"] = colors[run.run_id]
        view["summaries"] = [_summary_view(summaries[(run.run_id, m)]) for m in metric_names
                             if (run.run_id, m) in summaries]
        view["configs"] = [_config_view(c) for c in store.configs(run.run_id)]
        view["artifacts"] = [_artifact_view(a) for a in store.artifacts(run.run_id)]
        view["output_dir"] = _output_dir(store, run.result_uri)
        views.append(view)
    return views


def _best(primary: str | None, cards: list[dict[str, Any]]) -> tuple[str | None, str | None, Any]:
    """``(group, run, value)`` of the best group on the primary metric's card (ties: lowest group id)."""
    if not (primary and cards and cards[0]["groups"]):
        return None, None, None
    pick = min if cards[0]["direction"] == "min" else max
    best = pick(sorted(cards[0]["groups"], key=lambda g: g["run_group_id"]), key=lambda g: g["best_value"])
    return best["run_group_id"], best["best_run_id"], best["best_value"]


def _status(store: Any, runs: list[Any], run_ids: list[str]) -> dict[str, Any]:
    """The store's counts for the runs, with how many runs are in each state and lifecycle state."""
    states: dict[str, int] = {}
    lifecycle: dict[str, int] = {}
    for run in runs:
        states[run.state] = states.get(run.state, 0) + 1
        lifecycle[run.lifecycle_state] = lifecycle.get(run.lifecycle_state, 0) + 1
    counts = store.counts(run_ids) if run_ids else {"runs": 0, "groups": 0, "configs": 0, "metric_files": 0,
                                                      "artifacts": 0, "observations": 0}
    return {**counts, "states": states, "lifecycle": lifecycle}


def _summary(runs: list[Any], lifecycle: dict[str, int], primary: str | None,
             best: tuple[str | None, str | None, Any], tq: str, opt: str) -> dict[str, Any]:
    """The headline: run states, the primary metric and its best run (``tq``, ``opt``: see :func:`_commands`)."""
    best_group_id, best_run_id, best_value = best
    status_text = ", ".join(f"{n} {k}" for k, n in sorted(lifecycle.items()))
    return {
        "status": f"{len(runs)} run{'' if len(runs) == 1 else 's'}: {status_text}" if runs else "no runs",
        "primary_metric": primary,
        "direction": direction_of(primary) if primary else None,
        "best_run_id": best_run_id,
        "best_group_id": best_group_id,
        "best_value": best_value,
        "best_evidence": (
            f"{primary} {'min' if direction_of(primary) == 'min' else 'max'} latest = "
            f"{best_value:.6g} ({best_run_id}, group {best_group_id})"
            if primary and best_value is not None else None
        ),
        "next_command": f"{COMMAND} compare {tq} --metric {shlex.quote(primary)}{opt}" if primary else None,
    }


def _commands(tq: str, opt: str) -> dict[str, str]:
    """The CLI commands the page offers for the quoted target ``tq`` (``opt``: the ``--store`` option)."""
    return {
        "open_dashboard": f"{COMMAND} open {tq}{opt}",
        "save_html": f"{COMMAND} stellar {tq} -o html --out stellar.html{opt}",
        "status": f"{COMMAND} status {tq}{opt}",
        "export_json": f"{COMMAND} stellar {tq} -o json{opt}",
    }


def build_snapshot(
    store: Any,
    target: str,
    *,
    metric: str | None = None,
    max_points: int | None = None,
    now: datetime | None = None,
    origin: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The full snapshot for ``target`` (a run group, run or experiment name); ``origin`` = (shown store path,
    the CLI option that reads it again) when the store stands in for another source (Kusto)."""
    resolved, runs = _target_runs(store, target)
    run_ids = [r.run_id for r in runs]
    colors = {rid: PALETTE[i % len(PALETTE)] for i, rid in enumerate(run_ids)}
    from taugrid_portal.store.writes import RUN_STATUS_METRIC

    # the terminal tau/run_status marker is run state (the table's state column), never a chart of its own
    summary_rows = [s for s in (store.summaries(run_ids) if run_ids else []) if s["metric_name"] != RUN_STATUS_METRIC]
    summaries = {(s["run_id"], s["metric_name"]): s for s in summary_rows}
    metric_names = sorted({s["metric_name"] for s in summary_rows})
    warnings = list(getattr(store, "warnings", []) or [])
    if metric is not None and metric not in metric_names:
        hint = ("metrics here: " + ", ".join(metric_names[:12])) if metric_names else "this target has no metrics"
        raise UsageError(f"metric {metric!r} was not recorded for target {target!r}", hint=hint)
    primary = metric or primary_metric(metric_names)
    ordered = ([primary] if primary else []) + [m for m in metric_names if m != primary]

    budget = series_budget(max_points, len(summary_rows))
    charts = all_charts(store, run_ids, ordered, summaries, budget, colors)
    cards = _cards(ordered, runs, summaries)
    best = _best(primary, cards)
    status = _status(store, runs, run_ids)
    store_path = origin[0] if origin else _store_path(store)
    opt = origin[1] if origin else f" --store {shlex.quote(store_path)}"
    tq = shlex.quote(target)
    experiment = None
    if resolved.type == "experiment":
        experiment = next((e for e in store.experiments() if e["experiment_id"] == resolved.id), None)
    if not run_ids:
        warnings.append(f"target {target!r} has no runs yet")
    elif not metric_names:
        warnings.append(f"no scalar metrics were recorded for target {target!r}")

    primary_chart = charts[0] if charts else None
    return {
        "schema_version": SCHEMA_VERSION,
        "payload_mode": "full",
        "generated_at": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "store_path": store_path,
        "target": target,
        "target_type": resolved.type,
        "project": resolved.project,
        "experiment": experiment,
        "status": status,
        "summary": _summary(runs, status["lifecycle"], primary, best, tq, opt),
        "run_groups": sorted({r.run_group_id for r in runs}),
        "runs": _run_views(store, runs, colors, summaries, metric_names),
        "metric_options": [{"name": m, "selected": m == primary} for m in ordered],
        "chart": (
            {k: v for k, v in primary_chart.items() if k != "series"} if primary_chart else {"has_data": False}
        ),
        "charts": charts,
        "cards": cards,
        "best_group_id": best[0],
        "sampling": {
            "algorithm": downsample.ALGORITHM,
            "max_points_per_series": budget,
            "page_point_budget": PAGE_POINT_BUDGET if max_points is None else None,
            "display_sig_figs": downsample.DISPLAY_SIG_FIGS,
            "raw_preserved": True,
        },
        "actions": _commands(tq, opt),
        "warnings": warnings,
    }


def build_series(
    store: Any,
    target: str,
    metric: str,
    *,
    run_id: str | None = None,
    start_step: int | None = None,
    end_step: int | None = None,
    max_points: int = 8000,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The series detail for one metric (``/api/stellar/series``): one chart, optionally one run."""
    if not 1 <= max_points <= downsample.MAX_POINTS_LIMIT:
        raise UsageError(f"max_points must be between 1 and {downsample.MAX_POINTS_LIMIT}")
    if start_step is not None and end_step is not None and start_step > end_step:
        raise UsageError("start_step must be <= end_step")
    resolved, runs = _target_runs(store, target)
    run_ids = [r.run_id for r in runs]
    colors = {rid: PALETTE[i % len(PALETTE)] for i, rid in enumerate(run_ids)}
    if run_id is not None:
        if run_id not in run_ids:
            raise NotFoundError(f"run {run_id!r} is not part of target {target!r}")
        run_ids = [run_id]
    names = store.metric_names(run_ids) if run_ids else []
    if metric not in names:
        raise NotFoundError(f"metric {metric!r} was not recorded for target {target!r}")
    chart = chart_series(store, run_ids, metric, max_points, colors, start_step=start_step, end_step=end_step)
    warnings = [] if chart["has_data"] else ["no scalar metric points matched the series query"]
    return {
        "schema_version": SERIES_SCHEMA_VERSION,
        "generated_at": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "target": target,
        "target_type": resolved.type,
        "metric": metric,
        "run_id": run_id,
        "start_step": start_step,
        "end_step": end_step,
        "max_points": max_points,
        "chart": chart,
        "warnings": warnings,
    }


def to_json(snapshot: dict[str, Any], *, indent: int | None = 2) -> str:
    """Strict JSON (no NaN/Infinity): the snapshot never holds a non-finite number."""
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(snapshot, indent=indent, separators=separators, allow_nan=False, ensure_ascii=False)
