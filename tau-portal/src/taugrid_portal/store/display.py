"""Display copies of imported series: the points a Stellar chart draws, computed at import time.

Stellar's min/max downsampling (:mod:`taugrid_portal.stellar.downsample`) splits a series'
step range into ``K`` buckets, ``K`` a power of two, and keeps the first point, the last point
and each bucket's minimum and maximum.  Power-of-two bucketings nest, so one pass over a new
metric file gives every level: the finest level is aggregated from the rows, each coarser level
from the one below it.

The ``metric_display`` table holds, per ``(file_id, metric_name, level)``, the kept points as
packed little-endian arrays (``point_steps`` int64, ``point_values`` float64) and ``points``, the series'
point count.  A level is stored only when the series has more than ``2 * level + 2`` points
(with fewer, every budget that uses the level keeps all points, which needs the raw history).

A copy is written only for a *clean* series: every row has a step, steps strictly increase in
file order and every value is finite, so the series' points are exactly its rows.  A copy
describes one file; readers use it only while that file is the run's only metric file (see
``ExperimentStore.display_series``), so a later write to the run makes the copy inert and
charts go back to the raw history.  The copy is derived data: deleting it loses nothing.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs

MAX_LEVEL = 512  # the default budget of 1,200 points per series uses 512 buckets


def levels() -> list[int]:
    """Stored bucket counts, finest first: 512, 256, ..., 1."""
    out, k = [], MAX_LEVEL
    while k >= 1:
        out.append(k)
        k //= 2
    return out


def pack_steps(values: list[int]) -> bytes:
    a = array("q", values)
    if a.itemsize != 8:  # pragma: no cover - every supported platform has 8-byte long long
        raise RuntimeError("int64 arrays are required")
    return _little(a).tobytes()


def pack_values(values: list[float]) -> bytes:
    return _little(array("d", values)).tobytes()


def unpack_steps(blob: bytes) -> list[int]:
    a = array("q")
    a.frombytes(blob)
    return _little(a).tolist()


def unpack_values(blob: bytes) -> list[float]:
    a = array("d")
    a.frombytes(blob)
    return _little(a).tolist()


def _little(a: array[Any]) -> array[Any]:
    import sys

    if sys.byteorder != "little":  # pragma: no cover - stored little-endian everywhere
        a.byteswap()
    return a


#: One chunk of a metric file: its metric names, then per point the name's code, step and value.
Chunk = tuple[list[str], Any, Any, Any]


def file_chunks(path: Path) -> Iterator[Chunk]:
    """A metric file's chunks (see :data:`Chunk`), one row group at a time."""
    import polars as pl
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path, read_dictionary=["metric_name"])
    for g in range(pf.num_row_groups):
        table = pf.read_row_group(g, columns=["metric_name", "step", "value"])
        codes = table.column("metric_name").combine_chunks()
        yield (codes.dictionary.to_pylist(), pl.Series(codes.indices), pl.Series(table.column("step").combine_chunks()),
               pl.Series(table.column("value").combine_chunks()))


@attrs.define
class _Scan:
    """Per candidate series: whether it is clean (one rising block per chunk), rows seen, first/last point."""

    n: int
    clean: list[bool] = attrs.field(init=False)
    rows_seen: list[int] = attrs.field(init=False)
    last_step: list[int | None] = attrs.field(init=False)
    ends: dict[int, list[tuple[int, float]]] = attrs.Factory(dict)

    def __attrs_post_init__(self) -> None:
        self.clean, self.rows_seen, self.last_step = [True] * self.n, [0] * self.n, [None] * self.n

    def chunk(self, frame: Any) -> None:
        """A clean series is one contiguous block per chunk with strictly rising steps."""
        import polars as pl

        runs = frame.select(pl.col("_m").rle()).unnest("_m")
        lengths = runs["len"].cast(pl.Int64)
        starts = lengths.cum_sum() - lengths
        step, value = frame["step"], frame["value"]
        bad = set(frame.select(pl.col("_m").filter(
            pl.col("step").is_null() | ((pl.col("step").diff() <= 0) & (pl.col("_m") == pl.col("_m").shift(1)))
        )).to_series().unique().to_list())
        seen_here: set[int] = set()
        for code, s0, v0, s1, v1, n in zip(runs["value"].to_list(), step.gather(starts).to_list(),
                                           value.gather(starts).to_list(), step.gather(starts + lengths - 1).to_list(),
                                           value.gather(starts + lengths - 1).to_list(), lengths.to_list(),
                                           strict=True):
            prev = self.last_step[code]
            if code in seen_here or code in bad or s0 is None or (prev is not None and s0 <= prev):
                self.clean[code] = False
            seen_here.add(code)
            self.rows_seen[code] += n
            self.last_step[code] = s1
            self.ends.setdefault(code, [(s0, v0)])
            self.ends[code][1:] = [(s1, v1)]


