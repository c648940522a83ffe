"""Kueue simulation scenarios: admission, pending reasons, flavors, priorities, preemption, stop policies."""

from __future__ import annotations

import pytest

from tau_testing.sim import SimCluster
from tau_testing.sim.controllers import add_node, install_default_controllers, kit, preempt, workloads_for
from tau_testing.sim.controllers.events import for_object, reasons
from tau_testing.sim.controllers.kueue import API, workload_name

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def cluster() -> SimCluster:
    c = SimCluster(clock="fake")
    install_default_controllers(c)
    add_node(c, "cpu-1", cpu="8", memory="32Gi", labels={"agentpool": "cpu"})
    add_node(c, "cpu-2", cpu="8", memory="32Gi", labels={"agentpool": "cpu"})
    add_node(c, "gpu-1", cpu="32", memory="128Gi", gpu=4, labels={"agentpool": "gpu", "gpu-class": "a100"})
    return c


def _wl(cluster: SimCluster, name: str, ns: str = "team") -> dict:
    job = cluster.store.get("batch/v1", "Job", ns, name)
    assert job is not None, f"job {name} missing"
    (wl,) = workloads_for(cluster, job)
    return wl


def test_job_admitted_and_completed(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "4", "memory": "16Gi"})])
    job = cluster.store.create(kit.job("train", cpu="2"))
    cluster.settle()

    wl = _wl(cluster, "train")
    assert wl["metadata"]["name"] == workload_name("Job", "batch", "train", job["metadata"]["uid"])
    assert wl["metadata"]["name"].startswith("job-train-") and len(wl["metadata"]["name"]) == len("job-train-") + 5
    assert wl["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert wl["spec"]["queueName"] == "lq"
    assert wl["spec"]["podSets"][0]["name"] == "main" and wl["spec"]["podSets"][0]["count"] == 1
    assert kit.condition(wl, "QuotaReserved")["message"] == "Quota reserved in ClusterQueue cq"
    assert kit.condition(wl, "Admitted")["reason"] == "Admitted"
    assignment = wl["status"]["admission"]["podSetAssignments"][0]
    assert assignment["flavors"] == {"cpu": "default-flavor", "memory": "default-flavor"}
    assert assignment["resourceUsage"] == {"cpu": "2", "memory": "1Gi"}
    assert cluster.store.get("batch/v1", "Job", "team", "train")["spec"]["suspend"] is False
    cq = cluster.store.get(API, "ClusterQueue", None, "cq")
    assert (cq["status"]["admittedWorkloads"], cq["status"]["reservingWorkloads"]) == (1, 1)
    assert cq["status"]["flavorsUsage"][0]["resources"][0] == {"name": "cpu", "total": "2", "borrowed": "0"}

    cluster.advance(3)
    job = cluster.store.get("batch/v1", "Job", "team", "train")
    assert kit.condition(job, "Complete")["status"] == "True"
    assert job["status"]["succeeded"] == 1
    wl = _wl(cluster, "train")
    assert kit.condition(wl, "Finished")["reason"] == "Succeeded"
    cq = cluster.store.get(API, "ClusterQueue", None, "cq")
    assert cq["status"]["admittedWorkloads"] == 0 and cq["status"]["reservingWorkloads"] == 0
    assert cq["status"]["flavorsUsage"][0]["resources"][0]["total"] == "0"
    assert reasons(cluster, wl)[:2] == ["QuotaReserved", "Admitted"] or {"QuotaReserved", "Admitted"} <= set(
        reasons(cluster, wl))
    job_events = reasons(cluster, job)
    for reason in ("CreatedWorkload", "Started", "SuccessfulCreate", "Completed"):
        assert reason in job_events


def test_job_pending_on_quota_reports_counts_and_kueue_message(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "4", "memory": "16Gi"})])
    cluster.store.create(kit.job("first", cpu="3"))
    cluster.store.create(kit.job("second", cpu="3"))
    cluster.settle()

    second = _wl(cluster, "second")
    cond = kit.condition(second, "QuotaReserved")
    assert cond["status"] == "False" and cond["reason"] == "Pending"
    assert cond["message"] == ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                               "default-flavor, 2 more needed")
    assert kit.condition(second, "Admitted") is None
    assert cluster.store.get("batch/v1", "Job", "team", "second")["spec"]["suspend"] is True
    assert "Pending" in reasons(cluster, second)
    cq = cluster.store.get(API, "ClusterQueue", None, "cq")["status"]
    assert (cq["pendingWorkloads"], cq["reservingWorkloads"], cq["admittedWorkloads"]) == (1, 1, 1)
    lq = cluster.store.get(API, "LocalQueue", "team", "lq")["status"]
    assert (lq["pendingWorkloads"], lq["reservingWorkloads"], lq["admittedWorkloads"]) == (1, 1, 1)
    assert kit.condition({"status": lq}, "Active")["status"] == "True"

    cluster.advance(1)  # the first finishes, its quota is released, the second is admitted
    second = _wl(cluster, "second")
    assert kit.condition(second, "Admitted")["status"] == "True"
    assert kit.condition(_wl(cluster, "first"), "Finished")["status"] == "True"
    assert kit.condition(_wl(cluster, "first"), "Admitted")["reason"] == "Finished"
    assert second["status"]["resourceRequests"] == [{"name": "main", "resources": {"cpu": "3", "memory": "1Gi"}}]
    cluster.advance(2)
    cq = cluster.store.get(API, "ClusterQueue", None, "cq")["status"]
    assert (cq["pendingWorkloads"], cq["reservingWorkloads"], cq["admittedWorkloads"]) == (0, 0, 0)


