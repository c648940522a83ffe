"""Run search filters, lifecycle gates and experiment search."""

from __future__ import annotations

import math
import sqlite3

import pytest

from tau_core.errors import UsageError
from taugrid_portal.store.lifecycle import classify, parse_metric_filter
from taugrid_portal.store.search import search_experiments, search_runs
from taugrid_portal.store.writes import import_jsonl, record_run, write_records


@pytest.fixture
def populated(store, write_history, tmp_path):
    # loss falls to 1/steps: 10 steps -> 0.1, 3 steps -> 0.333
    import_jsonl(store, run="good", history=[str(write_history(tmp_path / "a.jsonl", steps=10))],
                 experiment="vision", group="lr-high", tags={"dataset": "imagenet"})
    import_jsonl(store, run="short", history=[str(write_history(tmp_path / "b.jsonl", steps=3))],
                 experiment="vision", group="lr-low", tags={"dataset": "cifar", "tau.success.min_step": "5"})
    record_run(store, "crashed", group="lr-low", experiment="vision", state="failed", metrics={"loss": 0.2})
    record_run(store, "live", group="other", state="running", metrics={"loss": 0.9}, owner="alice")
    write_records(store, [{"run_id": "nanny", "metric_name": "loss", "step": 1, "value": math.nan},
                          {"run_id": "nanny", "metric_name": "loss", "step": 2, "value": 0.05}])
    conn = sqlite3.connect(store.root / "index.sqlite")
    conn.execute("UPDATE runs SET state = 'succeeded', completed_at = created_at WHERE run_id = 'nanny'")
    conn.execute("UPDATE runs SET created_at = '2020-01-01T00:00:00.000000Z' WHERE run_id = 'crashed'")
    conn.commit()
    record_run(store, "oomer", metrics={"oom_count": 2.0, "loss": 0.3})
    return store


def ids(doc):
    return sorted(r["run_id"] for r in doc["runs"])


def test_metric_filters(populated):
    assert ids(search_runs(populated, metric_filters=["loss@min<0.15"])) == ["good", "nanny"]
    assert ids(search_runs(populated, metric_filters=["loss<0.25"])) == ["crashed", "good", "nanny"]
    assert ids(search_runs(populated, metric_filters=["loss:max_step>=9"])) == ["good"]
    assert ids(search_runs(populated, metric_filters=["loss@non_finite_count>0"])) == ["nanny"]
    assert ids(search_runs(populated, metric_filters=["loss@count=3", "accuracy@latest>0.5"])) == ["short"]


def test_lifecycle_gates(populated):
    by_id = {r["run_id"]: r for r in search_runs(populated)["runs"]}
    assert by_id["good"]["lifecycle_state"] == "succeeded" and by_id["good"]["successful"]
    assert by_id["short"]["lifecycle_state"] == "incomplete"
    assert by_id["short"]["success_reasons"] == ["max step 2 is below required step 5"]
    assert by_id["nanny"]["success_reasons"] == ["loss has 1 non-finite values"]
    assert by_id["oomer"]["success_reasons"] == ["oom_count indicates failure with max value 2"]
    assert (by_id["crashed"]["lifecycle_state"], by_id["live"]["lifecycle_state"]) == ("failed", "running")
    assert ids(search_runs(populated, lifecycle="incomplete")) == ["nanny", "oomer", "short"]
    assert ids(search_runs(populated, lifecycle="success")) == ["good"]
    assert ids(search_runs(populated, lifecycle="succeeded", min_step=20)) == []


def test_text_tags_since_target_limit(populated):
    assert ids(search_runs(populated, q="ALICE")) == ["live"]
    assert ids(search_runs(populated, q="oom_")) == ["oomer"]
    assert ids(search_runs(populated, tags={"dataset": "cifar"})) == ["short"]
    assert "crashed" not in ids(search_runs(populated, since="30d"))
    assert "crashed" in ids(search_runs(populated, since="2019-06-01T00:00:00Z"))
    assert ids(search_runs(populated, target="lr-low")) == ["crashed", "short"]
    assert ids(search_runs(populated, target="vision", state="failed")) == ["crashed"]
    doc = search_runs(populated, limit=2)
    assert (doc["total"], len(doc["runs"]), doc["truncated"]) == (6, 2, True)
    assert doc["schema_version"] == "tau.exp.run_search.v0"
    assert {"name", "count", "finite_count", "latest_value"} <= set(doc["runs"][0]["metrics"][0])


def test_bad_filters_are_usage_errors(populated):
    with pytest.raises(UsageError, match="must contain one of"):
        parse_metric_filter("loss")
    with pytest.raises(UsageError, match="field must be latest, min, max"):
        parse_metric_filter("loss@median<1")
    with pytest.raises(UsageError, match="value must be finite"):
        parse_metric_filter("loss<inf")
    with pytest.raises(UsageError, match="since 'yesterday' must be RFC3339"):
        search_runs(populated, since="yesterday")


def test_experiment_search(populated):
    doc = search_experiments(populated)
    exps = {e["experiment_id"]: e for e in doc["experiments"]}
    assert exps["vision"]["runs"] == 3 and exps["vision"]["run_groups"] == 2
    assert exps["vision"]["lifecycle_counts"] == {"failed": 1, "incomplete": 1, "succeeded": 1}
    assert exps["other"]["source"] == "run_group"  # implicit experiment for unassigned runs
    assert [e["experiment_id"] for e in search_experiments(populated, q="imagenet")["experiments"]] == ["vision"]
    assert [e["experiment_id"] for e in search_experiments(populated, lifecycle="running")["experiments"]] == [
        "other"]


def test_classify_unknown_states():
    assert classify({"state": "queued"}, {}, [])[0] == "pending"
    assert classify({"state": "cancelled", "completed_at": "x"}, {}, [])[0] == "incomplete"
