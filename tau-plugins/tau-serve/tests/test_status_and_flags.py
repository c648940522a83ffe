"""Status phases and hints, and the deploy flag checks that need no cluster."""

from __future__ import annotations

from typing import Any

import pytest

from tau_core.errors import UsageError
from tau_serve.options import DeployArgs, check_flags
from tau_serve.renderers.rayservice import dump_serve_config
from tau_serve.status import deployment_status, pod_hints, rayservice_status

IMAGE = "registry.example.com/serve/llm@sha256:" + "a" * 64


def rayservice(status: dict[str, Any]) -> dict[str, Any]:
    config = dump_serve_config({"applications": [{"name": "default", "deployments": [
        {"name": "default", "num_replicas": 3}]}]})
    return {"metadata": {"name": "llm", "namespace": "ns", "creationTimestamp": "2026-12-01T00:00:00Z"},
            "spec": {"serveConfigV2": config}, "status": status}


def test_rayservice_phases() -> None:
    assert rayservice_status(rayservice({})).phase == "Pending"
    ready = rayservice_status(rayservice({
        "serviceStatus": "Running", "numServeEndpoints": 2,
        "conditions": [{"type": "Ready", "status": "True"}],
        "activeServiceStatus": {"applicationStatuses": {"default": {"status": "RUNNING"}}}}))
    assert ready.ready and ready.endpoints == 2 and ready.replicas == 3
    sick = rayservice_status(rayservice({
        "serviceStatus": "Running", "numServeEndpoints": 2, "conditions": [{"type": "Ready", "status": "True"}],
        "activeServiceStatus": {"applicationStatuses": {"default": {"status": "DEPLOY_FAILED"}}}}))
    assert not sick.ready and sick.phase == "Unhealthy"
    assert sick.hints == ("unhealthy Serve application: default is DEPLOY_FAILED",)


def test_deployment_phases_and_row() -> None:
    obj = {"metadata": {"name": "web", "namespace": "ns", "generation": 2, "creationTimestamp": "2026-12-01T00:00:00Z"},
           "spec": {"replicas": 3}, "status": {"observedGeneration": 2, "readyReplicas": 1, "updatedReplicas": 3,
                                                "availableReplicas": 1}}
    status = deployment_status(obj)
    assert not status.ready and status.phase == "Progressing"
    assert status.row()[:4] == ("web", "1/3", "3", "1")


