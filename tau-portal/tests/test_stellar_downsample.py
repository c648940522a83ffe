"""Deterministic display downsampling (min/max per step bucket)."""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taugrid_portal.stellar.downsample import downsample_frame, downsample_points, downsample_runs

values = st.one_of(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 0.0, 1.0]),
)
series = st.lists(st.tuples(st.integers(min_value=0, max_value=400), values), max_size=300)


def _frame(runs: dict[str, list[tuple[int, float]]]) -> pl.DataFrame:
    rows = [(rid, s, v) for rid, pts in runs.items() for s, v in pts]
    return pl.DataFrame(rows, schema={"run_id": pl.String, "step": pl.Int64, "value": pl.Float64}, orient="row")


@settings(max_examples=60, deadline=None)
@given(a=series, b=series, budget=st.integers(min_value=1, max_value=80))
def test_frame_matches_reference_and_keeps_extremes(a: list, b: list, budget: int) -> None:
    runs = {"run-a": a, "run-b": b}
    out = {r["run_id"]: r for r in downsample_frame(_frame(runs), budget).iter_rows(named=True)}
    for rid, pts in runs.items():
        if not pts:
            assert rid not in out
            continue
        ref = downsample_points([s for s, _ in pts], [v for _, v in pts], budget)
        row = out[rid]
        assert row["steps"] == ref.steps
        assert row["values"] == ref.values
        assert row["source_points"] == len(pts) == ref.source_points
        assert row["non_finite_points"] == ref.non_finite_points == sum(not math.isfinite(v) for _, v in pts)
        assert row["finite_points"] == ref.finite_points
        assert len(ref.steps) <= budget
        assert ref.steps == sorted(set(ref.steps))
        finite = {s: v for s, v in pts if math.isfinite(v)}  # last write per step wins
        if finite and budget >= 4:
            assert min(finite.values()) in ref.values and max(finite.values()) in ref.values
            assert ref.steps[0] == min(finite) and ref.steps[-1] == max(finite)
        if finite and budget == 1:
            assert ref.steps == [max(finite)]


file_rows = st.lists(
    st.tuples(st.sampled_from(["run-a", "run-b"]), st.sampled_from(["loss", "acc"]),
              st.integers(min_value=0, max_value=60), values),
    max_size=200,
)


@settings(max_examples=60, deadline=None)
@given(rows=file_rows, budget=st.integers(min_value=1, max_value=30), contiguous=st.booleans())
def test_file_layout_fast_path_matches_general_path(rows: list, budget: int, contiguous: bool) -> None:
    if contiguous:  # the usual metric-file layout: one block per series, steps increasing
        rows = sorted({(r, m, s): v for r, m, s, v in rows}.items())
        rows = [(r, m, s, v) for (r, m, s), v in rows]
    frame = pl.DataFrame(rows, schema={"run_id": pl.String, "metric_name": pl.String, "step": pl.Int64,
                                       "value": pl.Float64}, orient="row")
    fast = downsample_runs(frame, budget)
    general = downsample_frame(frame, budget, by=("run_id", "metric_name"))
    general = general.filter(pl.col("finite_points") > 0).select(fast.columns)
    assert fast.to_dicts() == general.to_dicts()


def test_large_series_is_reduced_deterministically() -> None:
    steps = list(range(100_000))
    vals = [math.sin(s / 300.0) + (5.0 if s == 77_777 else 0.0) for s in steps]
    first = downsample_points(steps, vals, 1000)
    again = downsample_points(list(steps), list(vals), 1000)
    assert first == again
    assert first.rendered_points <= 1000 and first.decimated
    assert 77_777 in first.steps  # a spike survives
    frame = pl.DataFrame({"run_id": ["r"] * len(steps), "step": steps, "value": vals})
    row = downsample_frame(frame, 1000).row(0, named=True)
    assert row["steps"] == first.steps


def test_duplicate_steps_keep_the_last_write() -> None:
    ref = downsample_points([0, 1, 1, 2], [1.0, 2.0, 3.0, 4.0], 10)
    assert ref.steps == [0, 1, 2] and ref.values == [1.0, 3.0, 4.0]
    row = downsample_frame(_frame({"r": [(0, 1.0), (1, 2.0), (1, 3.0), (2, 4.0)]}), 10).row(0, named=True)
    assert row["values"] == [1.0, 3.0, 4.0]


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError):
        downsample_points([1], [1.0], 0)
