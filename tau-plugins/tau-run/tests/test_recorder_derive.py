"""The lifecycle recorder's derivation (tau_run.recorder.derive): states, pod enrichment, idempotent ids."""

from __future__ import annotations

from typing import Any

import pytest

from tau_core import keys
from tau_core.errors import UsageError
from tau_run.recorder.derive import Scope, observation_id, observe
from tau_run.recorder.health import parse_address

SCOPE = Scope("aks-1", "team-a", workspace_id="ws-default")
T0 = "2026-12-01T12:00:00Z"


def _job(status: dict[str, Any], *, suspend: bool = False, rv: str = "1", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "team-a", "uid": "u1", "resourceVersion": rv,
                         "creationTimestamp": T0, "labels": {keys.RUN_ID: "train-7f2c", keys.KUEUE_QUEUE_NAME: "jobqueue"}, **meta},
            "spec": {"suspend": suspend}, "status": status}


def _pod(state: dict[str, Any], name: str = "train-abcde") -> dict[str, Any]:
    return {"metadata": {"name": name, "ownerReferences": [{"uid": "u1"}], "labels": {}},
            "spec": {"containers": [{"name": "main", "env": [{"name": "TOKEN", "value": "s3cret"}]}]},
            "status": {"containerStatuses": [{"name": "main", "state": state}]}}


def test_job_states_and_the_submitted_receipt() -> None:
    queued = observe("Job", _job({}, suspend=True), [], [], SCOPE)
    assert [(r.state, r.reason) for r in queued] == [("submitted", "initial-observation"), ("queued", "suspended")]
    receipt = queued[0]
    assert receipt.run_id == "train-7f2c" and receipt.durable_id == "aks-1/team-a/u1"
    assert receipt.workspace_id == "ws-default" and receipt.experiment_tracking == "untracked"
    workload = {"metadata": {"ownerReferences": [{"uid": "u1"}]}, "spec": {"queueName": "jobqueue"},
                "status": {"admission": {"clusterQueue": "cq"}, "conditions": [
                    {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-12-01T12:00:05Z"}]}}
    admitted = observe("Job", _job({}, suspend=True), [workload], [], SCOPE)[1]
    assert (admitted.state, admitted.reason, admitted.cluster_queue) == ("admitted", "KueueAdmitted", "cq")
    running = observe("Job", _job({"active": 1, "startTime": "2026-12-01T12:00:06Z"}), [workload], [], SCOPE)
    assert running[1].state == "running" and running[1].observed_at == running[1].pod_start_time
    # the receipt is the same observation whatever happened since
    assert running[0].observation_id == receipt.observation_id
    deleting = observe("Job", _job({"active": 1}, deletionTimestamp="2026-12-01T12:01:00Z"), [], [], SCOPE)[1]
    assert (deleting.state, deleting.reason) == ("cancelled", "Deleting")


def test_failure_is_enriched_from_pod_status_only() -> None:
    failed = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                              "message": "Job has reached the specified backoff limit",
                              "lastTransitionTime": "2026-12-01T12:02:00Z"}]}
    pods = [_pod({"terminated": {"reason": "OOMKilled", "exitCode": 137}}),
            _pod({"waiting": {"reason": "ContainerCreating"}}, "train-zzzzz")]
    row = observe("Job", _job(failed), [], pods, SCOPE)[1]
    assert row.reason == "BackoffLimitExceeded/OOMKilled"
    assert row.message == ("pod train-abcde container main: OOMKilled (exit code 137) — "
                           "Job has reached the specified backoff limit")
    plain = observe("Job", _job(failed), [], [], SCOPE)[1]
    assert row.observed_at is not None and plain.observed_at is not None
    assert (row.observed_at - plain.observed_at).total_seconds() == 0.004  # fatal evidence ranks highest
    assert "s3cret" not in repr(row) and "TOKEN" not in repr(row)


def test_observation_ids_ignore_resource_version() -> None:
    a = observe("Job", _job({"active": 1}, rv="10"), [], [], SCOPE)[1]
    b = observe("Job", _job({"active": 1}, rv="11"), [], [], SCOPE)[1]
    assert a.observation_id == b.observation_id == observation_id(a)
    assert a.resource_version != b.resource_version


def test_rayjob_states() -> None:
    def ray(status: dict[str, Any]) -> str:
        obj = {"metadata": {"name": "r", "uid": "u2", "creationTimestamp": T0}, "spec": {}, "status": status}
        return observe("RayJob", obj, [], [], SCOPE)[1].state

    assert ray({"jobDeploymentStatus": "Complete"}) == "succeeded"
    assert ray({"jobDeploymentStatus": "Failed"}) == "failed"
    assert ray({"jobDeploymentStatus": "Running"}) == "running"
    assert ray({"jobDeploymentStatus": "Initializing"}) == "queued"


def test_health_address() -> None:
    assert parse_address("127.0.0.1:8080").loopback
    assert not parse_address(":8081").loopback and parse_address(":8081").host == "0.0.0.0"
    with pytest.raises(UsageError, match="--health-addr"):
        parse_address("8080")
