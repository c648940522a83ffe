"""Incremental per-(run, metric) summaries agree with a naive recomputation over every stored point."""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taugrid_portal.store import ExperimentStore
from taugrid_portal.store.summaries import naive
from taugrid_portal.store.writes import write_records

value = st.one_of(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), st.just(math.nan), st.just(math.inf),
    st.just(-math.inf), st.integers(-5, 5).map(float),
)
point = st.tuples(
    st.sampled_from(["r1", "r2"]), st.sampled_from(["loss", "acc"]), st.one_of(st.none(), st.integers(0, 6)),
    st.one_of(st.none(), st.integers(1, 4)), value,
)
batches = st.lists(st.lists(point, min_size=1, max_size=8), min_size=1, max_size=5)


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return a == pytest.approx(b, rel=1e-12, abs=0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=batches)
def test_incremental_summaries_match_naive_recomputation(tmp_path_factory, batches):
    root = tmp_path_factory.mktemp("s") / "store"
    store, _ = ExperimentStore.init(root, project="demo")
    written: list[tuple[str, str, int | None, int | None, float]] = []
    for i, batch in enumerate(batches):
        records = [{"run_id": r, "metric_name": m, "step": s, "wall_time": w,
                    "value": v, "tags": {"batch": str(i)}} for r, m, s, w, v in batch]
        write_records(store, records, source="prop")
        # a file per run per batch, in write order
        for run in sorted({r for r, *_ in batch}):
            written.extend((r, m, s, w * 1_000_000 if w else None, v) for r, m, s, w, v in batch if r == run)
    got = {(s["run_id"], s["metric_name"]): s for s in store.summaries()}
    expected = {}
    for run in ("r1", "r2"):
        for name, summary in naive([(m, s, w, v) for r, m, s, w, v in written if r == run]).items():
            expected[(run, name)] = summary
    assert set(got) == set(expected)
    for key, exp in expected.items():
        g = got[key]
        for field in ("count", "finite_count", "non_finite_count", "min_step", "max_step", "latest_step",
                      "latest_wall_time"):
            assert g[field] == exp[field], (key, field, g, exp)
        for field in ("latest_value", "min_value", "max_value"):
            assert _same(g[field], exp[field]), (key, field, g, exp)
    # and the summaries agree with the raw Parquet history the read API returns
    for (run, name), exp in expected.items():
        series = store.series([run], name)
        assert series.height == exp["count"]
        assert series.filter(pl.col("value").is_finite()).height == exp["finite_count"]
    store.close()


def test_repeated_sink_batch_is_counted_once(store):
    recs = [{"run_id": "r1", "metric_name": "loss", "step": i, "value": 1.0 / (i + 1)} for i in range(10)]
    first = write_records(store, recs)
    again = write_records(store, recs)
    assert (len(first["files"]), again["reused"]) == (1, 1)
    [s] = store.summaries(["r1"])
    assert s["count"] == 10 and s["latest_value"] == pytest.approx(0.1)
