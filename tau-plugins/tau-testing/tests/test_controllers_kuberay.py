"""KubeRay simulation: RayJob lifecycle through Kueue, RayCluster pods and Service, RayService, Deployments."""

from __future__ import annotations

import pytest

from tau_testing.sim import SimCluster
from tau_testing.sim.controllers import add_node, install_default_controllers, kit, workloads_for
from tau_testing.sim.controllers.events import reasons
from tau_testing.sim.controllers.kueue import API
from tau_testing.sim.scripts import PodScript, scripts_of


@pytest.fixture
def cluster() -> SimCluster:
    c = SimCluster(clock="fake")
    install_default_controllers(c)
    add_node(c, "cpu-1", cpu="16", memory="64Gi")
    add_node(c, "gpu-1", cpu="32", memory="128Gi", gpu=4, labels={"gpu-class": "a100"})
    kit.queue_setup(c, flavors=[kit.Flavor("default-flavor", {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"})])
    return c


def _rayjob(cluster: SimCluster, name: str) -> dict:
    return cluster.store.get("ray.io/v1", "RayJob", "team", name)


def test_rayjob_full_lifecycle(cluster: SimCluster) -> None:
    scripts_of(cluster).add({"app": "tune"}, PodScript(pull_seconds=2, run_seconds=6, log_every=2,
                                                       logs=["trial 1 done", "trial 2 done", "best loss 0.1"]),
                            kind="RayJob")
    manifest = kit.rayjob("tune", workers=2, worker_gpu=1, ttl_seconds_after_finished=30)
    manifest["metadata"]["labels"]["app"] = "tune"
    cluster.store.create(manifest)
    cluster.controllers["kuberay"].enabled = False
    cluster.settle()
    rayjob = _rayjob(cluster, "tune")
    (wl,) = workloads_for(cluster, rayjob)
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("head", 1), ("workers", 2), ("submitter", 1)]
    assert wl["metadata"]["name"].startswith("rayjob-tune-")
    assert kit.condition(wl, "Admitted")["status"] == "True"
    assert rayjob["spec"]["suspend"] is False

    cluster.controllers["kuberay"].enabled = True
    cluster.settle()
    rayjob = _rayjob(cluster, "tune")
    status = rayjob["status"]
    rc_name = status["rayClusterName"]
    assert rc_name.startswith("tune-")
    assert status["jobDeploymentStatus"] == "Running" and status["jobStatus"] == "PENDING"
    assert status["jobId"].startswith("tune-")
    assert status["dashboardURL"] == f"{rc_name}-head-svc.team.svc.cluster.local:8265"
    rc = cluster.store.get("ray.io/v1", "RayCluster", "team", rc_name)
    assert rc["status"]["state"] == "ready"
    assert rc["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    pods = cluster.store.list("v1", "Pod", "team", label_selector=f"ray.io/cluster={rc_name}")
    kinds = sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods)
    assert kinds == ["head", "worker", "worker"]
    head = next(p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "head")
    assert head["metadata"]["name"].startswith(f"{rc_name}-head-")
    assert head["metadata"]["labels"]["ray.io/group"] == "headgroup"
    workers = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    assert all(p["metadata"]["name"].startswith(f"{rc_name}-workers-worker-") for p in workers)
    assert all(p["spec"]["nodeName"] == "gpu-1" for p in workers)
    svc = cluster.store.get("v1", "Service", "team", f"{rc_name}-head-svc")
    assert svc["spec"]["selector"] == {"ray.io/cluster": rc_name, "ray.io/node-type": "head"}
    assert rc["status"]["head"]["serviceName"] == f"{rc_name}-head-svc"

    cluster.advance(3)
    assert _rayjob(cluster, "tune")["status"]["jobStatus"] == "RUNNING"
    cluster.advance(6)
    status = _rayjob(cluster, "tune")["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    assert status["endTime"] == "2026-01-01T00:00:08Z"
    assert status["succeeded"] == 1
    lines = cluster.logs.read("team", head["metadata"]["name"], "ray-driver-log-offload", timestamps=True)
    assert [line.split(" ", 1)[1] for line in lines] == ["trial 1 done", "trial 2 done", "best loss 0.1"]
    assert [line[:19] for line in lines] == ["2026-01-01T00:00:02", "2026-01-01T00:00:04", "2026-01-01T00:00:06"]
    assert cluster.logs.is_terminated("team", head["metadata"]["name"], "ray-driver-log-offload")
    (wl,) = workloads_for(cluster, _rayjob(cluster, "tune"))
    assert kit.condition(wl, "Finished")["reason"] == "Succeeded"

    # shutdownAfterJobFinishes with a 30 s TTL: the cluster and its pods go away after the TTL
    assert cluster.store.get("ray.io/v1", "RayCluster", "team", rc_name) is not None
    cluster.advance(31)
    assert cluster.store.get("ray.io/v1", "RayCluster", "team", rc_name) is None
    assert cluster.store.list("v1", "Pod", "team", label_selector=f"ray.io/cluster={rc_name}") == []
    assert "DeletedRayCluster" in reasons(cluster, _rayjob(cluster, "tune"))
    cq = cluster.store.get(API, "ClusterQueue", None, "cq")["status"]
    assert cq["admittedWorkloads"] == 0


def test_rayjob_waits_in_suspended_state_for_quota(cluster: SimCluster) -> None:
    cluster.store.create(kit.rayjob("big", workers=4, worker_gpu=2))
    cluster.settle()
    status = _rayjob(cluster, "big")["status"]
    assert status["jobDeploymentStatus"] == "Suspended"
    (wl,) = workloads_for(cluster, _rayjob(cluster, "big"))
    assert kit.condition(wl, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set workers: insufficient quota for nvidia.com/gpu in flavor default-flavor, "
        "request > maximum capacity (8 > 4)")
    assert cluster.store.list("ray.io/v1", "RayCluster", "team") == []


def test_rayjob_failure_and_eviction(cluster: SimCluster) -> None:
    scripts_of(cluster).add("^broken$", PodScript(run_seconds=2, exit_code=1, logs=["ValueError: bad"]),
                            kind="RayJob")
    cluster.store.create(kit.rayjob("broken", workers=1, shutdown_after_job_finishes=False))
    cluster.advance(5)
    status = _rayjob(cluster, "broken")["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Failed", "FAILED")
    assert status["message"] == "Job entrypoint command failed with exit code 1"
    assert cluster.store.get("ray.io/v1", "RayCluster", "team", status["rayClusterName"]) is not None

    from tau_testing.sim.controllers import preempt

    scripts_of(cluster).add("^victim$", PodScript(run_seconds=600), kind="RayJob")
    cluster.store.create(kit.rayjob("victim", workers=1))
    cluster.advance(2)
    (wl,) = workloads_for(cluster, _rayjob(cluster, "victim"))
    old_cluster = _rayjob(cluster, "victim")["status"]["rayClusterName"]
    preempt(cluster, "team", wl["metadata"]["name"], requeue=False)
    cluster.settle()
    rayjob = _rayjob(cluster, "victim")
    assert rayjob["spec"]["suspend"] is True
    assert rayjob["status"]["jobDeploymentStatus"] == "Suspended"
    assert cluster.store.get("ray.io/v1", "RayCluster", "team", old_cluster) is None


def test_rayservice_reports_serve_status(cluster: SimCluster) -> None:
    cluster.store.create(kit.rayservice("llm", apps=("default", "chat"), workers=1))
    cluster.settle()
    service = cluster.store.get("ray.io/v1", "RayService", "team", "llm")
    status = service["status"]
    assert status["serviceStatus"] == "Running"
    active = status["activeServiceStatus"]
    assert active["rayClusterName"].startswith("llm-raycluster-")
    assert active["applicationStatuses"]["chat"] == {"status": "RUNNING", "serveDeploymentStatuses": {
        "ChatDeployment": {"status": "HEALTHY"}}}
    assert kit.condition(service, "Ready")["status"] == "True"
    assert status["numServeEndpoints"] == 2
    assert cluster.store.get("v1", "Service", "team", "llm-serve-svc") is not None
    rc = cluster.store.get("ray.io/v1", "RayCluster", "team", active["rayClusterName"])
    (wl,) = workloads_for(cluster, rc)
    assert wl["metadata"]["name"].startswith("raycluster-llm-raycluster-")


def test_deployment_scales_and_reports_readiness(cluster: SimCluster) -> None:
    scripts_of(cluster).add({"app": "web"}, PodScript(run_seconds=None, pull_seconds=1, ready_after=2))
    cluster.store.create(kit.deployment("web", replicas=2))
    cluster.settle()
    status = cluster.store.get("apps/v1", "Deployment", "team", "web")["status"]
    assert status["replicas"] == 2 and "readyReplicas" not in status
    assert kit.condition({"status": status}, "Available")["status"] == "False"
    cluster.advance(4)
    status = cluster.store.get("apps/v1", "Deployment", "team", "web")["status"]
    assert status["readyReplicas"] == 2 and status["availableReplicas"] == 2
    assert kit.condition({"status": status}, "Available")["reason"] == "MinimumReplicasAvailable"
    pods = cluster.store.list("v1", "Pod", "team", label_selector="app=web")
    assert all(p["metadata"]["name"].startswith("web-") and "pod-template-hash" in p["metadata"]["labels"]
               for p in pods)

    deployment = cluster.store.get("apps/v1", "Deployment", "team", "web")
    deployment["spec"]["replicas"] = 4
    cluster.store.update(deployment)
    cluster.advance(4)
    assert cluster.store.get("apps/v1", "Deployment", "team", "web")["status"]["readyReplicas"] == 4
    deployment = cluster.store.get("apps/v1", "Deployment", "team", "web")
    deployment["spec"]["replicas"] = 1
    cluster.store.update(deployment)
    cluster.settle()
    assert len(cluster.store.list("v1", "Pod", "team", label_selector="app=web")) == 1
    assert cluster.store.get("apps/v1", "Deployment", "team", "web")["status"]["replicas"] == 1


def test_rayjob_backoff_limit_retries_on_a_new_cluster(cluster: SimCluster) -> None:
    book = scripts_of(cluster)
    book.add(lambda rj: rj["metadata"]["name"] == "flaky" and not (rj.get("status") or {}).get("failed"),
             PodScript(run_seconds=2, exit_code=1), kind="RayJob")
    book.add("^flaky$", PodScript(run_seconds=2), kind="RayJob")
    manifest = kit.rayjob("flaky", workers=1)
    manifest["spec"]["backoffLimit"] = 1
    cluster.store.create(manifest)
    cluster.advance(1)
    first_cluster = _rayjob(cluster, "flaky")["status"]["rayClusterName"]
    cluster.advance(10)
    status = _rayjob(cluster, "flaky")["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    assert (status["failed"], status["succeeded"]) == (1, 1)
    assert status["rayClusterName"] != first_cluster
    assert cluster.store.get("ray.io/v1", "RayCluster", "team", first_cluster) is None
    (wl,) = workloads_for(cluster, _rayjob(cluster, "flaky"))
    assert kit.condition(wl, "Finished")["reason"] == "Succeeded"
