"""The status tree as a frozen attrs model, converted with cattrs for `tau run status -o json`."""

from __future__ import annotations

import json
import subprocess
import sys

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tau_core.lifecycle.base import FailureReason, Phase, RunRef, RunStatus
from tau_core.status_tree import PhaseView, PodView, RetryView, StatusTree

text = st.text(max_size=12)
maybe_text = st.none() | text
seconds = st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False)
phase_views = st.builds(PhaseView, text, st.sampled_from(["pending", "active", "done", "warning", "skipped"]), text,
                        maybe_text, st.none() | seconds)
pod_views = st.builds(PodView, maybe_text, maybe_text, maybe_text, st.lists(maybe_text, max_size=3).map(tuple),
                      st.integers(0, 1000))
retry_views = st.builds(RetryView, st.sampled_from(["cli", "controller"]), st.integers(1, 20), st.integers(1, 20),
                        seconds)
profiles = st.none() | st.dictionaries(text, st.integers() | text, min_size=1, max_size=3)
trees = st.builds(
    StatusTree, name=text, namespace=maybe_text, context=maybe_text, workspace=maybe_text, kind=text, queue=maybe_text,
    terminal=st.booleans(), succeeded=st.booleans(), failure=st.none() | st.sampled_from([r.value for r in FailureReason]),
    failure_evidence=maybe_text, attempt=st.none() | st.integers(1, 20), max_retries=st.none() | st.integers(1, 20),
    retry=st.none() | retry_views, message=text, phases=st.lists(phase_views, max_size=5).map(tuple),
    pods=st.lists(pod_views, max_size=3).map(tuple), diagnostic_commands=st.lists(text, max_size=3).map(tuple),
    run_profile=profiles)


@settings(max_examples=200)
@given(trees)
def test_the_status_tree_round_trips_through_its_json_document(tree: StatusTree) -> None:
    text_form = json.dumps(tree.to_json(), indent=2)
    again = StatusTree.from_json(json.loads(text_form))
    assert again == tree
    assert json.dumps(again.to_json(), indent=2) == text_form  # one byte form per tree


@settings(max_examples=50)
@given(trees)
def test_the_document_uses_the_published_field_names(tree: StatusTree) -> None:
    doc = tree.to_json()
    expected = ["name", "namespace", "context", "workspace", "kind", "queue", "terminal", "succeeded", "failure",
                "failureEvidence", "attempt", "maxRetries", "retry", "message", "phases", "pods",
                "diagnosticCommands"] + (["runProfile"] if tree.run_profile is not None else [])
    assert list(doc) == expected
    for phase in doc["phases"]:
        assert list(phase) == ["name", "state", "detail", "hint", "elapsedSeconds"]
    if doc["retry"] is not None:
        assert list(doc["retry"]) == ["owner", "attempt", "max", "inSeconds"]


def test_the_model_is_frozen_and_built_from_a_run_status() -> None:
    status = RunStatus(RunRef("train", "kubernetes", "aurora", "ctx", "ws"), "Job",
                       [Phase("Submitted", "done", "batch/v1 Job created", elapsed_seconds=3.0)], True, False,
                       FailureReason.PREEMPTED, 1, 2, "failed (Preempted)",
                       {"queue": "q", "failure_evidence": "pod p: DisruptionTarget",
                        "retry_pending": {"owner": "controller", "attempt": 2, "max": 2, "inSeconds": 12.5},
                        "pods": [{"name": "p", "phase": "Failed", "node": "n1", "containers": ["main"], "restarts": 0}],
                        "diagnostic_commands": ["kubectl describe job train"]})
    tree = StatusTree.from_status(status)
    assert tree.retry == RetryView("controller", 2, 2, 12.5)
    assert tree.pods == (PodView("p", "Failed", "n1", ("main",), 0),)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        tree.name = "other"  # type: ignore[misc]
    doc = tree.to_json()
    assert doc["failure"] == "Preempted" and doc["maxRetries"] == 2 and "runProfile" not in doc
    assert doc["phases"][0]["elapsedSeconds"] == 3.0


def test_the_converter_is_built_lazily() -> None:
    code = "import sys, tau_core.status_tree; print('cattrs' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
