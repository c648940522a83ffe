"""RayService and Deployment rendering (reference §3.10), schema-checked against the KubeRay CRD and the
Kubernetes schemas, with goldens (``TAU_UPDATE_GOLDENS=1`` rewrites them)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_support import IMAGE, profile, request

from tau_core import keys
from tau_core.errors import ConfigError, UsageError
from tau_core.plugins import get_host
from tau_serve.renderers.deployment import render_deployment
from tau_serve.renderers.rayservice import load_serve_config, render_rayservice
from tau_serve.spec import (
    Autoscaling,
    Mount,
    NamedImage,
    Probes,
    SecretEnv,
    Volume,
    checkpoint_path,
    parse_mounts,
    parse_volumes,
)
from tau_testing.k8s_schema import validate_objects

GOLDEN = Path(__file__).parent / "golden"


def golden(name: str, objects: list[dict[str, Any]]) -> None:
    validate_objects(objects)
    path = GOLDEN / f"{name}.yaml"
    text = yaml.safe_dump_all(objects, sort_keys=False)
    if os.environ.get("TAU_UPDATE_GOLDENS") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} differs; rerun with TAU_UPDATE_GOLDENS=1 and review the diff"


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return list(pod.get("initContainers", [])) + list(pod["containers"])


def test_renderers_are_registered_through_the_hook() -> None:
    registry = get_host().registry("renderers")
    assert registry["RayService"].load() is render_rayservice
    assert registry["Deployment"].load() is render_deployment


def test_rayservice_single_worker_golden() -> None:
    objects = render_rayservice(request(model_path="/data/checkpoints/llm", runtime_pip=("vllm==0.6.0",),
                                        env=(("LOG_LEVEL", "info"),), app_args={"max_tokens": 64}))
    golden("rayservice-single", objects)
    spec = objects[0]["spec"]
    assert "workerGroupSpecs" not in spec["rayClusterConfig"]
    head = spec["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
    assert head["containers"][0]["resources"]["limits"][keys.NVIDIA_GPU] == "1"
    config = load_serve_config(spec["serveConfigV2"])
    app = config["applications"][0]
    assert app["import_path"] == "serve:app" and app["args"] == {"max_tokens": 64}
    assert app["runtime_env"] == {"pip": ["vllm==0.6.0"],
                                  "env_vars": {"LOG_LEVEL": "info", "TAU_MODEL_PATH": "/data/checkpoints/llm"}}
    assert app["deployments"] == [{"name": "default", "num_replicas": 1}]


def test_rayservice_multi_node_golden_has_cpu_head_and_fixed_gpu_workers() -> None:
    prof = profile("serve-4x", gpus=2, workers=4, placement="multi-node-nccl")
    objects = render_rayservice(request(prof=prof, shm_size="16Gi",
                                        autoscaling=Autoscaling(min_replicas=2, max_replicas=6, target_qps=0)))
    golden("rayservice-multinode", objects)
    cluster = objects[0]["spec"]["rayClusterConfig"]
    head = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert keys.NVIDIA_GPU not in head["resources"]["limits"]
    (group,) = cluster["workerGroupSpecs"]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 4
    worker = group["template"]["spec"]
    assert worker["containers"][0]["resources"]["limits"][keys.NVIDIA_GPU] == "2"
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}} in worker["volumes"]
    auto = load_serve_config(objects[0]["spec"]["serveConfigV2"])["applications"][0]["deployments"][0]
    assert auto["autoscaling_config"] == {"min_replicas": 2, "max_replicas": 6,
                                          "target_num_ongoing_requests_per_replica": 5, "downscale_delay_s": 300}


def test_deployment_with_service_probes_hpa_init_and_sidecar_golden() -> None:
    objects = render_deployment(request(
        prof=profile(gpus=0), deployment_ports=(8080,), service_port=80, command=("python", "-m", "server"),
        args=("--port", "8080"), probes=Probes(readiness_path="/ready", startup_path="/started",
                                               liveness_path="/live", startup_failure_threshold=30),
        autoscaling=Autoscaling(min_replicas=2, max_replicas=5, target_qps=20),
        inits=(NamedImage("fetch", IMAGE),), sidecars=(NamedImage("proxy", IMAGE),),
        volumes=(Volume("cache", "emptyDir"), Volume("cfg", "configMap", "llm-config")),
        mounts=(Mount("cache", "/cache"), Mount("cfg", "/etc/llm", True)), model_path="/data/projects/p/m"))
    golden("deployment-full", objects)
    deployment, service, hpa = objects
    assert [o["kind"] for o in objects] == ["Deployment", "Service", "HorizontalPodAutoscaler"]
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert pod["metadata"]["labels"][keys.KUEUE_MANAGED] == "true"
    assert pod["metadata"]["annotations"][keys.KUEUE_POD_SUSPENDING_PARENT] == "deployment"
    main = pod["spec"]["containers"][0]
    assert main["name"] == "main" and main["readinessProbe"] == {"httpGet": {"path": "/ready", "port": 8080}}
    assert main["startupProbe"]["failureThreshold"] == 30
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]
    assert hpa["spec"]["minReplicas"] == 2 and hpa["spec"]["maxReplicas"] == 5
    assert hpa["spec"]["metrics"][1]["pods"]["metric"]["name"] == "http_requests_per_second"


@pytest.mark.parametrize("render", [render_rayservice, render_deployment])
def test_every_container_is_restricted_and_queue_is_stamped(render: Any) -> None:
    objects = render(request(prof=profile(gpus=0), inits=(NamedImage("fetch", IMAGE),)))
    workload = objects[0]
    assert workload["metadata"]["labels"][keys.KUEUE_QUEUE_NAME] == "jobqueue"
    pods = ([workload["spec"]["template"]["spec"]] if workload["kind"] == "Deployment" else
            [workload["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]])
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        for container in containers(pod):
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
            assert sc["runAsNonRoot"] is True and sc["seccompProfile"] == {"type": "RuntimeDefault"}


@pytest.mark.parametrize("render", [render_rayservice, render_deployment])
def test_missing_queue_is_an_error(render: Any) -> None:
    req = request()
    req = type(req)(spec=req.spec, context=req.context.evolve(queue=None))
    with pytest.raises(ConfigError, match="Kueue LocalQueue is required"):
        render(req)


def test_env_secret_is_a_secret_key_ref_and_redacted_in_client_dry_run() -> None:
    secrets = (SecretEnv("HF_TOKEN", "hf-secret", "token"),)
    live = render_deployment(request(env_secrets=secrets))[0]
    env = live["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-secret", "key": "token"}}},
                   {"name": keys.ENV_CLUSTER_JOB, "value": "1"}]
    shown = render_rayservice(request(env_secrets=secrets, dry_run="client"))[0]
    text = yaml.safe_dump(shown)
    assert "hf-secret" not in text and "<redacted>" in text
    assert "HF_TOKEN" not in load_serve_config(shown["spec"]["serveConfigV2"]).__repr__()


def test_deployment_requires_single_worker_profile() -> None:
    with pytest.raises(ConfigError, match="single-worker profile"):
        render_deployment(request(prof=profile(workers=2)))


@pytest.mark.parametrize(("given", "expected"), [
    ("llm/step-100", "/data/checkpoints/llm/step-100"),
    ("projects/aurora/runs/ft/artifacts", "/data/projects/aurora/runs/ft/artifacts"),
    ("/data/checkpoints/x", "/data/checkpoints/x"),
])
def test_checkpoint_path_rules(given: str, expected: str) -> None:
    assert checkpoint_path(given) == expected


@pytest.mark.parametrize("given", ["../etc", "llm/../../x", "/data/../etc/passwd", "/etc/passwd", ""])
def test_checkpoint_path_escapes_are_usage_errors(given: str) -> None:
    with pytest.raises(UsageError, match="--checkpoint"):
        checkpoint_path(given)


def test_volume_and_mount_names_must_match_and_tau_data_is_reserved() -> None:
    volumes = parse_volumes(("cache=emptyDir", "model=pvc:models"))
    assert parse_mounts(("cache:/cache", "model:/models:ro"), volumes)[1] == Mount("model", "/models", True)
    with pytest.raises(UsageError, match='--mount "other" does not match any --volume'):
        parse_mounts(("other:/x",), volumes)
    with pytest.raises(UsageError, match="tau-data"):
        parse_volumes(("tau-data=emptyDir",))
    with pytest.raises(UsageError, match="--volume"):
        parse_volumes(("bad=hostPath:/",))


@pytest.mark.parametrize("flag", ["env", "env_secrets"])
def test_the_in_job_marker_is_reserved(flag: str) -> None:
    value: Any = ((keys.ENV_CLUSTER_JOB, "0"),) if flag == "env" else (SecretEnv(keys.ENV_CLUSTER_JOB, "s", "k"),)
    for render in (render_rayservice, render_deployment):
        with pytest.raises(ConfigError, match=f"--env {keys.ENV_CLUSTER_JOB} is reserved"):
            render(request(**{flag: value}))
