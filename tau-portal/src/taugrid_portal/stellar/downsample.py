"""Deterministic display downsampling for Stellar charts (min/max per step bucket).

The raw history stays in the store; these functions only choose which points a chart draws.

Algorithm ``minmax`` for one series and a budget of ``B`` points:

1. Drop rows without a step and rows whose value is not finite (they are counted, not drawn).
   When a step repeats, the last row for that step wins.
2. If the series has at most ``B`` points, keep all of them (``algorithm = "none"``).
3. ``B == 1`` keeps the last point; ``B`` of 2 or 3 keeps the first and the last point.
4. Otherwise keep the first and the last point, split the step range ``[first, last]`` into
   ``K`` equal-width buckets, ``K`` the largest power of two not above ``(B - 2) // 2``, and
   keep, per bucket, the point with the smallest value and the point with the largest value
   (ties go to the smaller step).  A step's bucket is ``(step - first) * K // (last - first + 1)``.

Power-of-two bucket counts nest: bucket ``b`` at ``K`` buckets is exactly the union of buckets
``2b`` and ``2b + 1`` at ``2K``.  That is what lets the store precompute each imported series
once per level at import time (``metric_display``) and serve the same points without reading
the raw history (see :func:`taugrid_portal.store.display.display_levels`).

The result is sorted by step, never exceeds ``B`` points, always contains the global minimum
and maximum, and depends only on the input — the same store gives the same page.

:func:`downsample_points` is the plain-Python form (used for single series and as the
reference in tests); :func:`downsample_frame` is the vectorised polars form that the snapshot
builder uses for many series at once. Both produce identical points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

ALGORITHM = "minmax"
DEFAULT_MAX_POINTS = 1200  # 800 px chart at 1.5 samples per px
MAX_POINTS_LIMIT = 12000
DISPLAY_SIG_FIGS = 6


@dataclass(frozen=True)
class Sampled:
    steps: list[int]
    values: list[float]
    source_points: int
    non_finite_points: int
    finite_points: int

    @property
    def rendered_points(self) -> int:
        return len(self.steps)

    @property
    def decimated(self) -> bool:
        return self.rendered_points < self.finite_points


def bucket_count(budget: int) -> int:
    """Buckets for a budget of ``budget >= 4`` points: the largest power of two <= (budget - 2) // 2."""
    half = (budget - 2) // 2
    return 1 << (half.bit_length() - 1) if half >= 1 else 1


def bucket_of(step: int, first: int, last: int, buckets: int) -> int:
    return (step - first) * buckets // (last - first + 1)


def downsample_points(steps: Sequence[int | None], values: Sequence[float | None], budget: int) -> Sampled:
    """Downsample one series given as parallel ``steps`` / ``values`` sequences (input order)."""
    if budget < 1:
        raise ValueError("max points must be at least 1")
    source = len(steps)
    non_finite = 0
    latest: dict[int, float] = {}
    for step, value in zip(steps, values, strict=True):
        if step is None:
            continue
        if value is None or not math.isfinite(value):
            non_finite += 1
            continue
        latest[int(step)] = float(value)
    ordered = sorted(latest.items())
    if len(ordered) <= budget:
        kept = ordered
    elif budget == 1:
        kept = ordered[-1:]
    elif budget < 4:
        kept = [ordered[0], ordered[-1]]
    else:
        first, last = ordered[0][0], ordered[-1][0]
        buckets = bucket_count(budget)
        lows: dict[int, tuple[int, float]] = {}
        highs: dict[int, tuple[int, float]] = {}
        for step, value in ordered:
            b = bucket_of(step, first, last, buckets)
            lo = lows.get(b)
            if lo is None or value < lo[1]:
                lows[b] = (step, value)
            hi = highs.get(b)
            if hi is None or value > hi[1]:
                highs[b] = (step, value)
        chosen = {first, last} | {s for s, _ in lows.values()} | {s for s, _ in highs.values()}
        kept = [(s, latest[s]) for s in sorted(chosen)]
    return Sampled(
        steps=[s for s, _ in kept],
        values=[v for _, v in kept],
        source_points=source,
        non_finite_points=non_finite,
        finite_points=len(ordered),
    )


