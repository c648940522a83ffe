"""Per-(run, metric) summaries: computed per file with polars, merged incrementally.

A summary counts every row (``count``), splits finite from non-finite values, spans the step
range of every row that has a step (non-finite rows included), keeps min/max over finite
values and the *latest finite* point.  "Latest" orders rows by: has a step, step, has a wall
time, wall time, the metric file's ``created_at``, its ``file_id``, then row order.
"""

from __future__ import annotations

import math
from typing import Any

SUMMARY_FIELDS = (
    "run_id", "metric_name", "project", "run_group_id", "count", "finite_count", "non_finite_count",
    "min_step", "max_step", "latest_step", "latest_wall_time", "latest_value", "min_value", "max_value",
    "updated_at", "latest_file_id",
)


def latest_key(summary: dict[str, Any], file_created_at: str, file_id: str, ordinal: int = 0) -> tuple[Any, ...]:
    step = summary.get("latest_step")
    wall = summary.get("latest_wall_time")
    return (
        step is not None, step if step is not None else 0,
        wall is not None, wall if wall is not None else 0,
        file_created_at or "", file_id or "", ordinal,
    )


def summarize_frame(df: Any, *, ordinal_offset: int = 0) -> dict[str, dict[str, Any]]:
    """Summaries of one frame (``metric_name, step, wall_time_us, value``) keyed by metric name.

    Each result carries a private ``_ordinal`` (row position of the latest point) so chunks
    of one file merge exactly like a single pass would.
    """
    import polars as pl

    if df.height == 0:
        return {}
    df = df.with_row_index("_ord", offset=ordinal_offset)
    fin = pl.col("value").is_finite()
    agg = df.group_by("metric_name").agg(
        pl.len().alias("count"),
        fin.sum().alias("finite_count"),
        pl.col("step").min().alias("min_step"),
        pl.col("step").max().alias("max_step"),
        pl.col("value").filter(fin).min().alias("min_value"),
        pl.col("value").filter(fin).max().alias("max_value"),
    )
    finite = df.filter(fin)
    latest: dict[str, tuple[Any, Any, Any, int]] = {}
    if finite.height:
        max_step = pl.col("step").max().over("metric_name")
        cand = finite.filter((pl.col("step") == max_step) | max_step.is_null())
        wmax = pl.col("wall_time_us").max().over("metric_name")
        cand = cand.filter((pl.col("wall_time_us") == wmax) | wmax.is_null())
        rows = cand.filter(pl.col("_ord") == pl.col("_ord").max().over("metric_name"))
        for name, step, wall, value, ordv in zip(
            rows["metric_name"].to_list(), rows["step"].to_list(), rows["wall_time_us"].to_list(),
            rows["value"].to_list(), rows["_ord"].to_list(), strict=True,
        ):
            latest[name] = (step, wall, value, ordv)
    out: dict[str, dict[str, Any]] = {}
    for row in agg.iter_rows(named=True):
        name = row["metric_name"]
        fc = int(row["finite_count"] or 0)
        lt = latest.get(name)
        out[name] = {
            "metric_name": name,
            "count": int(row["count"]),
            "finite_count": fc,
            "non_finite_count": int(row["count"]) - fc,
            "min_step": row["min_step"],
            "max_step": row["max_step"],
            "min_value": row["min_value"] if fc else None,
            "max_value": row["max_value"] if fc else None,
            "latest_step": lt[0] if lt else None,
            "latest_wall_time": lt[1] if lt else None,
            "latest_value": lt[2] if lt else None,
            "_ordinal": lt[3] if lt else -1,
        }
    return out


WIDE_CHUNK = 64


def _wide_exprs(metrics: list[str], lo: int, hi: int) -> list[Any]:
    import polars as pl

    exprs = []
    for i in range(lo, min(hi, len(metrics))):
        m = metrics[i]
        nn = pl.col(m).is_not_null()
        step = pl.col("step").filter(nn)
        top = step.max()
        cand = nn & (pl.col("step") == top)
        wmax = pl.col("wall_time_us").filter(cand).max()
        cand2 = cand & ((pl.col("wall_time_us") == wmax) | wmax.is_null())
        ordv = pl.col("_ord").filter(cand2).max()
        exprs += [
            nn.sum().alias(f"c{i}"), pl.col(m).min().alias(f"mn{i}"), pl.col(m).max().alias(f"mx{i}"),
            step.min().alias(f"s0{i}"), top.alias(f"s1{i}"), wmax.alias(f"w{i}"), ordv.alias(f"o{i}"),
            pl.col(m).filter(pl.col("_ord") == ordv).first().alias(f"v{i}"),
        ]
    return exprs


