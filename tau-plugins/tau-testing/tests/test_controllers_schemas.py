"""Every Kueue and KubeRay object the controllers write (status included) matches its upstream CRD schema."""

from __future__ import annotations

import copy

from tau_testing.sim import SimCluster
from tau_testing.sim.controllers import add_node, install_default_controllers, kit, preempt, workloads_for
from tau_testing.sim.schema import validate_custom
from tau_testing.sim.scripts import PodScript, scripts_of


def test_written_objects_match_the_crd_schemas() -> None:
    cluster = SimCluster(clock="fake")
    install_default_controllers(cluster)
    add_node(cluster, "cpu-1", cpu="16", memory="64Gi")
    add_node(cluster, "gpu-1", cpu="32", memory="128Gi", gpu=4, labels={"gpu-class": "a100"})
    kit.queue_setup(cluster, flavors=[
        kit.Flavor("a100", {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"}, node_labels={"gpu-class": "a100"}),
    ], priority_classes={"high": 1000})
    scripts_of(cluster).add({"job-name": "long"}, PodScript(run_seconds=600))
    cluster.store.create(kit.job("long", cpu="2", priority_class="high"))
    cluster.store.create(kit.job("short", cpu="1"))
    cluster.store.create(kit.job("too-big", cpu="20"))
    cluster.store.create(kit.rayjob("ray", workers=1, worker_gpu=1))
    cluster.store.create(kit.rayservice("serve", workers=1))
    cluster.store.create(kit.deployment("web", replicas=1, queue="lq"))
    cluster.advance(5)
    (wl,) = workloads_for(cluster, cluster.store.get("batch/v1", "Job", "team", "long"))
    preempt(cluster, "team", wl["metadata"]["name"], requeue=False)
    cluster.advance(5)

    checked = 0
    for obj in cluster.store.all_objects():
        group = obj["apiVersion"].split("/")[0]
        if group not in ("kueue.x-k8s.io", "ray.io"):
            continue
        rtype = cluster.store.types.by_kind(obj["apiVersion"], obj["kind"])
        assert rtype is not None and rtype.schema is not None
        unknown: list[str] = []
        causes = validate_custom(rtype.schema, copy.deepcopy(obj), unknown)
        where = f"{obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
        assert causes == [], (where, causes)
        assert unknown == [], (where, unknown)
        checked += 1
    kinds = {o["kind"] for o in cluster.store.all_objects() if o["apiVersion"].startswith(("kueue", "ray"))}
    assert {"Workload", "ClusterQueue", "LocalQueue", "RayJob", "RayCluster", "RayService"} <= kinds
    assert checked >= 10


def test_written_core_objects_match_the_kubernetes_schemas() -> None:
    import kubernetes_validate

    cluster = SimCluster(clock="fake")
    install_default_controllers(cluster)
    add_node(cluster, "cpu-1", cpu="16", memory="64Gi")
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "8", "memory": "32Gi"})])
    scripts_of(cluster).add({"job-name": "evicted"}, PodScript(run_seconds=60, evict_after=2))
    scripts_of(cluster).add({"job-name": "bad"}, PodScript(pull_error="ErrImagePull", pull_seconds=1))
    scripts_of(cluster).add({"app": "web"}, PodScript(run_seconds=3, exit_code=1))
    cluster.store.create(kit.job("ok", cpu="1", parallelism=2, completions=2, indexed=True))
    cluster.store.create(kit.job("evicted", cpu="1", backoff_limit=0))
    cluster.store.create(kit.job("bad", cpu="1"))
    cluster.store.create(kit.job("unschedulable", queue=None, node_selector={"pool": "none"}))
    cluster.store.create(kit.deployment("web", replicas=1))
    cluster.store.create(kit.rayjob("ray", workers=1))
    cluster.advance(20)

    checked = 0
    for obj in cluster.store.all_objects():
        if obj["kind"] not in ("Pod", "Job", "Event", "Service", "Deployment", "Node"):
            continue
        clean = copy.deepcopy(obj)
        kubernetes_validate.validate(clean, "1.30.0", strict=True)
        checked += 1
    assert checked > 20


def test_runs_are_deterministic() -> None:
    def run() -> list[dict]:
        cluster = SimCluster(clock="fake")
        install_default_controllers(cluster)
        add_node(cluster, "cpu-1", cpu="8", memory="32Gi")
        kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": "4", "memory": "16Gi"})])
        scripts_of(cluster).add({"job-name": "b"}, PodScript(pull_seconds=2, run_seconds=3, exit_code=1))
        for name in ("a", "b", "c"):
            cluster.store.create(kit.job(name, cpu="2", backoff_limit=1))
        cluster.store.create(kit.rayjob("r", workers=1))
        cluster.store.create(kit.deployment("web", replicas=2))
        cluster.advance(30)
        objects = sorted(cluster.store.all_objects(), key=lambda o: (o["kind"], o["metadata"].get("namespace", ""),
                                                                     o["metadata"]["name"]))
        logs = [cluster.logs.read(p["metadata"]["namespace"], p["metadata"]["name"], c["name"], timestamps=True)
                for p in objects if p["kind"] == "Pod" for c in p["spec"]["containers"]]
        return [*objects, {"logs": logs}]

    assert run() == run()