def downsample_frame(frame: pl.DataFrame | pl.LazyFrame, budget: int, by: Sequence[str] = ("run_id",)) -> pl.DataFrame:
    """Downsample every series of ``frame`` (columns ``*by, step, value``; row order = write order).

    Returns one row per series, sorted by ``by``: ``*by, steps (list[i64]), values (list[f64]),
    source_points, non_finite_points, finite_points`` (``finite_points`` counts distinct finite
    steps). The work is two grouped passes over the input and no full sort, because a dashboard
    over 100 runs x 10 metrics x 10k steps reads ten million points.
    """
    import polars as pl

    if budget < 1:
        raise ValueError("max points must be at least 1")
    keys = list(by)
    data = frame.lazy().select([*keys, pl.col("step").cast(pl.Int64), pl.col("value").cast(pl.Float64)]).collect()
    stats, finite = _finite_points(data, keys)
    per = finite.group_by(keys).agg(
        pl.len().alias("finite_points"),
        pl.col("step").min().alias("_first"),
        pl.col("step").max().alias("_last"),
    )
    kept = _kept_points(_bucket_extremes(finite, per, keys, budget), keys, budget)
    series = kept.group_by(keys, maintain_order=True).agg(
        pl.col("step").alias("steps"), pl.col("value").alias("values")
    )
    out = (
        stats.select([*keys, "source_points", "non_finite_points"])
        .join(series, on=keys, how="left")
        .join(per.select([*keys, "finite_points"]), on=keys, how="left")
        .with_columns(
            pl.col("steps").fill_null(pl.lit([], dtype=pl.List(pl.Int64))),
            pl.col("values").fill_null(pl.lit([], dtype=pl.List(pl.Float64))),
            pl.col("finite_points").fill_null(0).cast(pl.Int64),
            pl.col("source_points").cast(pl.Int64),
            pl.col("non_finite_points").cast(pl.Int64),
        )
    )
    return out.sort(keys)