def test_memory_and_gpu_pending_wording(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "8", "memory": "4Gi"})])
    cluster.store.create(kit.job("big", cpu="1", memory="6Gi"))
    cluster.store.create(kit.job("gpu", cpu="1", memory="1Gi", gpu=1))
    cluster.settle()
    assert kit.condition(_wl(cluster, "big"), "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: insufficient quota for memory in flavor default-flavor, "
        "request > maximum capacity (6Gi > 4Gi)")
    assert kit.condition(_wl(cluster, "gpu"), "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable in ClusterQueue")


def test_gpu_flavor_node_labels_place_pods_on_the_gpu_node(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[
        kit.Flavor("a100", {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "4"}, node_labels={"gpu-class": "a100"}),
    ])
    cluster.store.create(kit.job("gpu-train", cpu="4", memory="8Gi", gpu=2))
    cluster.settle()
    wl = _wl(cluster, "gpu-train")
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] == "a100"
    job = cluster.store.get("batch/v1", "Job", "team", "gpu-train")
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"gpu-class": "a100"}
    (pod,) = cluster.store.list("v1", "Pod", "team")
    assert pod["spec"]["nodeName"] == "gpu-1"
    assert pod["spec"]["nodeSelector"] == {"gpu-class": "a100"}
    cq = cluster.store.get(API, "ClusterQueue", None, "cq")["status"]
    gpu = next(r for r in cq["flavorsUsage"][0]["resources"] if r["name"] == "nvidia.com/gpu")
    assert gpu["total"] == "2"


def test_second_flavor_is_tried_when_the_first_is_full(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[
        kit.Flavor("on-demand", {"cpu": "2", "memory": "8Gi"}, node_labels={"agentpool": "cpu"}),
        kit.Flavor("spot", {"cpu": "4", "memory": "8Gi"}, node_labels={"agentpool": "gpu"}),
    ])
    for name, cpu in (("one", "2"), ("two", "2"), ("three", "4")):
        cluster.store.create(kit.job(name, cpu=cpu))
        cluster.clock.advance(1)  # queue order is creation order
    cluster.settle()
    assert _wl(cluster, "one")["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == "on-demand"
    assert _wl(cluster, "two")["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == "spot"
    assert kit.condition(_wl(cluster, "three"), "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor on-demand, "
        "request > maximum capacity (4 > 2), insufficient unused quota for cpu in flavor spot, 2 more needed")


def test_priority_orders_the_queue(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "2", "memory": "8Gi"})],
                    priority_classes={"low": 100, "high": 1000})
    cluster.controllers["kueue"].enabled = False
    cluster.store.create(kit.job("low-job", cpu="2", priority_class="low"))
    cluster.clock.advance(1)
    cluster.store.create(kit.job("high-job", cpu="2", priority_class="high"))
    cluster.controllers["kueue"].enabled = True
    cluster.settle()
    high, low = _wl(cluster, "high-job"), _wl(cluster, "low-job")
    assert high["spec"]["priority"] == 1000
    assert high["spec"]["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                "name": "high"}
    assert kit.condition(high, "Admitted")["status"] == "True"
    assert kit.condition(low, "QuotaReserved")["status"] == "False"


def test_injected_preemption_suspends_the_job_and_requeues(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "4", "memory": "16Gi"})])
    from tau_testing.sim.scripts import PodScript, scripts_of

    scripts_of(cluster).add({"job-name": "victim"}, PodScript(run_seconds=60))
    cluster.store.create(kit.job("victim", cpu="2"))
    cluster.advance(5)
    (pod,) = cluster.store.list("v1", "Pod", "team")
    assert pod["status"]["phase"] == "Running"
    wl = _wl(cluster, "victim")

    preempt(cluster, "team", wl["metadata"]["name"], requeue=False)
    cluster.settle()
    wl = _wl(cluster, "victim")
    assert kit.condition(wl, "Evicted")["reason"] == "Preempted"
    assert kit.condition(wl, "Preempted")["reason"] == "InClusterQueue"
    assert kit.condition(wl, "QuotaReserved")["status"] == "False"
    assert kit.condition(wl, "Admitted")["reason"] == "NoReservation"
    assert "admission" not in wl["status"]
    assert wl["status"]["schedulingStats"]["evictions"] == [{"reason": "Preempted", "underlyingCause": "",
                                                             "count": 1}]
    assert {"Preempted", "EvictedDueToPreempted"} <= set(reasons(cluster, wl))
    job = cluster.store.get("batch/v1", "Job", "team", "victim")
    assert job["spec"]["suspend"] is True
    assert kit.condition(job, "Suspended")["status"] == "True"
    stopped = [e for e in for_object(cluster, job) if e["reason"] == "Stopped"]
    assert stopped and stopped[0]["message"] == "Preempted to accommodate a higher priority Workload"
    assert cluster.store.list("v1", "Pod", "team") == []
    assert "Killing" in reasons(cluster, pod)
    cq = cluster.store.get(API, "ClusterQueue", None, "cq")["status"]
    assert cq["admittedWorkloads"] == 0


