"""Job controller and scheduler scenarios."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tau_testing.sim import SimCluster
from tau_testing.sim.controllers import _util, add_node, install_default_controllers, kit
from tau_testing.sim.controllers.events import for_object, reasons
from tau_testing.sim.scripts import PodScript, scripts_of


@pytest.fixture
def cluster() -> SimCluster:
    c = SimCluster(clock="fake")
    install_default_controllers(c)
    c.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    return c


def test_indexed_job_with_two_pods(cluster: SimCluster) -> None:
    add_node(cluster, "node-1")
    scripts_of(cluster).add({"job-name": "shards"}, PodScript(run_seconds=2))
    cluster.store.create(kit.job("shards", queue=None, parallelism=2, completions=2, indexed=True))
    cluster.settle()
    pods = cluster.store.list("v1", "Pod", "team")
    assert len(pods) == 2
    by_index = {p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]: p for p in pods}
    assert set(by_index) == {"0", "1"}
    for index, pod in by_index.items():
        assert pod["metadata"]["name"].startswith(f"shards-{index}-")
        assert len(pod["metadata"]["name"]) == len(f"shards-{index}-") + 5
        labels = pod["metadata"]["labels"]
        assert labels["batch.kubernetes.io/job-completion-index"] == index
        assert labels["job-name"] == labels["batch.kubernetes.io/job-name"] == "shards"
        assert labels["controller-uid"] == labels["batch.kubernetes.io/controller-uid"]
        assert pod["spec"]["hostname"] == f"shards-{index}"
        env = pod["spec"]["containers"][0]["env"]
        assert {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}} in env
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "Job"
    job = cluster.store.get("batch/v1", "Job", "team", "shards")
    assert job["status"]["active"] == 2
    cluster.advance(1)
    assert cluster.store.get("batch/v1", "Job", "team", "shards")["status"]["ready"] == 2
    cluster.advance(3)
    job = cluster.store.get("batch/v1", "Job", "team", "shards")
    assert job["status"]["completedIndexes"] == "0-1"
    assert job["status"]["succeeded"] == 2
    assert kit.condition(job, "Complete")["reason"] == "CompletionsReached"
    assert job["status"]["completionTime"] == "2026-01-01T00:00:02Z"
    assert reasons(cluster, job).count("SuccessfulCreate") == 2


def test_parallelism_and_completions(cluster: SimCluster) -> None:
    add_node(cluster, "node-1")
    scripts_of(cluster).add({"job-name": "batch"}, PodScript(run_seconds=5))
    cluster.store.create(kit.job("batch", queue=None, parallelism=2, completions=5))
    cluster.settle()
    assert len(cluster.store.list("v1", "Pod", "team")) == 2
    cluster.advance(5)
    assert cluster.store.get("batch/v1", "Job", "team", "batch")["status"]["succeeded"] == 2
    cluster.advance(20)
    job = cluster.store.get("batch/v1", "Job", "team", "batch")
    assert job["status"]["succeeded"] == 5 and kit.condition(job, "Complete")["status"] == "True"
    assert len(cluster.store.list("v1", "Pod", "team")) == 5


def test_ttl_seconds_after_finished_deletes_job_and_pods(cluster: SimCluster) -> None:
    add_node(cluster, "node-1")
    cluster.store.create(kit.job("short", queue=None, ttl_seconds_after_finished=30))
    cluster.advance(2)
    assert cluster.store.get("batch/v1", "Job", "team", "short") is not None
    assert len(cluster.store.list("v1", "Pod", "team")) == 1
    cluster.advance(20)
    assert cluster.store.get("batch/v1", "Job", "team", "short") is not None
    cluster.advance(10)
    assert cluster.store.get("batch/v1", "Job", "team", "short") is None
    assert cluster.store.list("v1", "Pod", "team") == []


def test_active_deadline(cluster: SimCluster) -> None:
    add_node(cluster, "node-1")
    scripts_of(cluster).add({"job-name": "slow"}, PodScript(run_seconds=600))
    cluster.store.create(kit.job("slow", queue=None, active_deadline_seconds=10))
    cluster.advance(15)
    job = cluster.store.get("batch/v1", "Job", "team", "slow")
    failed = kit.condition(job, "Failed")
    assert (failed["reason"], failed["message"]) == ("DeadlineExceeded", "Job was active longer than specified deadline")
    assert failed["lastTransitionTime"] == "2026-01-01T00:00:10Z"
    assert cluster.store.list("v1", "Pod", "team") == []


def test_suspended_job_has_no_pods(cluster: SimCluster) -> None:
    add_node(cluster, "node-1")
    cluster.store.create(kit.job("held", queue=None, suspend=True))
    cluster.settle()
    job = cluster.store.get("batch/v1", "Job", "team", "held")
    assert kit.condition(job, "Suspended")["reason"] == "JobSuspended"
    assert cluster.store.list("v1", "Pod", "team") == []
    job["spec"]["suspend"] = False
    cluster.store.update(job)
    cluster.settle()
    job = cluster.store.get("batch/v1", "Job", "team", "held")
    assert kit.condition(job, "Suspended")["status"] == "False"
    assert "Resumed" in reasons(cluster, job)
    assert len(cluster.store.list("v1", "Pod", "team")) == 1


def test_failed_scheduling_message_names_every_reason(cluster: SimCluster) -> None:
    add_node(cluster, "cpu-1", cpu="4", memory="16Gi", labels={"pool": "cpu"})
    add_node(cluster, "cpu-2", cpu="4", memory="16Gi", labels={"pool": "cpu"})
    add_node(cluster, "gpu-1", cpu="16", memory="64Gi", gpu=1, labels={"pool": "gpu"})
    cluster.store.create(kit.job("greedy", queue=None, gpu=2, node_selector={"pool": "gpu"}))
    cluster.settle()
    (pod,) = cluster.store.list("v1", "Pod", "team")
    message = ("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node "
               "affinity/selector. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming "
               "pod, 2 Preemption is not helpful for scheduling.")
    cond = kit.condition(pod, "PodScheduled")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", message)
    failed = [e for e in for_object(cluster, pod) if e["reason"] == "FailedScheduling"]
    assert len(failed) == 1 and failed[0]["message"] == message and failed[0]["type"] == "Warning"
    assert failed[0]["source"]["component"] == "default-scheduler"
    cluster.settle()
    assert len([e for e in for_object(cluster, pod) if e["reason"] == "FailedScheduling"]) == 1


def test_taints_tolerations_and_affinity(cluster: SimCluster) -> None:
    add_node(cluster, "gpu-1", cpu="16", memory="64Gi", gpu=4, labels={"pool": "gpu"},
             taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    cluster.store.create(kit.job("plain", queue=None))
    cluster.settle()
    (pod,) = cluster.store.list("v1", "Pod", "team", label_selector="job-name=plain")
    assert kit.condition(pod, "PodScheduled")["message"].startswith(
        "0/1 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}.")
    manifest = kit.job("tolerant", queue=None, gpu=1)
    spec = manifest["spec"]["template"]["spec"]
    spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]}}}
    cluster.store.create(manifest)
    cluster.settle()
    (pod,) = cluster.store.list("v1", "Pod", "team", label_selector="job-name=tolerant")
    assert pod["spec"]["nodeName"] == "gpu-1"
    scheduled = [e for e in for_object(cluster, pod) if e["reason"] == "Scheduled"]
    assert scheduled[0]["message"] == f"Successfully assigned team/{pod['metadata']['name']} to gpu-1"


def test_resources_are_accounted_per_node(cluster: SimCluster) -> None:
    add_node(cluster, "small", cpu="2", memory="4Gi")
    scripts_of(cluster).add({}, PodScript(run_seconds=100))
    cluster.store.create(kit.job("a", queue=None, cpu="1500m", memory="1Gi"))
    cluster.store.create(kit.job("b", queue=None, cpu="600m", memory="1Gi"))
    cluster.settle()
    pods = {p["metadata"]["labels"]["job-name"]: p for p in cluster.store.list("v1", "Pod", "team")}
    assert pods["a"]["spec"]["nodeName"] == "small"
    assert "nodeName" not in pods["b"]["spec"]
    assert kit.condition(pods["b"], "PodScheduled")["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
    cluster.advance(101)
    pods = {p["metadata"]["labels"]["job-name"]: p for p in cluster.store.list("v1", "Pod", "team")}
    assert pods["b"]["spec"]["nodeName"] == "small"


def test_no_nodes(cluster: SimCluster) -> None:
    cluster.store.create(kit.job("lonely", queue=None))
    cluster.settle()
    (pod,) = cluster.store.list("v1", "Pod", "team")
    assert kit.condition(pod, "PodScheduled")["message"] == "no nodes available to schedule pods"


@pytest.mark.parametrize(("text", "value"), [("500m", Decimal("0.5")), ("4Gi", Decimal(4 * 2**30)), ("1.5", Decimal("1.5")),
                                            ("2k", Decimal(2000)), ("100Mi", Decimal(100 * 2**20)), (3, Decimal(3)),
                                            ("1e3", Decimal(1000))])
def test_quantities(text: object, value: Decimal) -> None:
    assert _util.parse_quantity(text) == value


def test_quantity_formatting_and_errors() -> None:
    assert _util.format_quantity("cpu", 2500) == "2500m"
    assert _util.format_quantity("cpu", 2000) == "2"
    assert _util.format_quantity("memory", _util.milli("6Gi")) == "6Gi"
    assert _util.format_quantity("memory", _util.milli("1536Mi")) == "1536Mi"
    assert _util.format_quantity("nvidia.com/gpu", 4000) == "4"
    with pytest.raises(ValueError, match="not a valid Kubernetes quantity"):
        _util.parse_quantity("lots")
