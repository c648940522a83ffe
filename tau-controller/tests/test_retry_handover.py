"""The retry hand-over rule (tau_controller.handover), on the fake-clock simulator through a real KubeSession:
which unfinished resubmissions a sweep completes, which it records as cancelled, and that it is idempotent.
No controller thread and no real time: every state is planted, then one sweep runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from tau_controller import handover
from tau_controller.api import Cache, Client
from tau_controller.context import COMPONENT, Ctx
from tau_controller.retrying import KINDS
from tau_core import keys
from tau_core.kube import KubeSession
from tau_testing.sim.controllers import kit

NS = "aurora"
OTHER = f"{COMPONENT}-stopped0001"  # the process that recorded a retry and then stopped


def _job(name: str, submission: str, attempt: int | None = None) -> dict[str, Any]:
    body = kit.job(name, NS, queue=None, suspend=True)
    annotations = {keys.SUBMISSION_ID: submission, keys.RETRY_OWNER: "controller"}
    if attempt:
        annotations[keys.RETRY_ATTEMPT] = str(attempt)
    body["metadata"]["annotations"] = annotations
    return body


def _record(run: str, attempt: int, uid: str, *, state: str | None, instance: str = OTHER) -> dict[str, Any]:
    annotations = {keys.RETRY_NEXT: json.dumps(_job(run, f"{run}-sub-{attempt}", attempt))}
    if state:
        annotations[keys.RETRY_STATE] = state
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{run}-retry-{attempt}", "namespace": NS, "annotations": annotations},
            "involvedObject": {"apiVersion": "batch/v1", "kind": "Job", "namespace": NS, "name": run, "uid": uid},
            "reason": handover.ATTEMPT_REASON, "type": "Warning", "message": f"attempt={attempt}",
            "reportingComponent": COMPONENT, "reportingInstance": instance, "source": {"component": COMPONENT}}


@pytest.fixture
def cluster(sim_cluster_factory: Callable[..., Any]) -> Any:
    cluster = sim_cluster_factory(controllers=False)
    cluster.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return cluster


def _sweep(cluster: Any, ctx_setup: Callable[[Ctx], None] = lambda ctx: None, rounds: int = 1) -> list[int]:
    async def go() -> list[int]:
        async with await KubeSession.connect(kubeconfig=cluster.kubeconfig_path) as session:
            ctx = Ctx(Client(session, Cache(), ()), instance=f"{COMPONENT}-this000001")
            ctx_setup(ctx)
            return [await handover.sweep(ctx, KINDS) for _ in range(rounds)]

    return asyncio.run(go())


def _state(cluster: Any, run: str, attempt: int) -> str | None:
    event = cluster.store.get("v1", "Event", NS, f"{run}-retry-{attempt}")
    return event["metadata"]["annotations"].get(keys.RETRY_STATE)


def _creates(cluster: Any) -> list[str | None]:
    return [r.name or r.path for r in cluster.requests.entries
            if r.method == "POST" and r.resource == "jobs.batch" and r.status == 201]


def test_a_resubmission_a_stopped_controller_left_after_its_delete_is_finished_once(cluster):
    cluster.store.create(_record("a", 1, "uid-of-the-deleted-attempt", state=handover.PENDING))
    assert _sweep(cluster, rounds=2) == [1, 0]  # the second sweep finds nothing left to do
    job = cluster.store.get("batch/v1", "Job", NS, "a")
    assert job["metadata"]["annotations"][keys.SUBMISSION_ID] == "a-sub-1"  # the recorded attempt, not a new one
    assert job["metadata"]["annotations"][keys.RETRY_ATTEMPT] == "1"
    assert _state(cluster, "a", 1) == handover.SUBMITTED
    assert len(_creates(cluster)) == 1


def test_a_run_deleted_before_this_controller_deleted_it_is_cancelled_not_revived(cluster):
    cluster.store.create(_record("b", 1, "uid-b", state=handover.PENDING, instance=f"{COMPONENT}-this000001"))
    assert _sweep(cluster) == [1]
    assert _state(cluster, "b", 1) == handover.CANCELLED
    assert cluster.store.get("batch/v1", "Job", NS, "b") is None
    assert _sweep(cluster) == [0]  # final: a later controller (another instance) leaves it alone too
    assert cluster.store.get("batch/v1", "Job", NS, "b") is None and not _creates(cluster)


def test_this_controllers_own_delete_is_finished_even_after_its_create_failed(cluster):
    cluster.store.create(_record("i", 1, "uid-i", state=handover.PENDING, instance=f"{COMPONENT}-this000001"))
    assert _sweep(cluster, lambda ctx: ctx.deleted.add("uid-i")) == [1]
    assert cluster.store.get("batch/v1", "Job", NS, "i")["metadata"]["annotations"][keys.SUBMISSION_ID] == "i-sub-1"
    assert _state(cluster, "i", 1) == handover.SUBMITTED


def test_final_old_and_superseded_records_are_never_acted_on(cluster):
    cluster.store.create(_record("c", 1, "uid-c", state=handover.SUBMITTED))  # then the user cancelled attempt 1
    cluster.store.create(_record("d", 1, "uid-d", state=handover.CANCELLED))
    cluster.store.create(_record("h", 1, "uid-h", state=None))  # written by an older controller
    cluster.store.create(_record("g", 1, "uid-g1", state=handover.PENDING))  # not the run's newest record
    cluster.store.create(_record("g", 2, "uid-g2", state=handover.SUBMITTED))
    assert _sweep(cluster) == [0]
    assert not _creates(cluster)
    assert _state(cluster, "g", 1) == handover.PENDING


def test_a_standing_failed_workload_is_left_to_the_retry_path_and_a_replaced_run_is_cancelled(cluster):
    failed = cluster.store.create(_job("e", "e-sub-0"))
    cluster.store.create(_record("e", 1, failed["metadata"]["uid"], state=handover.PENDING))
    cluster.store.create(_job("f", "someone-elses-submission"))  # the user resubmitted the run by hand
    cluster.store.create(_record("f", 1, "uid-of-the-old-f", state=handover.PENDING))
    cluster.store.create(_job("n", "n-sub-1", attempt=1))  # the next attempt exists; only the mark was missing
    cluster.store.create(_record("n", 1, "uid-of-the-old-n", state=handover.PENDING))
    assert _sweep(cluster) == [2]
    assert _state(cluster, "e", 1) == handover.PENDING
    assert _state(cluster, "f", 1) == handover.CANCELLED
    assert _state(cluster, "n", 1) == handover.SUBMITTED
    assert cluster.store.get("batch/v1", "Job", NS, "f")["metadata"]["annotations"][keys.SUBMISSION_ID] == \
        "someone-elses-submission"
    assert not _creates(cluster)