def test_preempted_workload_is_readmitted_when_requeued(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "4", "memory": "16Gi"})])
    from tau_testing.sim.scripts import PodScript, scripts_of

    scripts_of(cluster).add({"job-name": "again"}, PodScript(run_seconds=60))
    cluster.store.create(kit.job("again", cpu="2"))
    cluster.advance(2)
    first_pod = cluster.store.list("v1", "Pod", "team")[0]["metadata"]["name"]
    preempt(cluster, "team", _wl(cluster, "again")["metadata"]["name"])
    cluster.settle()
    wl = _wl(cluster, "again")
    assert kit.condition(wl, "Admitted")["status"] == "True"
    assert kit.condition(wl, "Evicted")["status"] == "False"
    assert kit.condition(wl, "Evicted")["message"].startswith("Previously: ")
    pods = cluster.store.list("v1", "Pod", "team")
    assert len(pods) == 1 and pods[0]["metadata"]["name"] != first_pod


def test_higher_priority_preempts_lower_priority_automatically(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "4", "memory": "16Gi"})],
                    preemption={"withinClusterQueue": "LowerPriority"}, priority_classes={"low": 10, "high": 100})
    from tau_testing.sim.scripts import PodScript, scripts_of

    scripts_of(cluster).add({"job-name": "low"}, PodScript(run_seconds=600))
    cluster.store.create(kit.job("low", cpu="3", priority_class="low"))
    cluster.advance(2)
    cluster.store.create(kit.job("high", cpu="3", priority_class="high"))
    cluster.settle()
    low, high = _wl(cluster, "low"), _wl(cluster, "high")
    assert kit.condition(low, "Evicted")["reason"] == "Preempted"
    assert "due to prioritization in the ClusterQueue" in kit.condition(low, "Preempted")["message"]
    assert kit.condition(high, "Admitted")["status"] == "True"
    assert kit.condition(low, "QuotaReserved")["status"] == "False"


def test_hold_and_drain_evicts_admitted_and_holds_pending(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "4", "memory": "16Gi"})])
    from tau_testing.sim.scripts import PodScript, scripts_of

    scripts_of(cluster).add({}, PodScript(run_seconds=600))
    cluster.store.create(kit.job("running", cpu="3"))
    cluster.store.create(kit.job("waiting", cpu="3"))
    cluster.advance(1)
    cq = cluster.store.get(API, "ClusterQueue", None, "cq")
    cq["spec"]["stopPolicy"] = "HoldAndDrain"
    cluster.store.update(cq)
    cluster.settle()
    running = _wl(cluster, "running")
    assert kit.condition(running, "Evicted")["reason"] == "ClusterQueueStopped"
    assert kit.condition(running, "Evicted")["message"] == "The ClusterQueue is stopped"
    assert kit.condition(_wl(cluster, "waiting"), "QuotaReserved")["message"] == "ClusterQueue cq is stopped"
    assert cluster.store.get("batch/v1", "Job", "team", "running")["spec"]["suspend"] is True
    status = cluster.store.get(API, "ClusterQueue", None, "cq")["status"]
    assert kit.condition({"status": status}, "Active")["status"] == "False"
    assert (status["pendingWorkloads"], status["admittedWorkloads"]) == (2, 0)