def summarize_wide(wide: Any, *, ordinal_offset: int = 0) -> dict[str, dict[str, Any]]:
    """Summaries from a wide frame (``step, wall_time_us, <metric>...``, one row per JSONL line).

    Equal to :func:`summarize_frame` over the unpivoted rows, but one pass over the columns
    instead of a group-by over the long form.  Values are finite (the fast path checks).
    """

    metrics = [c for c in wide.columns if c not in ("step", "wall_time_us")]
    if not metrics or wide.height == 0:
        return {}
    base = wide.select("step", "wall_time_us").with_row_index("_ord", offset=ordinal_offset)
    row: dict[str, Any] = {}
    # bounded plans over narrow frames: one select of 8 x 10,000 expressions took 20 s and 2 GB
    for lo in range(0, len(metrics), WIDE_CHUNK):
        part = base.hstack(wide.select(metrics[lo:lo + WIDE_CHUNK]).get_columns())
        row.update(part.select(_wide_exprs(metrics, lo, lo + WIDE_CHUNK)).row(0, named=True))
    out: dict[str, dict[str, Any]] = {}
    for i, m in enumerate(metrics):
        count = int(row[f"c{i}"] or 0)
        if count == 0:
            continue
        out[m] = {
            "metric_name": m, "count": count, "finite_count": count, "non_finite_count": 0,
            "min_step": row[f"s0{i}"], "max_step": row[f"s1{i}"], "min_value": row[f"mn{i}"],
            "max_value": row[f"mx{i}"], "latest_step": row[f"s1{i}"], "latest_wall_time": row[f"w{i}"],
            "latest_value": row[f"v{i}"], "_ordinal": row[f"o{i}"],
        }
    return out


def _min(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _max(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def merge(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    old_key: tuple[Any, ...] | None,
    new_key: tuple[Any, ...],
) -> dict[str, Any]:
    """Fold ``new`` into ``old``; ``*_key`` are the :func:`latest_key` tuples of each latest point."""
    if old is None:
        return dict(new)
    merged = dict(old)
    merged["count"] = int(old["count"]) + int(new["count"])
    merged["finite_count"] = int(old["finite_count"]) + int(new["finite_count"])
    merged["non_finite_count"] = int(old["non_finite_count"]) + int(new["non_finite_count"])
    merged["min_step"] = _min(old.get("min_step"), new.get("min_step"))
    merged["max_step"] = _max(old.get("max_step"), new.get("max_step"))
    merged["min_value"] = _min(old.get("min_value"), new.get("min_value"))
    merged["max_value"] = _max(old.get("max_value"), new.get("max_value"))
    new_has = int(new.get("finite_count") or 0) > 0
    old_has = int(old.get("finite_count") or 0) > 0
    if new_has and (not old_has or old_key is None or new_key > old_key):
        for field in ("latest_step", "latest_wall_time", "latest_value", "latest_file_id", "_ordinal"):
            if field in new:
                merged[field] = new[field]
    return merged


def naive(points: list[tuple[str, int | None, int | None, float]]) -> dict[str, dict[str, Any]]:
    """Reference implementation over ``(metric, step, wall_us, value)`` in write order (tests use it)."""
    out: dict[str, dict[str, Any]] = {}
    for name, step, wall, value in points:
        s = out.setdefault(name, {"count": 0, "finite_count": 0, "non_finite_count": 0, "min_step": None,
                                  "max_step": None, "min_value": None, "max_value": None, "latest_step": None,
                                  "latest_wall_time": None, "latest_value": None, "_k": None})
        s["count"] += 1
        if step is not None:
            s["min_step"] = _min(s["min_step"], step)
            s["max_step"] = _max(s["max_step"], step)
        if not math.isfinite(value):
            s["non_finite_count"] += 1
            continue
        s["finite_count"] += 1
        s["min_value"] = _min(s["min_value"], value)
        s["max_value"] = _max(s["max_value"], value)
        key = (step is not None, step or 0, wall is not None, wall or 0)
        if s["_k"] is None or key >= s["_k"]:
            s["_k"] = key
            s["latest_step"], s["latest_wall_time"], s["latest_value"] = step, wall, value
    for s in out.values():
        s.pop("_k")
    return out


def fold_file_summaries(
    conn: Any,
    *,
    run_id: str,
    project: str | None,
    run_group_id: str | None,
    file_id: str,
    created_at: str,
    summaries: dict[str, dict[str, Any]],
    summarized_at: str | None = None,
) -> None:
    """Merge one metric file's summaries into ``metric_summaries`` and mark the file summarized.

    Runs inside the caller's transaction.
    """
    from .schema import TABLES

    cols = [c for c, _ in TABLES["metric_summaries"]]
    for name, s in summaries.items():
        cur = conn.execute(
            "SELECT s.*, f.created_at AS file_created_at FROM metric_summaries s LEFT JOIN metric_files f "
            "ON f.file_id = s.latest_file_id WHERE s.run_id = ? AND s.metric_name = ?", [run_id, name])
        found = cur.fetchone()
        old = {d[0]: found[i] for i, d in enumerate(cur.description)} if found else None
        new = {**s, "latest_file_id": file_id if s["finite_count"] else None}
        old_key = latest_key(old, old.get("file_created_at") or "", old.get("latest_file_id") or "") if old else None
        merged = merge(old, new, old_key=old_key, new_key=latest_key(new, created_at, file_id))
        merged.update(run_id=run_id, metric_name=name, project=project, run_group_id=run_group_id,
                      updated_at=max(created_at, (old or {}).get("updated_at") or ""))
        conn.execute(
            f"INSERT OR REPLACE INTO metric_summaries ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [merged.get(c) for c in cols],
        )
    conn.execute("INSERT INTO metric_summary_files(file_id, run_id, summarized_at) VALUES (?, ?, ?)",
                 [file_id, run_id, summarized_at or created_at])
