"""Import-time display copies: the same chart points as downsampling the raw history."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from taugrid_portal.stellar.downsample import bucket_count, downsample_points
from taugrid_portal.stellar.snapshot import build_snapshot
from taugrid_portal.store.display import display_levels, unpack_steps, unpack_values
from taugrid_portal.store.metricfile import MetricFileWriter
from taugrid_portal.store.writes import import_jsonl, record_run

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None)
@given(points=st.lists(st.tuples(st.integers(min_value=1, max_value=9),
                                  st.one_of(finite, st.sampled_from([0.0, -0.0, 1.0]))), min_size=5, max_size=400),
       start=st.integers(min_value=-50, max_value=50), chunk=st.integers(min_value=3, max_value=500))
def test_every_level_equals_the_reference_downsampler(tmp_path_factory, points, start, chunk) -> None:
    import polars as pl

    steps, vals, s = [], [], start
    for gap, value in points:
        steps.append(s)
        vals.append(value)
        s += gap
    path = tmp_path_factory.mktemp("d") / "f.parquet"
    writer = MetricFileWriter(path, project="p", run_group_id="g", run_id="r", source="t", keep_chunks=True)
    for i in range(0, len(steps), chunk):  # several row groups
        writer.write(pl.DataFrame({"metric_name": "m", "step": steps[i:i + chunk], "wall_time_us": None,
                                   "value": vals[i:i + chunk]},
                                  schema={"metric_name": pl.String, "step": pl.Int64, "wall_time_us": pl.Int64,
                                          "value": pl.Float64}), {})
    writer.close()
    from_file = display_levels(path, writer.summaries)
    assert display_levels(path, writer.summaries, writer.chunks) == from_file  # chunks kept in memory
    rows = {r["level"]: r for r in from_file}
    # every level, at both ends of the budgets that map to it ((2k + 2) .. (4k + 1) points)
    for budget in sorted({b for k in range(10) for b in (2 * (1 << k) + 2, 4 * (1 << k) + 1)}):
        level = bucket_count(budget)
        if len(steps) <= budget:
            continue
        ref = downsample_points(steps, vals, budget)
        got = rows[level]
        assert got["points"] == len(steps)
        assert unpack_steps(got["point_steps"]) == ref.steps
        assert [json.dumps(v) for v in unpack_values(got["point_values"])] == [json.dumps(v) for v in ref.values]
    assert all(len(steps) > 2 * k + 2 for k in rows)


def _history(path: Path, steps: int, offset: int = 0, dup: bool = False) -> Path:
    with path.open("w") as fh:
        for i in range(steps):
            row = {"_step": i // 2 if dup else i, "_timestamp": 1760000000.0 + i,
                   "loss": ((i * 7919 + offset) % 101) / 101.0, "acc": (i % 13) / 13.0}
            if i % 5 == 0:
                row["sparse"] = (i * 31 % 17) / 17.0
            fh.write(json.dumps(row) + "\n")
    return path


def _snapshots(store, budget):
    used = store.display_series(store.run_ids(), bucket_count(budget)) if budget >= 4 else {}
    fast = build_snapshot(store, "e", max_points=budget)
    original = store.display_series
    store.display_series = lambda *a, **k: {}
    try:
        raw = build_snapshot(store, "e", max_points=budget)
    finally:
        store.display_series = original
    for snap in (fast, raw):
        snap.pop("generated_at", None)
    return used, fast, raw


def test_snapshot_from_display_copies_equals_the_raw_path(store, tmp_path) -> None:
    for r, n in enumerate((40, 700, 3000)):
        import_jsonl(store, run=f"r{r}", history=[str(_history(tmp_path / f"r{r}.jsonl", n, offset=r))],
                     experiment="e", group=f"g{r % 2}")
    import_jsonl(store, run="dup", history=[str(_history(tmp_path / "dup.jsonl", 900, dup=True))], experiment="e")
    assert store.query("SELECT COUNT(*) AS n FROM metric_display WHERE run_id = 'dup' AND metric_name != 'sparse'") \
        == [{"n": 0}]  # repeated steps: not clean, no copy
    for budget in (1, 3, 10, 25, 64, 200, 1200, 5000):
        used, fast, raw = _snapshots(store, budget)
        assert fast == raw, budget
        if 10 <= budget <= 200:
            assert {rid for rid, _ in used} >= {"r1", "r2"}


def test_a_second_write_to_a_run_retires_its_display_copy(store, tmp_path) -> None:
    import_jsonl(store, run="r", history=[str(_history(tmp_path / "a.jsonl", 2000))], experiment="e")
    assert store.display_series(["r"], 64)
    # a later point for the same series (a new extreme beyond the imported range) must show up
    record_run(store, "r", experiment="e", metrics={"loss": 99.0}, step=5000)
    assert store.display_series(["r"], 64) == {}
    _used, fast, raw = _snapshots(store, 130)
    assert fast == raw
    [chart] = [c for c in fast["charts"] if c["metric_name"] == "loss"]
    [series] = chart["series"]
    assert series["steps"][-1] == 5000 and series["values"][-1] == 99.0
