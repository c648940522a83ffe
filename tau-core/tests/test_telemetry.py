"""tau_core.telemetry: the scalar record, the run-status encoding and the shared JSONL row parser."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import cattrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tau_core import telemetry
from tau_core.telemetry import JsonlFields, JsonlRowError, ScalarRecord, parse_jsonl_lines

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)
walls = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9000, 1, 1),
                     timezones=st.just(UTC))
records = st.builds(
    ScalarRecord, run_id=names, metric_name=names, value=st.floats(allow_nan=False),
    step=st.none() | st.integers(-(2**63) + 1, 2**63 - 1), wall_time=st.none() | walls, project=names,
    run_group_id=names, experiment_id=st.text(max_size=5), unit=st.none() | names, source=st.none() | names,
    split=st.none() | names, tags=st.dictionaries(names, names, max_size=4))


def _converter() -> cattrs.Converter:
    conv = cattrs.Converter()
    conv.register_unstructure_hook(datetime, lambda d: d.isoformat())
    conv.register_structure_hook(datetime, lambda v, _: datetime.fromisoformat(v))
    return conv


@settings(max_examples=150, deadline=None)
@given(records)
def test_scalar_record_round_trips_through_cattrs_and_json(record: ScalarRecord) -> None:
    conv = _converter()
    again = conv.structure(json.loads(json.dumps(conv.unstructure(record))), ScalarRecord)
    assert again == record


@settings(max_examples=150, deadline=None)
@given(records)
def test_a_record_as_a_dict_is_the_same_record(record: ScalarRecord) -> None:
    as_dict = cattrs.Converter().unstructure(record)
    assert telemetry.to_record(as_dict) == telemetry.to_record(record) == record


@settings(max_examples=100, deadline=None)
@given(walls)
def test_wall_time_microseconds_are_exact(wall: datetime) -> None:
    record = ScalarRecord(run_id="r", metric_name="m", value=1.0, wall_time=wall)
    assert record.wall_time_us is not None
    assert telemetry.from_us(record.wall_time_us) == wall


@pytest.mark.parametrize("state", ["succeeded", "failed", "cancelled"])
def test_the_run_status_encoding_round_trips(state: str) -> None:
    marker = telemetry.status_record(run_id="r", project="p", run_group_id="g", experiment_id="", state=state,
                                     completed_at=datetime(2026, 1, 1, tzinfo=UTC), source="s")
    assert marker.metric_name == "tau/run_status" and marker.step == 0
    assert telemetry.state_of_marker(marker.value) == state and marker.tags["tau.status.state"] == state
    assert telemetry.state_of_marker(0.5) is None


def test_a_dict_missing_fields_is_named() -> None:
    with pytest.raises(ValueError, match="missing run_id, value"):
        telemetry.to_record({"metric_name": "loss"})


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
rows = st.lists(st.tuples(st.integers(0, 10**12), st.floats(1.0, 4e9), st.dictionaries(
    st.sampled_from(["loss", "acc", "lr", "a/b"]), finite | st.integers(-(10**15), 10**15), max_size=4)),
    max_size=20)


@settings(max_examples=150, deadline=None)
@given(rows)
def test_jsonl_rows_round_trip_through_the_parser(data: list[tuple[int, float, dict[str, float]]]) -> None:
    text = "".join(json.dumps({"_step": s, "_timestamp": ts, "note": "x", **m}) + "\n" for s, ts, m in data)
    cols = parse_jsonl_lines(text.encode(), JsonlFields(require_time=True))
    expected = [(k, s, round(ts * 1_000_000), float(v)) for s, ts, m in data for k, v in m.items()]
    assert list(zip(cols.metric_name, cols.step, cols.wall_time_us, cols.value, strict=True)) == expected
    assert all(telemetry.from_us(w) for w in cols.wall_time_us)


@pytest.mark.parametrize(("text", "line", "message"), [
    (b'{"_step": 0}\n\n{"loss": 1}\n', 3, "missing required numeric _step field"),
    (b'{"_step": 0, "x": NaN}\n', 1, "metric 'x' must be a finite number"),
    (b'{"_step": 0, "x": 1}\n{"_step": 1', 2, "truncated last row"),
    (b'[1]\n', 1, "row must contain exactly one JSON object, got list"),
])
def test_bad_rows_name_their_line(text: bytes, line: int, message: str) -> None:
    with pytest.raises(JsonlRowError) as err:
        parse_jsonl_lines(text)
    assert err.value.line == line and message in err.value.message and str(err.value).startswith(f"line {line}:")


def test_nested_values_are_skipped_without_recursion() -> None:
    deep = b'{"_step": 1, "deep": ' + b"[" * 5000 + b"]" * 5000 + b', "loss": 0.5}\n'
    cols = parse_jsonl_lines(deep)
    assert cols.metric_name == ["loss"] and cols.wall_time_us == [None] and not math.isnan(cols.value[0])
    assert telemetry.from_us(0) == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(0)