def _finite_points(data: pl.DataFrame, keys: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(stats, finite)``: each series' point counts, and its finite points by ascending unique step
    (the last write of a repeated step wins)."""
    import polars as pl

    finite_mask = pl.col("step").is_not_null() & pl.col("value").is_finite().fill_null(False)
    stats = data.group_by(keys).agg(
        pl.len().alias("source_points"),
        (pl.col("step").is_not_null() & ~pl.col("value").is_finite().fill_null(False)).sum().alias("non_finite_points"),
        pl.col("step").filter(finite_mask).diff().min().alias("_min_gap"),
        finite_mask.sum().alias("_rows"),
    )
    finite = data.filter(finite_mask)
    # A series whose finite steps strictly increase in write order needs no sort and no dedup
    # (the normal case); any other series goes through the sort-and-dedup path first.
    messy_keys = stats.filter(pl.col("_min_gap") <= 0).select(keys)
    if messy_keys.height:
        messy = (
            finite.join(messy_keys, on=keys, how="semi", maintain_order="left")
            .with_row_index("_order")
            .sort([*keys, "step", "_order"])
            .unique(subset=[*keys, "step"], keep="last", maintain_order=True)
            .drop("_order")
        )
        finite = pl.concat([finite.join(messy_keys, on=keys, how="anti", maintain_order="left"), messy])
    return stats, finite


def _bucket_extremes(finite: pl.DataFrame, per: pl.DataFrame, keys: list[str], budget: int) -> pl.DataFrame:
    """One row per (series, bucket): the bucket's lowest, highest, first and last points."""
    import polars as pl

    buckets = bucket_count(budget)
    # Every point of a series within budget is its own bucket, so one grouped pass serves both.
    bucket = (
        pl.when(pl.col("finite_points") <= budget)
        .then(pl.col("step") - pl.col("_first"))
        .when(budget < 4)
        .then(pl.lit(0, dtype=pl.Int64))
        .otherwise((pl.col("step") - pl.col("_first")) * buckets // (pl.col("_last") - pl.col("_first") + 1))
    )
    # group_by keeps each group's rows in input order (ascending step), so arg_min / arg_max
    # pick the smallest step on ties, like the reference implementation.
    extremes = (
        finite.lazy()
        .join(per.lazy(), on=keys, how="inner", maintain_order="left")
        .with_columns(bucket.alias("_b"))
        .group_by([*keys, "_b"])
        .agg(
            pl.col("step").get(pl.col("value").arg_min()).alias("_lo"),
            pl.col("value").min().alias("_lov"),
            pl.col("step").get(pl.col("value").arg_max()).alias("_hi"),
            pl.col("value").max().alias("_hiv"),
            pl.col("step").first().alias("_s0"),
            pl.col("value").first().alias("_v0"),
            pl.col("step").last().alias("_s1"),
            pl.col("value").last().alias("_v1"),
            pl.col("_first").first(),
            pl.col("_last").first(),
            pl.col("finite_points").first(),
        )
        .collect()
    )
    return extremes


def _kept_points(extremes: pl.DataFrame, keys: list[str], budget: int) -> pl.DataFrame:
    """The points a series keeps (``*keys, step, value`` by step): each bucket's extremes, and the
    series' first (budget > 1) and last points."""
    import polars as pl

    lowhigh = extremes.filter(pl.lit(budget >= 4) | (pl.col("finite_points") <= budget))
    parts = [
        lowhigh.select([*keys, pl.col("_lo").alias("step"), pl.col("_lov").alias("value")]),
        lowhigh.select([*keys, pl.col("_hi").alias("step"), pl.col("_hiv").alias("value")]),
        extremes.filter(pl.col("_s1") == pl.col("_last")).select(
            [*keys, pl.col("_s1").alias("step"), pl.col("_v1").alias("value")]
        ),
    ]
    if budget > 1:
        parts.append(
            extremes.filter(pl.col("_s0") == pl.col("_first")).select(
                [*keys, pl.col("_s0").alias("step"), pl.col("_v0").alias("value")]
            )
        )
    return pl.concat(parts).unique(subset=[*keys, "step"]).sort([*keys, "step"])


_KEYS = ["run_id", "metric_name"]


def out_schema() -> dict[str, Any]:
    import polars as pl

    return {"run_id": pl.String, "metric_name": pl.String, "steps": pl.List(pl.Int64),
            "values": pl.List(pl.Float64), "finite_points": pl.Int64}


def _segments(data: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Number the contiguous blocks of one series (``_seg``) and describe each block.

    ``run_id`` and ``metric_name`` are categorical, so block boundaries come from integer codes;
    the block table is built from run lengths and gathers, without a group-by over the rows.
    """
    import polars as pl

    pair = pl.struct(pl.col("run_id").to_physical().alias("r"), pl.col("metric_name").to_physical().alias("m"))
    data = data.with_columns(pair.rle_id().set_sorted().alias("_seg"))
    lengths = data.select(pair.rle().struct.field("len").cast(pl.Int64)).to_series()
    starts = lengths.cum_sum() - lengths
    ends = starts + lengths - 1
    step = data["step"]
    segs = pl.DataFrame({
        "_seg": pl.int_range(len(lengths), dtype=pl.UInt32, eager=True),
        "run_id": data["run_id"].gather(starts),
        "metric_name": data["metric_name"].gather(starts),
        "_first": step.gather(starts),
        "_last": step.gather(ends),
        "_n": lengths,
        "_start": starts,
    })
    # A block whose steps do not strictly increase (a repeated or earlier step) needs sorting.
    # Steps drop at most block starts, so only the few non-increasing rows are inspected.
    drops = data.select((pl.col("step").diff() <= 0).arg_true()).to_series()
    inner = drops.filter(~drops.is_in(starts.implode()))
    unordered = data["_seg"].gather(inner).unique()
    segs = segs.with_columns(pl.col("_seg").is_in(unordered.implode()).alias("_unordered"))
    return data, segs


def downsample_runs(frame: pl.DataFrame, budget: int, run_of: dict[str, str] | None = None) -> pl.DataFrame:
    """Downsample every ``(run_id, metric_name)`` series of a frame read straight from metric files.

    ``frame`` has ``run_id, metric_name, step, value`` in file order. The result equals
    :func:`downsample_frame` with ``by=("run_id", "metric_name")`` (``run_id, metric_name, steps,
    values, finite_points``), but is built for the usual layout of a metric file — each series one
    contiguous block of strictly increasing steps — where every grouping runs over sorted slices
    instead of hash tables. Series that do not fit that layout take the general path.

    With ``run_of``, the ``run_id`` column holds a source key (the metric file) and ``run_of``
    maps each source to its run; a run's series may then span several files.
    """
    import polars as pl

    if budget < 1:
        raise ValueError("max points must be at least 1")
    schema = out_schema()
    data = frame.select(
        pl.col("run_id").cast(pl.Categorical), pl.col("metric_name").cast(pl.Categorical),
        pl.col("step").cast(pl.Int64), pl.col("value").cast(pl.Float64),
    )
    # Copy the frame only when there is something to drop (null steps, NaN/Inf, null values).
    if data["step"].null_count() or data["value"].null_count() or not data["value"].is_finite().all():
        data = data.filter(pl.col("step").is_not_null() & pl.col("value").is_finite().fill_null(False))
    if data.height == 0:
        return pl.DataFrame(schema=schema)
    def run_name(column: pl.Expr) -> pl.Expr:
        column = column.cast(pl.String)
        return column.replace_strict(run_of, return_dtype=pl.String) if run_of is not None else column

    data, segs = _segments(data)
    segs = segs.with_columns(run_name(pl.col("run_id")))
    bad = segs["_unordered"] | segs.select(pl.len().over(_KEYS) > 1).to_series()
    parts = []
    if bad.any():
        row_bad = pl.lit(bad).gather(pl.col("_seg"))
        slow = data.filter(row_bad).select(run_name(pl.col("run_id")), pl.col("metric_name").cast(pl.String),
                                           "step", "value")
        parts.append(downsample_frame(slow, budget, by=_KEYS).select(list(schema)))
        data = data.filter(~row_bad).drop("_seg")  # filter keeps row order
        if data.height == 0:
            return pl.concat(parts).sort(_KEYS)
        data, segs = _segments(data)
        segs = segs.with_columns(run_name(pl.col("run_id")))
    picks = _picked_rows(data, segs, budget)
    picked = data.select("_seg", "step", "value")[picks.unique().sort()]
    series = picked.group_by("_seg", maintain_order=True).agg(
        pl.col("step").alias("steps"), pl.col("value").alias("values")
    )
    meta = segs.select("_seg", *(pl.col(k).cast(pl.String) for k in _KEYS), pl.col("_n").alias("finite_points"))
    parts.append(meta.join(series, on="_seg", how="left").select(list(schema)))
    return pl.concat(parts).sort(_KEYS)


def _picked_rows(data: pl.DataFrame, segs: pl.DataFrame, budget: int) -> pl.Series:
    """Row indexes (of ``data``, possibly repeated) of the points the ordered blocks ``segs`` keep:
    every point of a block within budget; otherwise each step bucket's extremes and the block's ends."""
    import polars as pl

    starts = segs["_start"]
    ends = segs["_start"] + segs["_n"] - 1
    if budget < 4:
        small = segs.filter(pl.col("_n") <= budget)
        every = small.select(pl.int_ranges(pl.col("_start"), pl.col("_start") + pl.col("_n"))).to_series().explode()
        big = segs["_n"] > budget
        picks = pl.concat([every.cast(pl.Int64), ends.filter(big)] + ([starts.filter(big)] if budget > 1 else []))
    else:
        buckets = bucket_count(budget)
        width = max(buckets, budget) + 1
        seg = pl.col("_seg")
        first = pl.lit(segs["_first"]).gather(seg)
        by_step = (pl.col("step") - first) * buckets // (pl.lit(segs["_last"]).gather(seg) - first + 1)
        within = segs["_n"] <= budget
        # Within-budget series keep every point (one bucket per row); the rest bucket by step.
        if not within.any():
            bucket = by_step
        else:
            bucket = (
                pl.when(pl.lit(within).gather(seg))
                .then(pl.int_range(pl.len(), dtype=pl.Int64) - pl.lit(segs["_start"]).gather(seg))
                .otherwise(by_step)
            )
        keyed = data.lazy().select(
            (seg.cast(pl.Int64) * width + bucket).set_sorted().alias("_key"), "value"
        ).collect()
        # Groups are contiguous slices in step order: arg_min / arg_max pick the smallest step on ties.
        grouped = keyed.group_by("_key", maintain_order=True).agg(
            pl.col("value").arg_min().alias("_amin"), pl.col("value").arg_max().alias("_amax"),
            pl.len().cast(pl.Int64).alias("_gn"),
        )
        offset = grouped["_gn"].cum_sum() - grouped["_gn"]
        picks = pl.concat([offset + grouped["_amin"].cast(pl.Int64), offset + grouped["_amax"].cast(pl.Int64),
                           starts, ends])
    return picks


def display_value(value: float) -> float:
    """Round to the precision a chart can show (the store keeps full precision)."""
    if value == 0 or not math.isfinite(value):
        return value
    return float(f"{value:.{DISPLAY_SIG_FIGS}g}")