def test_inadmissible_reasons(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "4"})], namespace="open")
    cluster.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "closed"}})
    cluster.store.create({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": "nobody"},
                          "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                              {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}})
    cluster.store.create({"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "closed"},
                          "spec": {"clusterQueue": "nobody"}})
    cluster.store.create(kit.job("no-match", "closed", cpu="1", memory=""))
    cluster.store.create(kit.job("no-queue", "open", queue="missing", cpu="1", memory=""))
    cluster.settle()
    assert kit.condition(_wl(cluster, "no-match", "closed"), "QuotaReserved")["message"] == (
        "Workload namespace doesn't match ClusterQueue selector")
    assert kit.condition(_wl(cluster, "no-queue", "open"), "QuotaReserved")["message"] == (
        "LocalQueue missing is terminating or missing")


def test_deployment_pods_wait_for_their_own_workloads(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "1", "memory": "4Gi"})])
    cluster.controllers["kueue"].enabled = False
    cluster.store.create(kit.deployment("web", replicas=3, queue="lq", cpu="500m", memory="512Mi"))
    cluster.settle()
    pods = cluster.store.list("v1", "Pod", "team")
    assert len(pods) == 3
    assert all(p["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}] for p in pods)
    assert all(kit.condition(p, "PodScheduled")["reason"] == "SchedulingGated" for p in pods)
    cluster.controllers["kueue"].enabled = True
    cluster.settle()
    workloads = cluster.store.list(API, "Workload", "team")
    assert len(workloads) == 3 and all(w["metadata"]["name"].startswith("pod-web-") for w in workloads)
    admitted = [w for w in workloads if (kit.condition(w, "Admitted") or {}).get("status") == "True"]
    assert len(admitted) == 2  # 2 × 500m fit in 1 cpu
    running = [p for p in cluster.store.list("v1", "Pod", "team") if p["spec"].get("nodeName")]
    assert len(running) == 2
    status = cluster.store.get("apps/v1", "Deployment", "team", "web")["status"]
    assert status["replicas"] == 3 and status["readyReplicas"] == 2


def test_kueue_admitted_deployment_pod_lands_on_the_flavor_node(cluster: SimCluster) -> None:
    """The pod is ungated and gets the flavor's nodeLabels and tolerations in one update (Kubernetes >= 1.27
    lets a gated pod gain node selector entries), so it runs where the flavor says."""
    taint = {"key": "dedicated", "value": "serving", "effect": "NoSchedule"}
    node = cluster.store.get("v1", "Node", None, "gpu-1")
    node["spec"]["taints"] = [taint]
    cluster.store.update(node)
    kit.queue_setup(cluster, flavors=[
        kit.Flavor("serving", {"cpu": "4", "memory": "16Gi"}, node_labels={"gpu-class": "a100"},
                   tolerations=[{"key": "dedicated", "operator": "Equal", "value": "serving",
                                 "effect": "NoSchedule"}]),
    ])
    cluster.store.create(kit.deployment("web", replicas=1, queue="lq", cpu="500m", memory="512Mi"))
    cluster.settle()
    (pod,) = cluster.store.list("v1", "Pod", "team")
    (wl,) = cluster.store.list(API, "Workload", "team")
    assert kit.condition(wl, "Admitted")["status"] == "True"
    assert "schedulingGates" not in pod["spec"]
    assert pod["spec"]["nodeSelector"] == {"gpu-class": "a100"}
    assert {"key": "dedicated", "operator": "Equal", "value": "serving", "effect": "NoSchedule"} in \
        pod["spec"]["tolerations"]
    assert pod["spec"]["nodeName"] == "gpu-1"


def test_deleting_a_job_removes_its_workload_and_frees_quota(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "4", "memory": "16Gi"})])
    from tau_testing.sim.scripts import PodScript, scripts_of

    scripts_of(cluster).add({}, PodScript(run_seconds=600))
    cluster.store.create(kit.job("holder", cpu="4", parallelism=2, completions=2))
    cluster.store.create(kit.job("waiter", cpu="2"))
    cluster.settle()
    holder = _wl(cluster, "holder")
    assert holder["spec"]["podSets"][0]["count"] == 2
    assert holder["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert kit.condition(holder, "QuotaReserved")["status"] == "False"  # 2 × 4 cpu > 4
    cluster.store.delete("batch/v1", "Job", "team", "waiter")
    cluster.store.delete("batch/v1", "Job", "team", "holder")
    cluster.settle()
    assert cluster.store.list(API, "Workload", "team") == []
    status = cluster.store.get(API, "ClusterQueue", None, "cq")["status"]
    assert (status["pendingWorkloads"], status["reservingWorkloads"]) == (0, 0)


def test_generic_eviction_api(cluster: SimCluster) -> None:
    from tau_testing.sim.controllers import evict
    from tau_testing.sim.scripts import PodScript, scripts_of

    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "4", "memory": "16Gi"})])
    scripts_of(cluster).add({}, PodScript(run_seconds=600))
    cluster.store.create(kit.job("slowpoke", cpu="1"))
    cluster.advance(1)
    name = _wl(cluster, "slowpoke")["metadata"]["name"]
    evict(cluster, "team", name, reason="PodsReadyTimeout", message=f"Exceeded the PodsReady timeout team/{name}",
          requeue=False)
    cluster.settle()
    wl = _wl(cluster, "slowpoke")
    assert kit.condition(wl, "Evicted")["reason"] == "PodsReadyTimeout"
    assert kit.condition(wl, "Preempted") is None
    assert "EvictedDueToPodsReadyTimeout" in reasons(cluster, wl)
    assert wl["spec"]["active"] is False
    assert kit.condition(wl, "Requeued")["reason"] == "Deactivated"
    with pytest.raises(LookupError):
        evict(cluster, "team", "no-such-workload")


