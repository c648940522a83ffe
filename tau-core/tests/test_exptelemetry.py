"""The Kusto column definitions, typed v1 events and generated KQL (tau_core.exptelemetry, tau_core.kql)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import attrs
import pytest

from tau_core.exptelemetry import (
    EVENT_COLUMNS,
    EVENT_IDENTITY,
    PROJECTION_COLUMNS,
    EventContext,
    batch_tag,
    is_identifier,
    kusto_time,
    ndjson,
    projection_row,
    to_event,
    validate_event,
)
from tau_core.kql import MetricsFilter, metrics_query, schema_commands
from tau_core.telemetry import ScalarRecord

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RECORD = ScalarRecord(run_id="r1", metric_name="loss", value=0.5, step=3, wall_time=T0, project="p",
                      run_group_id="g", experiment_id="e", tags={"team": "a", "run_id": "forged"})


def test_times_are_utc_with_microseconds() -> None:
    assert kusto_time(T0) == "2026-12-01T12:00:00.000000Z"
    assert kusto_time(datetime(2026, 12, 1, 14, 0, 0, 5, tzinfo=timezone(timedelta(hours=2)))) == \
        "2026-12-01T12:00:00.000005Z"
    assert kusto_time(datetime(2026, 12, 1, 12, 0)) == "2026-12-01T12:00:00.000000Z"  # naive means UTC


def test_event_ids_cover_identity_not_delivery() -> None:
    ctx = EventContext(workspace_id="w", cluster="c", namespace="n", metric_file_id="f")
    event = to_event(RECORD, ctx, T0)
    assert event.event_id == to_event(attrs.evolve(RECORD, tags={}), ctx, T0 + timedelta(days=1)).event_id
    for change in ({"workspace_id": "w2"}, {"metric_file_id": "f2"}):
        assert to_event(RECORD, attrs.evolve(ctx, **change), T0).event_id != event.event_id
    assert to_event(attrs.evolve(RECORD, step=4), ctx, T0).event_id != event.event_id
    assert "run_id" not in event.tags and event.tags == {"team": "a"}  # tags cannot override columns
    assert list(event.row()) == [c.name for c in EVENT_COLUMNS] and set(EVENT_IDENTITY) < set(event.row())
    validate_event(event)
    with pytest.raises(ValueError, match="event_id does not match"):
        validate_event(attrs.evolve(event, value=9.0, event_id="metric-0"))
    with pytest.raises(ValueError, match="value must be finite"):
        to_event(attrs.evolve(RECORD, value=math.inf), ctx, T0)
    with pytest.raises(ValueError, match="project is required"):
        to_event(attrs.evolve(RECORD, project=""), ctx, T0)


def test_projection_rows_batches_and_kql() -> None:
    event = to_event(RECORD, EventContext(workspace_id="w"), T0)
    row = projection_row(event)
    assert list(row) == [c.name for c in PROJECTION_COLUMNS] and row["tags"]["tau_workspace"] == "w"
    assert projection_row(event.row()) == row
    assert batch_tag(["b", "a"]) == batch_tag(["a", "b"]) != batch_tag(["a"])
    assert ndjson([{"a": 1}, {"b": "é"}]) == b'{"a":1}\n{"b":"\xc3\xa9"}\n'
    commands = schema_commands("typed")
    assert commands[0].startswith(".create-merge table TauExpMetricEventsV1 (schema_version:string, ")
    assert len(schema_commands("all")) > len(commands)
    query = metrics_query(MetricsFilter(project='p"x', runs=("r1",)))
    assert '| where project == "p\\"x"' in query and '| where run_id == "r1"' in query
    assert is_identifier("TauExpRunLifecycle") and not is_identifier("a-b") and not is_identifier("1a")
