"""Failure classification from durable evidence (tau_core.classification) and the bounded re-read that waits
for evidence which has not arrived yet (KubernetesBackend.settle), against the simulated cluster (fake clock)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tau_core import keys
from tau_core.backends.kubernetes import KubernetesBackend
from tau_core.classification import attempt_pod_events, settled, verdict
from tau_core.lifecycle.base import FailureReason, RunRef, SubmitRequest
from tau_core.status_tree import Snapshot
from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario
from tau_testing.sim.scripts import PodScript, scripts_of

JOB_UID = "11111111-1111-1111-1111-111111111111"
OLD_JOB_UID = "00000000-0000-0000-0000-000000000000"


def job(name: str) -> dict[str, Any]:
    container = {"name": "main", "image": "ghcr.io/acme/train:1.0",
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {
                keys.KUEUE_QUEUE_NAME: "jobqueue", keys.MANAGED_BY: keys.MANAGED_BY_VALUE, keys.RUN_ID: name}},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {
                "metadata": {"labels": {"app": name}}, "spec": {"restartPolicy": "Never", "containers": [container]}}}}


def request(obj: dict[str, Any]) -> SubmitRequest:
    return SubmitRequest(name=obj["metadata"]["name"], config={}, objects=[copy.deepcopy(obj)], context={},
                         submission_id="a" * 24)


def failed_job(reason: str = "BackoffLimitExceeded", message: str = "Job has reached the specified backoff limit") \
        -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pre", "uid": JOB_UID},
            "status": {"failed": 1, "conditions": [
                {"type": "FailureTarget", "status": "True", "reason": reason, "message": message},
                {"type": "Failed", "status": "True", "reason": reason, "message": message}]}}


def pod(name: str, uid: str, owner: str = JOB_UID, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid, "labels": {"controller-uid": owner}},
            "status": {"phase": "Running", **status}}


def event(reason: str, kind: str, name: str, uid: str, message: str = "") -> dict[str, Any]:
    return {"reason": reason, "message": message,
            "involvedObject": {"kind": kind, "name": name, "uid": uid}}


def created(name: str, job_uid: str = JOB_UID) -> dict[str, Any]:
    return event("SuccessfulCreate", "Job", "pre", job_uid, f"Created pod: {name}")


def snap(**parts: Any) -> Snapshot:
    return Snapshot(namespace="ns", name="pre", job=parts.pop("job", failed_job()), **parts)


DISRUPTED = {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}


def test_failed_job_with_a_stale_running_pod_is_not_settled() -> None:
    found = verdict(snap(pods=[pod("pre-a1", "p1")]))
    assert found.reason is FailureReason.UNKNOWN and found.evidence == ""
    assert not settled(snap(), found)


def test_a_deleted_pod_is_recognised_by_the_jobs_created_pod_event() -> None:
    found = verdict(snap(events=[created("pre-a1"), event("Preempted", "Pod", "pre-a1", "p1", "Preempted by pod x")]))
    assert found.reason is FailureReason.PREEMPTED
    assert found.evidence == "event Preempted on pod pre-a1"


def test_events_of_an_earlier_attempts_pods_do_not_count() -> None:
    earlier = [created("pre-a1", OLD_JOB_UID), event("Preempted", "Pod", "pre-a1", "old-pod")]
    assert verdict(snap(events=earlier)).reason is FailureReason.UNKNOWN
    # same pod name as this attempt's live pod, but another uid: an earlier pod's event
    reused = snap(pods=[pod("pre-a1", "p1", phase="Failed")], events=[event("Preempted", "Pod", "pre-a1", "old")])
    assert attempt_pod_events(reused) == []


def test_departed_pods_keep_their_conditions_as_evidence() -> None:
    gone = pod("pre-a1", "p1", **{"phase": "Failed", **DISRUPTED})
    found = verdict(snap(departed=[gone]))
    assert found == verdict(snap(pods=[gone]))
    assert found.reason is FailureReason.PREEMPTED
    assert found.evidence == "pod pre-a1: condition DisruptionTarget=True reason PreemptionByScheduler"
    assert verdict(snap(departed=[pod("other", "p9", owner=OLD_JOB_UID, **DISRUPTED)])).reason is \
        FailureReason.UNKNOWN


def test_kueue_workload_and_job_conditions_are_durable_evidence() -> None:
    wl = {"metadata": {"name": "job-pre-1"}, "status": {"conditions": [
        {"type": "Evicted", "status": "True", "reason": "Preempted"},
        {"type": "Preempted", "status": "True", "reason": "InClusterQueue"}]}}
    found = verdict(snap(workloads=[wl]))
    assert (found.reason, found.evidence) == (FailureReason.PREEMPTED,
                                              "Workload job-pre-1: condition Preempted=True reason InClusterQueue")
    policy = failed_job("PodFailurePolicy", "Pod ns/pre-a1 has condition DisruptionTarget matching FailJob rule "
                                            "at index 0")
    found = verdict(snap(job=policy))
    assert found.reason is FailureReason.PREEMPTED and "PodFailurePolicy" in found.evidence


def test_an_application_failure_settles_at_once_and_says_why() -> None:
    exited = pod("pre-a1", "p1", phase="Failed", containerStatuses=[
        {"name": "main", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}])
    found = verdict(snap(pods=[exited]))
    assert found.reason is FailureReason.UNKNOWN
    assert found.evidence == "pod pre-a1: container main exited 3 (Error)"
    assert settled(snap(pods=[exited]), found)
    killed = copy.deepcopy(exited)
    killed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] = 137
    assert not settled(snap(pods=[killed]), verdict(snap(pods=[killed])))
    deadline = verdict(snap(job=failed_job("DeadlineExceeded", "Job was active longer than specified deadline")))
    assert deadline.evidence == "Job condition Failed reason DeadlineExceeded" and settled(snap(), deadline)


@pytest.fixture
def grid(taugrid_cluster: TauGridScenario) -> tuple[TauGridScenario, KubernetesBackend]:
    return taugrid_cluster, KubernetesBackend(kubeconfig=str(taugrid_cluster.kubeconfig),  # type: ignore[attr-defined]
                                              poll_interval=0.01, evidence_grace=2.0)


def test_a_stale_view_of_a_preempted_job_is_re_read_until_the_evidence_shows(grid) -> None:  # type: ignore[no-untyped-def]
    """The race of issue 21: the Job reads Failed while the pod and its Preempted Event are not yet visible."""
    scenario, backend = grid
    scripts_of(scenario.cluster).add({"app": "race"}, PodScript(run_seconds=30, preempt_after=3))
    backend.submit(request(job("race")))
    scenario.cluster.advance(2)
    before = backend._run(lambda s: backend.snapshot(s, NAMESPACE, "race"))
    assert before.pods and verdict(before).reason is FailureReason.RUNNING
    scenario.cluster.advance(10)
    after = backend._run(lambda s: backend.snapshot(s, NAMESPACE, "race"))
    assert after.pods == []  # the preempted pod is gone, as on a real cluster
    stale = Snapshot(namespace=NAMESPACE, name="race", job=after.job, workloads=before.workloads,
                     pods=before.pods, events=before.events)
    assert verdict(stale).reason is FailureReason.UNKNOWN
    settled_snap = backend._run(lambda s: backend.settle(s, stale))
    found = verdict(settled_snap)
    assert found.reason is FailureReason.PREEMPTED, found
    # the pod last seen running is gone; the scheduler's Event about it (matched by its uid) decides
    assert found.evidence == f"event Preempted on pod {before.pods[0]['metadata']['name']}"
    st = backend.status(RunRef("race", namespace=NAMESPACE))
    assert st.failure is FailureReason.PREEMPTED
    assert st.extra.failure_evidence.startswith("event Preempted on pod ")


def test_the_re_read_is_bounded_when_no_evidence_ever_arrives(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    scripts_of(scenario.cluster).add({"app": "bare"}, PodScript(run_seconds=30))
    backend.submit(request(job("bare")))
    scenario.cluster.advance(2)
    live = backend._run(lambda s: backend.snapshot(s, NAMESPACE, "bare"))
    hollow = Snapshot(namespace=NAMESPACE, name="bare", job=failed_job() | {"metadata": live.job["metadata"]})
    backend.evidence_grace = 0.5
    result = backend._run(lambda s: backend.settle(s, hollow))
    assert verdict(result).reason is FailureReason.RUNNING  # re-read: the cluster says the Job still runs
    gone = Snapshot(namespace=NAMESPACE, name="vanished", job=failed_job())
    result = backend._run(lambda s: backend.settle(s, gone))
    assert result is gone  # replaced (here: absent) in between: what was read is kept, no endless wait
