"""The writer's typed rows: the run record round-trips through cattrs, JSON and SQLite unchanged."""

from __future__ import annotations

import json

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taugrid_portal.store import ExperimentStore
from taugrid_portal.store.records import RUN_ROW_COLUMNS, MetricPoint, RunRow, converter
from taugrid_portal.store.writing import ensure_identity, read_run

ids = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True)
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
opt = st.none() | text
run_rows = st.builds(
    RunRow, run_id=ids, project=ids, experiment_id=st.just("") | ids, run_group_id=ids, parent_run_id=st.none() | ids,
    state=st.sampled_from(["running", "succeeded", "failed", "cancelled"]), owner=opt, created_at=text,
    started_at=opt, completed_at=opt, config_hash=opt, code_sha=opt, image_digest=opt, tau_command=opt,
    result_uri=opt)


@settings(max_examples=150, deadline=None)
@given(run_rows)
def test_run_row_round_trips_through_cattrs_and_json(run: RunRow) -> None:
    row = json.loads(json.dumps(run.to_row()))
    assert list(row) == list(RUN_ROW_COLUMNS)  # table column order, as the append log mirrors it
    assert RunRow.from_row(row) == run == converter().structure(row, RunRow)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run=run_rows)
def test_run_row_round_trips_through_sqlite(tmp_path_factory, run: RunRow) -> None:
    store, _ = ExperimentStore.init(tmp_path_factory.mktemp("store"), project="p")
    with store.writing() as txn:
        assert ensure_identity(txn, run, {"k": "v"}, "2026-01-01T00:00:00.000000Z")
        assert read_run(txn, run.run_id) == run
        assert not ensure_identity(txn, run, {"k": "v"}, "2026-01-01T00:00:01.000000Z")  # the same run again
    assert store.run(run.run_id).to_dict()["state"] == run.state
    store.close()


@settings(max_examples=150, deadline=None)
@given(st.builds(MetricPoint, metric_name=text, step=st.none() | st.integers(-(2**63), 2**63 - 1),
                 wall_time_us=st.none() | st.integers(0, 2**62), value=st.floats()))
def test_metric_point_round_trips_through_cattrs(point: MetricPoint) -> None:
    again = converter().structure(json.loads(json.dumps(converter().unstructure(point))), MetricPoint)
    assert attrs.astuple(again)[:3] == attrs.astuple(point)[:3]
    assert repr(again.value) == repr(point.value)  # NaN and infinities survive, bit for bit in repr