def test_taugrid_baseline_queue_keeps_cpu_work_off_gpu_quota(cluster: SimCluster) -> None:
    """One resource group; the CPU flavor has zero GPU quota, the GPU flavor an admission taint."""
    gpu_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    kit.queue_setup(cluster, flavors=[
        kit.Flavor("taugrid-default-cpu", {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "0"},
                   node_labels={"agentpool": "cpu"}),
        kit.Flavor("taugrid-default-gpu", {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "4"},
                   node_labels={"gpu-class": "a100"}, node_taints=[gpu_taint]),
    ])
    cluster.store.create(kit.job("cpu-big", cpu="3"))
    gpu_job = kit.job("gpu", cpu="4", memory="8Gi", gpu=1)
    gpu_job["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    cluster.store.create(gpu_job)
    cluster.settle()
    assert kit.condition(_wl(cluster, "cpu-big"), "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor taugrid-default-cpu, "
        "request > maximum capacity (3 > 2), untolerated taint {nvidia.com/gpu present NoSchedule <nil>} in flavor "
        "taugrid-default-gpu")
    wl = _wl(cluster, "gpu")
    assert set(wl["status"]["admission"]["podSetAssignments"][0]["flavors"].values()) == {"taugrid-default-gpu"}
    (pod,) = cluster.store.list("v1", "Pod", "team", label_selector="job-name=gpu")
    assert pod["spec"]["nodeSelector"] == {"gpu-class": "a100"} and pod["spec"]["nodeName"] == "gpu-1"


def test_webhook_suspends_queued_jobs_at_creation(cluster: SimCluster) -> None:
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "4", "memory": "16Gi"})])
    created = cluster.store.create(kit.job("queued", cpu="1"))
    assert created["spec"]["suspend"] is True  # mutated on the way in, before any controller ran
    assert cluster.store.create(kit.job("free", queue=None))["spec"]["suspend"] is False
    bare = cluster.store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "bare", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}})
    assert bare["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    deployment = cluster.store.create(kit.deployment("web", queue="lq"))
    assert deployment["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    cluster.controllers["kueue"].enabled = False
    assert cluster.store.create(kit.job("unmanaged", cpu="1"))["spec"]["suspend"] is False
    cluster.controllers["kueue"].enabled = True
    cluster.settle()
    bare_wl = [w for w in cluster.store.list(API, "Workload", "team") if w["metadata"]["name"].startswith("pod-bare-")]
    assert bare_wl and kit.condition(bare_wl[0], "Admitted")["status"] == "True"
    assert "schedulingGates" not in cluster.store.get("v1", "Pod", "team", "bare")["spec"]
