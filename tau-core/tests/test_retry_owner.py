"""Retry ownership: who retries (capability in TauCluster status) and the next attempt from a workload's own spec."""

from __future__ import annotations

from tau_core import keys
from tau_core.lifecycle.base import FailureReason
from tau_core.retry import (
    RetryPolicy,
    next_attempt,
    policy_annotation,
    policy_from_annotation,
    retry_owner,
)

POLICY = RetryPolicy(2, ("Preempted",), 5.0, 60.0, "/data/checkpoints/finetunes/t")


def _cluster(status: str = "True", observed: int = 3, generation: int = 3) -> dict:
    return {"metadata": {"generation": generation},
            "status": {"conditions": [{"type": "ServerSideRetry", "status": status, "observedGeneration": observed}]}}


def test_owner_is_the_controller_only_when_the_capability_is_present_and_current():
    assert retry_owner(_cluster()) == "controller"
    assert retry_owner(_cluster(observed=2)) == "cli"  # stale: written for an older generation
    assert retry_owner(_cluster(status="False")) == "cli"
    assert retry_owner({"metadata": {"generation": 1}, "status": {}}) == "cli"
    assert retry_owner(None) == "cli"


def test_policy_round_trips_through_its_annotation():
    assert policy_from_annotation(policy_annotation(POLICY)) == POLICY
    assert policy_from_annotation("not json") is None
    assert policy_from_annotation(None) is None


def test_next_attempt_is_the_old_spec_minus_server_fields_with_the_attempt_env():
    old = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "t", "namespace": "aurora", "uid": "u1", "resourceVersion": "9", "generation": 2,
                        "creationTimestamp": "x", "labels": {"app": "t", "batch.kubernetes.io/controller-uid": "u1"},
                        "annotations": {keys.SUBMISSION_ID: "aaaa1111", keys.ARTIFACT_PUBLICATION_ID: "pub0"}},
           "spec": {"suspend": False, "selector": {"matchLabels": {"controller-uid": "u1"}},
                    "template": {"metadata": {"labels": {"job-name": "t", "controller-uid": "u1", "app": "t"}},
                                 "spec": {"nodeSelector": {"injected": "by-kueue"}, "containers": [
                                     {"name": "main", "image": "i", "command": ["sh", "-c", "publish pub0"],
                                      "env": [{"name": "TAU_RETRY_ATTEMPT", "value": "0"},
                                              {"name": "KEEP", "value": "1"}]}]}}},
           "status": {"failed": 1}}
    new = next_attempt(old, attempt=1, reason=FailureReason.PREEMPTED, policy=POLICY, submission_id="bbbb2222",
                       publication_id="pub1", pod_template={"spec": {"containers": []}})
    meta = new["metadata"]
    assert "status" not in new and not {"uid", "resourceVersion", "generation", "creationTimestamp"} & set(meta)
    assert meta["labels"] == {"app": "t"} and new["spec"]["template"]["metadata"]["labels"] == {"app": "t"}
    assert "selector" not in new["spec"] and new["spec"]["suspend"] is True
    assert "nodeSelector" not in new["spec"]["template"]["spec"]  # the placement Kueue injected is dropped
    container = new["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"KEEP": "1", "TAU_RESUME_FROM": "/data/checkpoints/finetunes/t", "TAU_RETRY_ATTEMPT": "1",
                   "TAU_RETRY_MAX": "2", "TAU_RETRY_REASON": "Preempted"}
    assert container["command"] == ["sh", "-c", "publish pub1"]
    assert meta["annotations"][keys.SUBMISSION_ID] == "bbbb2222"
    assert meta["annotations"][keys.RETRY_ATTEMPT] == "1" and meta["annotations"][keys.RETRY_REASON] == "Preempted"
    assert old["metadata"]["uid"] == "u1"  # the input is not modified


class _Attempts:
    """A backend whose ``wait`` returns the given final statuses in turn (the follow loop's only input)."""

    def __init__(self, *statuses: tuple[int, bool]) -> None:
        from tau_core.lifecycle.base import FailureReason, RunRef, RunStatus

        self.ref = RunRef("pre", "kubernetes", "aurora")
        self.statuses = [RunStatus(self.ref, "Job", [], True, ok, None if ok else FailureReason.PREEMPTED, attempt=a)
                         for a, ok in statuses]

    def wait(self, ref: object) -> object:
        return self.statuses.pop(0)


def test_follow_reports_attempts_the_controller_replaced_before_this_command_saw_them_fail():
    from tau_core.backends.retry_owner import follow
    from tau_core.retry import RetryPolicy

    said: list[str] = []
    backend = _Attempts((2, True))  # attempts 0 and 1 failed and were replaced before the watch saw either fail
    st = follow(backend, backend.ref, RetryPolicy(max_retries=2, retry_on=("Preempted",)), said.append)
    assert st.succeeded
    assert said[1:] == ["attempt 1/2 failed — the Tau controller has already resubmitted it",
                        "attempt 2/2 failed — the Tau controller has already resubmitted it",
                        "workload aurora/pre completed successfully"]