def test_pod_hints_name_admission_and_image_pull() -> None:
    gated = {"metadata": {"name": "p1", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
             "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}}
    pulling = {"metadata": {"name": "p2"}, "spec": {}, "status": {"containerStatuses": [
        {"name": "main", "image": "x@sha256:1", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}}
    hints = pod_hints([gated, pulling])
    assert hints[0].startswith("pending admission: pod p1") and "LocalQueue q" in hints[0]
    assert hints[1].startswith("image pull: pod p2")


def args(**changes: Any) -> DeployArgs:
    return DeployArgs(**{"name": "llm", "profile": "p", "image": IMAGE, "namespace": "ns", **changes})


@pytest.mark.parametrize(("changes", "message"), [
    ({"replicas": 2, "max_replicas": 3}, "--max-replicas and --replicas are mutually exclusive"),
    ({"target_qps": 3}, "--target-qps requires --max-replicas to enable autoscaling"),
    ({"checkpoint": "x", "from_finetune": "ft"}, "--checkpoint conflicts with"),
    ({"from_finetune": "ft", "from_model": "m:prod"}, "finetune checkpoint refs conflict with model refs"),
    ({"kind": "deployment", "legacy_args": "a b", "args": ("c",)}, "--arg conflicts with --args"),
    ({"command": ("python",)}, "--command and --arg require --kind=deployment"),
    ({"kind": "deployment", "shm_size": "1Gi"}, "--shm-size requires --kind=rayservice"),
    ({"snapshot": "s.yaml", "dry_run": "server"}, "--workload-profile-snapshot requires --dry-run=client"),
    ({"from_model": "m:prod", "dry_run": "client"}, "--from-model/--model-ref require reading"),
    ({"kind": "deployment", "readiness_path": "/r"}, "need a port"),
    ({"kind": "deployment", "runtime_pip": ("x",)}, "--runtime-pip requires --kind=rayservice"),
    ({"image": "python:3.12"}, '--image "python:3.12" is not pinned'),
    ({"checkpoint": "a/../../b"}, "--checkpoint"),
    ({"volumes": ("v=emptyDir",), "mounts": ("w:/x",)}, '--mount "w" does not match any --volume'),
    ({"env_secrets": ("TOKEN=plain",)}, "--env-secret"),
    ({"nodes": 1}, "--nodes must be at least 2"),
])
def test_conflicts_are_usage_errors_naming_the_flag(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=None) as caught:
        check_flags(args(**changes))
    assert message in caught.value.message
    assert caught.value.exit_code == 2


def catalog(*profiles: dict[str, Any]) -> Any:
    from tau_core.config.profiles import ProfileCatalog, profile_set_hash

    items = [dict(p) for p in profiles]
    return ProfileCatalog(1, profile_set_hash(items), items, "snapshot", "test")


def profile(name: str, **fields: Any) -> dict[str, Any]:
    base = {"name": name, "applicability": {"teams": [], "lanes": [], "namespaces": []}, "gpusPerWorker": 1,
            "workerCount": 1, "mode": "fixed", "placement": "independent", "executionTarget": "singleCluster",
            "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}]}
    return {**base, **fields}


def test_profile_authorization_is_fail_closed() -> None:
    from tau_core.errors import ConfigError
    from tau_serve.profiles import authorize

    cat = catalog(profile("serve"), profile("other-ns", applicability={"namespaces": ["prod"]}),
                  profile("two-teams", applicability={"teams": ["a", "b"]}),
                  profile("lane", applicability={"lanes": ["serving"]}),
                  profile("unready", conditions=[{"type": "Ready", "status": "False", "observedGeneration": 1}]))
    assert authorize(cat, "serve", "ns", "rayservice")["name"] == "serve"
    assert authorize(cat, "lane", "ns", "rayservice")["name"] == "lane"
    for name, message in (("missing", "is not in"), ("other-ns", "does not authorize"),
                          ("two-teams", "several teams or lanes"), ("unready", "is not Ready")):
        with pytest.raises(ConfigError, match=message):
            authorize(cat, name, "ns", "rayservice")


def test_multi_node_rayservice_and_deployment_profile_rules() -> None:
    from tau_core.errors import ConfigError
    from tau_serve.profiles import check_serving_shape

    good = profile("mn", workerCount=4, gpusPerWorker=2, placement="same-network-domain", defaultLocalQueue="q")
    check_serving_shape(good, "rayservice")
    with pytest.raises(ConfigError, match="single-worker profile"):
        check_serving_shape(good, "deployment")
    bad = profile("mn", workerCount=4, gpusPerWorker=0, placement="independent", mode="elastic",
                  executionTarget="multiKueue", defaultLocalQueue="q")
    with pytest.raises(ConfigError) as caught:
        check_serving_shape(bad, "rayservice")
    for part in ("has mode elastic", "has placement independent", "targets multiKueue", "has 0 GPUs per worker"):
        assert part in caught.value.message


def test_profile_queue_bindings_must_include_the_namespace_queue() -> None:
    from tau_core.errors import ConfigError
    from tau_serve.profiles import check_queue

    bound = profile("p", defaultLocalQueue="jobqueue", clusterQueues=["tau-cq"],
                    localQueues=[{"namespace": "ns", "name": "jobqueue", "clusterQueue": "tau-cq"}])
    check_queue(bound, "ns", "jobqueue", "tau-cq")
    check_queue(profile("free"), "ns", "anything", "any-cq")  # a profile without bindings does not restrict
    for namespace, queue, cq, message in (("ns", "other", "tau-cq", 'bound to LocalQueue "jobqueue"'),
                                          ("ns2", "jobqueue", "tau-cq", "among its localQueues"),
                                          ("ns", "jobqueue", "gpu-cq", "admits through ClusterQueues")):
        with pytest.raises(ConfigError, match=message):
            check_queue(bound, namespace, queue, cq)