def _buckets(frame: Any, first: Any, span: Any) -> Any:
    """Each series' finest buckets with their minimum and maximum point."""
    import polars as pl

    fine = (pl.col("step") - pl.lit(first).gather(pl.col("_m"))) * MAX_LEVEL // pl.lit(span).gather(pl.col("_m"))
    keyed = frame.select((pl.col("_m").cast(pl.Int64) * (2 * MAX_LEVEL) + fine).alias("_k"), "step", "value")
    lo, hi = pl.col("value").arg_min(), pl.col("value").arg_max()
    return keyed.group_by("_k", maintain_order=True).agg(
        pl.col("step").get(lo).alias("_lo"), pl.col("value").get(lo).alias("_lov"),
        pl.col("step").get(hi).alias("_hi"), pl.col("value").get(hi).alias("_hiv"),
    ).select((pl.col("_k") // (2 * MAX_LEVEL)).cast(pl.Int32).alias("_m"),
             (pl.col("_k") % (2 * MAX_LEVEL)).alias("_b"), "_lo", "_lov", "_hi", "_hiv")


def _candidates(summaries: dict[str, dict[str, Any]]) -> list[str]:
    """Series worth a display copy: every value finite, a step range, enough points for the coarsest level."""
    return sorted(m for m, s in summaries.items()
                  if s.get("count") and s.get("finite_count") == s.get("count") and s.get("min_step") is not None
                  and s.get("max_step") is not None and int(s["count"]) > 4)


def display_levels(
    path: Path, summaries: dict[str, dict[str, Any]], chunks: Iterable[Chunk] | None = None,
) -> list[dict[str, Any]]:
    """Rows for ``metric_display`` from a finished metric file and its per-metric summaries.

    ``chunks`` are the file's rows as written, in order (:data:`Chunk`), when the writer kept
    them; otherwise the file is read back one row group at a time (memory bounded by the row
    group).  Metric names stay integer codes: every grouping runs over integers.
    """
    import polars as pl

    names = _candidates(summaries)
    if not names:
        return []
    index = {m: i for i, m in enumerate(names)}
    first = pl.Series([int(summaries[m]["min_step"]) for m in names], dtype=pl.Int64)
    span = pl.Series([int(summaries[m]["max_step"]) - int(summaries[m]["min_step"]) + 1 for m in names],
                     dtype=pl.Int64)
    scan, parts = _Scan(len(names)), []
    for metrics, codes, steps, values in (file_chunks(path) if chunks is None else chunks):
        lookup = pl.Series([index.get(str(v), -1) for v in metrics], dtype=pl.Int32)  # code -> candidate
        frame = pl.DataFrame({"_m": codes.cast(pl.Int32), "step": steps, "value": values}).select(
            pl.lit(lookup).gather(pl.col("_m")).alias("_m"), "step", "value").filter(pl.col("_m") >= 0)
        if frame.height:
            scan.chunk(frame)
            parts.append(_buckets(frame, first, span))
    good = [i for i, m in enumerate(names)
            if scan.clean[i] and scan.rows_seen[i] == int(summaries[m]["count"]) and i in scan.ends]
    if not good or not parts:
        return []
    return _levels(names, summaries, scan, _extremes(pl.concat(parts).filter(pl.col("_m").is_in(good))), good)


def _levels(names: list[str], summaries: dict[str, dict[str, Any]], scan: _Scan, level_frame: Any,
            good: list[int]) -> list[dict[str, Any]]:
    """Coarser levels by merging bucket pairs; each level's points are its buckets' extremes and the ends."""
    import polars as pl

    out: list[dict[str, Any]] = []
    for k in levels():
        if k != MAX_LEVEL:
            level_frame = _extremes(level_frame.with_columns(pl.col("_b") // 2))
        eligible = [i for i in good if int(summaries[names[i]]["count"]) > 2 * k + 2]
        if not eligible:
            continue
        per = (
            level_frame.filter(pl.col("_m").is_in(eligible))
            .group_by("_m").agg(pl.col("_lo"), pl.col("_lov"), pl.col("_hi"), pl.col("_hiv"))
        )
        for r in per.iter_rows(named=True):
            i = r["_m"]
            (s0, v0), (s1, v1) = scan.ends[i][0], scan.ends[i][-1]
            kept = {s0: v0, s1: v1}
            kept.update(zip(r["_lo"], r["_lov"], strict=True))
            kept.update(zip(r["_hi"], r["_hiv"], strict=True))
            steps = sorted(kept)
            out.append({"metric_name": names[i], "level": k, "points": int(summaries[names[i]]["count"]),
                        "point_steps": pack_steps(steps),
                        "point_values": pack_values([kept[s] for s in steps])})
    return sorted(out, key=lambda r: (r["metric_name"], -r["level"]))


def _extremes(frame: Any) -> Any:
    """Merge rows of ``_m, _b, _lo, _lov, _hi, _hiv`` (series, bucket, extremes) per bucket into
    the bucket's minimum and maximum point; ties go to the smaller step, as in the reference
    downsampler.

    The rows of one bucket must come in step order.  They do: a clean series' row groups and
    buckets follow its steps, and ``maintain_order`` keeps groups in order of first appearance.
    """
    import polars as pl

    lo, hi = pl.col("_lov").arg_min(), pl.col("_hiv").arg_max()
    return frame.group_by("_m", "_b", maintain_order=True).agg(
        pl.col("_lo").get(lo), pl.col("_lov").get(lo), pl.col("_hi").get(hi), pl.col("_hiv").get(hi),
    )
