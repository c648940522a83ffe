"""Job rendering: every rule of reference §3.1-§3.9 that applies to engine job, asserted on output.

Configs go through the real loader (``tau_core.config.load_config``) so the renderer sees the
same normalized config as ``tau run``; every rendered object is schema-checked.
"""

from __future__ import annotations

import base64
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tau_core import keys
from tau_core.config import load_config
from tau_core.errors import ConfigError
from tau_core.rendering import RenderRequest
from tau_run.renderers.job import render_job
from tau_testing.k8s_schema import validate_objects

PINNED = "registry.example.com/team/source@sha256:" + "a" * 64
OFFLOAD_IMAGE = "registry.example.com/taugrid-portal@sha256:" + "b" * 64

BASE = """
name: train
engine: job
entrypoint: train.py
runtime:
  image: python:3.12
compute:
  gpus: 0
policy:
  namespace: research
  queue: team-q
"""


def render(
    tmp_path: Path,
    text: str,
    *,
    context: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
    name: str | None = None,
    validate: bool = True,
) -> list[dict[str, Any]]:
    (tmp_path / "tau.yaml").write_text(textwrap.dedent(text))
    for rel, content in {"train.py": "print('hi')\n", **(files or {})}.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    cfg = load_config(tmp_path / "tau.yaml", name_override=name)
    request = RenderRequest(
        name=cfg.name or "train",
        config=cfg.normalized,
        context=context or {},
        sources=cfg.sources,
        config_hash=cfg.config_hash,
        submission_id="0123456789abcdef01234567",
        config_dir=tmp_path,
        env=env or {},
    )
    objects = render_job(request)
    if validate:
        validate_objects(objects)
    return objects


def pod(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["template"]["spec"]


def offload_sidecar(job: dict[str, Any]) -> dict[str, Any]:
    """The metrics-offload sidecar (a native sidecar: an init container that keeps running)."""
    return next(c for c in pod(job).get("initContainers") or [] if c["name"] == "metrics-offload")


def main(job: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod(job)["containers"] if c["name"] == "main")


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_basic_job_shape(tmp_path: Path) -> None:
    [job] = render(tmp_path, BASE + "experiment:\n  project: Tau Local\n  name: kind-smoke\n  group: local-kind\n")
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert job["metadata"]["name"] == "train" and job["metadata"]["namespace"] == "research"
    spec = job["spec"]
    assert spec["suspend"] is True and spec["backoffLimit"] == 0 and spec["ttlSecondsAfterFinished"] == 28800
    labels = job["metadata"]["labels"]
    assert labels[keys.KUEUE_QUEUE_NAME] == "team-q"
    assert labels[keys.MANAGED_BY] == "tau" and labels[keys.RUN_ID] == "train" and labels[keys.WORKLOAD_KIND] == "job"
    assert labels[keys.KUEUE_PRIORITY_CLASS] == "taugrid-default"
    assert labels[keys.STELLAR_PROJECT] == "tau-local"
    ann = job["metadata"]["annotations"]
    assert ann[keys.CAPTURE_VERSION] == "v1alpha1" and ann[keys.NAMESPACE] == "research"
    assert ann[keys.STELLAR_PROJECT_VALUE] == "Tau Local" and ann[keys.STELLAR_EXPERIMENT_ID] == "kind-smoke"
    assert ann[keys.SUBMISSION_ID] == "0123456789abcdef01234567"
    assert len(ann[keys.CONFIG_HASH]) == 64
    p = pod(job)
    assert p["restartPolicy"] == "Never" and p["terminationGracePeriodSeconds"] == 600
    assert p["priorityClassName"] == "taugrid-default"
    assert "nodeSelector" not in p and "tolerations" not in p
    assert pod(job) and job["spec"]["template"]["metadata"]["labels"][keys.RUN_ID] == "train"
    assert keys.KUEUE_QUEUE_NAME not in job["spec"]["template"]["metadata"]["labels"]


def test_local_script_payload_and_digest(tmp_path: Path) -> None:
    source = "import sys\nprint(sys.argv)\n"
    [job] = render(tmp_path, BASE + "execution:\n  configs:\n    lr: 0.1\n    epochs: 3\n", files={"train.py": source})
    env = env_of(main(job))
    assert base64.b64decode(env["TAU_SCRIPT_B64"]).decode() == source
    assert env["TAU_SCRIPT_SRC"] == "train.py"
    import hashlib

    assert job["metadata"]["annotations"][keys.SCRIPT_PAYLOAD_DIGEST] == hashlib.sha256(source.encode()).hexdigest()
    command = main(job)["command"]
    assert command[:2] == ["bash", "-c"]
    assert "python3 /tmp/tau-entrypoint.py --epochs=3 --lr=0.1" in command[2]


def test_shell_script_runs_as_run_sh_and_needs_a_shebang(tmp_path: Path) -> None:
    text = BASE.replace("train.py", "train.sh")
    [job] = render(tmp_path, text, files={"train.sh": "#!/usr/bin/env bash\necho hi\n"})
    assert "/tmp/run.sh" in main(job)["command"][2]
    with pytest.raises(ConfigError, match="no shebang"):
        render(tmp_path, text, files={"train.sh": "echo hi\n"})


def test_no_entrypoint_runs_image_entrypoint(tmp_path: Path) -> None:
    [job] = render(tmp_path, BASE.replace("entrypoint: train.py\n", ""))
    assert "command" not in main(job)
    assert keys.SCRIPT_PAYLOAD_DIGEST not in job["metadata"]["annotations"]


def test_ttl_override(tmp_path: Path) -> None:
    [job] = render(tmp_path, BASE + "run:\n  ttl_seconds_after_finished: 3600\n")
    assert job["spec"]["ttlSecondsAfterFinished"] == 3600


def test_gpu_class_label_selector_and_tolerations(tmp_path: Path) -> None:
    text = BASE.replace("gpus: 0", "gpus: 2") + "  gpu_class: a100-80gb\n  topology: single-node-nvlink\n"
    [job] = render(tmp_path, text)
    assert job["metadata"]["labels"][keys.GPU_CLASS] == "a100-80gb"
    assert job["spec"]["template"]["metadata"]["labels"][keys.GPU_CLASS] == "a100-80gb"
    p = pod(job)
    assert p["nodeSelector"] == {keys.GPU_CLASS: "a100-80gb"}
    assert {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in p["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in p["tolerations"]
    res = main(job)["resources"]
    assert res["requests"]["nvidia.com/gpu"] == "2" and res["limits"]["nvidia.com/gpu"] == "2"
    assert job["metadata"]["annotations"][keys.GPU_COUNT] == "2"
    pod_ann = job["spec"]["template"]["metadata"]["annotations"]
    assert pod_ann[keys.KUEUE_PODSET_REQUIRED_TOPOLOGY] == keys.HOSTNAME


def test_gpu_class_any_has_no_selector(tmp_path: Path) -> None:
    text = BASE.replace("gpus: 0", "gpus: 1") + "  gpu_class: any\n  topology: independent\n"
    [job] = render(tmp_path, text)
    assert job["metadata"]["labels"][keys.GPU_CLASS] == "any"
    assert "nodeSelector" not in pod(job)
    assert job["spec"]["template"]["metadata"]["annotations"][keys.KUEUE_PODSET_UNCONSTRAINED_TOPOLOGY] == "true"


def test_node_selector_merged_and_conflict(tmp_path: Path) -> None:
    text = BASE.replace("gpus: 0", "gpus: 1") + "  gpu_class: h100-80gb\n  node_selector:\n    agentpool: gpu\n"
    [job] = render(tmp_path, text)
    assert pod(job)["nodeSelector"] == {"agentpool": "gpu", keys.GPU_CLASS: "h100-80gb"}
    conflict = (
        BASE.replace("gpus: 0", "gpus: 1")
        + f"  gpu_class: h100-80gb\n  node_selector:\n    {keys.GPU_CLASS}: a10-8gb\n"
    )
    with pytest.raises(ConfigError, match=r"requires tau\.azure\.com/gpu-class"):
        render(tmp_path, conflict)


def test_priority_classes(tmp_path: Path) -> None:
    [job] = render(tmp_path, BASE + "  workload_priority_class: wl-high\n  pod_priority_class: pod-high\n")
    assert job["metadata"]["labels"][keys.KUEUE_PRIORITY_CLASS] == "wl-high"
    assert pod(job)["priorityClassName"] == "pod-high"
    [job] = render(tmp_path, BASE + "  disable_default_priorities: true\n")
    assert keys.KUEUE_PRIORITY_CLASS not in job["metadata"]["labels"] and "priorityClassName" not in pod(job)
    [job] = render(tmp_path, BASE + "  priority_tier: priority\n")
    assert job["metadata"]["labels"][keys.KUEUE_PRIORITY_CLASS] == "taugrid-priority"


def test_restricted_security_on_every_container(tmp_path: Path) -> None:
    text = (
        BASE + "storage:\n  data_pvc: data-pvc\n  output: /data/out\n  image_assets:\n"
        f"    - name: ref\n      image: {PINNED}\n      source_path: /opt/assets\n      mount_path: /opt/reference\n"
        "metrics:\n  history: [m/*.jsonl]\n  offload:\n    enabled: true\n"
        "experiment:\n  project: p\n  name: e\n"
    )
    text = text.replace(
        "runtime:\n  image: python:3.12\n", "runtime:\n  image: python:3.12\n  security:\n    mode: restricted\n"
    )
    text = text.replace("  queue: team-q\n", "  queue: team-q\n  workspace: ws\n")
    [job] = render(tmp_path, text, env={"TAU_METRICS_OFFLOAD_IMAGE": OFFLOAD_IMAGE})
    p = pod(job)
    assert p["securityContext"]["runAsNonRoot"] is True
    assert p["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    containers = p["initContainers"] + p["containers"]
    assert {c["name"] for c in containers} == {"tau-asset-ref", "main", "metrics-offload"}
    for c in containers:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
        assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 65532 and sc["runAsGroup"] == 65532


def test_restricted_rejects_root(tmp_path: Path) -> None:
    from tau_core.rendering import apply_restricted

    spec = {"containers": [{"name": "main", "securityContext": {"runAsUser": 0}}]}
    with pytest.raises(ConfigError, match='runAsUser=0 on container "main"'):
        apply_restricted(spec)
    spec = {"containers": [{"name": "main", "securityContext": {"privileged": True}}]}
    with pytest.raises(ConfigError, match='privileged container "main"'):
        apply_restricted(spec)
    spec = {"containers": [{"name": "main", "securityContext": {"runAsUser": 1000}}]}
    apply_restricted(spec)
    assert spec["containers"][0]["securityContext"]["runAsUser"] == 1000


def test_image_assets_init_containers(tmp_path: Path) -> None:
    text = BASE + (
        "storage:\n  image_assets:\n"
        f"    - name: ref\n      image: {PINNED}\n      source_path: /opt/assets\n      mount_path: /opt/reference\n"
    )
    [job] = render(tmp_path, text)
    [init] = pod(job)["initContainers"]
    assert init["name"] == "tau-asset-ref" and init["image"] == PINNED
    assert init["command"] == ["/bin/cp"] and init["args"] == ["-a", "--", "/opt/assets/.", "/tau-asset/"]
    assert init["volumeMounts"] == [{"name": "tau-asset-ref", "mountPath": "/tau-asset"}]
    assert {"name": "tau-asset-ref", "emptyDir": {}} in pod(job)["volumes"]
    assert {"name": "tau-asset-ref", "mountPath": "/opt/reference", "readOnly": True} in main(job)["volumeMounts"]


def test_run_source_init_container_and_digest(tmp_path: Path) -> None:
    text = BASE.replace("entrypoint: train.py", "entrypoint: experiments/train.py") + (
        f"run:\n  source:\n    image: {PINNED}\n    path: /workspace\n"
    )
    [job] = render(tmp_path, text, files={"experiments/train.py": "print(1)\n"})
    [init] = pod(job)["initContainers"]
    assert init["name"] == "tau-source" and init["image"] == PINNED
    assert init["command"][-2:] == ["/workspace", "experiments/train.py"]
    m = main(job)
    assert m["workingDir"] == "/tau/source"
    assert {"name": "tau-source", "mountPath": "/tau/source"} in m["volumeMounts"]
    assert "python3 /tau/source/experiments/train.py" in m["command"][2]
    assert "TAU_SCRIPT_B64" not in env_of(m)
    import hashlib

    expected = hashlib.sha256(f"{PINNED}\n/workspace\nexperiments/train.py".encode()).hexdigest()
    assert job["metadata"]["annotations"][keys.PAYLOAD_DIGEST] == expected


def test_runtime_working_dir(tmp_path: Path) -> None:
    text = BASE.replace("  image: python:3.12\n", "  image: python:3.12\n  working_dir: /workspace/project\n")
    [job] = render(tmp_path, text)
    assert main(job)["workingDir"] == "/workspace/project"


def test_durable_storage_env_volumes_and_result_annotations(tmp_path: Path) -> None:
    [job] = render(
        tmp_path, BASE + "storage:\n  data_pvc: blob-training\n", context={"output_root": "/data/projects/ws/runs"}
    )
    p, m = pod(job), main(job)
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "blob-training"}} in p["volumes"]
    assert {"name": "tau-hot", "emptyDir": {}} in p["volumes"]
    env = env_of(m)
    assert env["TAU_DATA_DIR"] == "/data" and env["TAU_HOT_DIR"] == "/mnt"
    assert (
        env["TAU_CHECKPOINTS_DIR"] == "/mnt/checkpoints" and env["TAU_DURABLE_CHECKPOINTS_DIR"] == "/data/checkpoints"
    )
    assert env["TAU_OUTPUT_DIR"] == "/data/projects/ws/runs/train"
    ann = job["metadata"]["annotations"]
    assert ann[keys.RESULT_PATH] == "/data/projects/ws/runs/train" and ann[keys.RESULT_PVC] == "blob-training"
    assert ann[keys.RESULT_SCOPE] == "/data/projects/ws/runs"
    assert json.loads(ann[keys.STORAGE_MOUNTS]) == [{"path": "/data", "source": "pvc", "source_ref": "blob-training"}]
    assert m["workingDir"] == "/data"
    assert "/data is not mounted writable" in m["command"][2]


def test_default_output_without_output_root(tmp_path: Path) -> None:
    [job] = render(tmp_path, BASE + "storage:\n  data_pvc: blob-training\n")
    assert env_of(main(job))["TAU_OUTPUT_DIR"] == "/data/checkpoints/workflows/train"


def test_staged_publication(tmp_path: Path) -> None:
    text = (
        BASE
        + "storage:\n  data_pvc: blob\n  output: /data/runs/train\n  publish: staged\n  checkpoint: best/model.bin\n"
    )
    [job] = render(tmp_path, text)
    ann = job["metadata"]["annotations"]
    assert ann[keys.ARTIFACT_PUBLICATION] == "staged"
    pub = ann[keys.ARTIFACT_PUBLICATION_ID]
    assert len(pub) == 24
    assert ann[keys.CHECKPOINT_ARTIFACT] == "/data/runs/train/best/model.bin"
    env = env_of(main(job))
    assert env["TAU_OUTPUT_STAGING_DIR"] == "/mnt/tau-output/train"
    script = main(job)["command"][2]
    assert f"/data/runs/train/.tau-artifacts/{pub}" in script and ".tau-artifacts-complete" in script


def test_metrics_offload_sidecar(tmp_path: Path) -> None:
    text = BASE + (
        "  workspace: taugrid-default\nstorage:\n  data_pvc: blob\n  output: /data/runs/train\n"
        "metrics:\n  history: [metrics-history-attempt-0/*.jsonl]\n  offload:\n    enabled: true\n"
        "experiment:\n  project: portal-demo\n  name: ray-plus-stellar\n  group: default\n"
    )
    [job] = render(tmp_path, text, env={"TAU_METRICS_OFFLOAD_IMAGE": OFFLOAD_IMAGE})
    sidecar = offload_sidecar(job)
    assert sidecar["image"] == OFFLOAD_IMAGE
    assert sidecar["restartPolicy"] == "Always"  # a native sidecar: the pod ends (and fails) with main
    assert [c["name"] for c in pod(job)["containers"]] == ["main"]
    args = sidecar["args"]
    assert "--watch" in args and args[args.index("--experiment") + 1] == "ray-plus-stellar"
    assert args[args.index("--history") + 1] == "/data/runs/train/metrics-history-attempt-0/*.jsonl"
    ann = job["metadata"]["annotations"]
    assert ann[keys.EXPERIMENT_SOURCE] == "stellar" and len(ann[keys.METRICS_SESSION_ID]) == 24
    assert job["spec"]["template"]["metadata"]["annotations"][keys.METRICS_SESSION_ID] == ann[keys.METRICS_SESSION_ID]
    assert "/var/run/tau/metrics-ready" in main(job)["command"][2]
    assert {"name": "tau-metrics-runtime", "emptyDir": {}} in pod(job)["volumes"]
    with pytest.raises(ConfigError, match="TAU_METRICS_OFFLOAD_IMAGE"):
        render(tmp_path, text)
    with pytest.raises(ConfigError, match="pinned"):
        render(tmp_path, text, env={"TAU_METRICS_OFFLOAD_IMAGE": "portal:latest"})


def test_metrics_offload_sidecar_gets_the_platform_kusto_settings(tmp_path: Path) -> None:
    text = BASE + (
        "  workspace: taugrid-default\nstorage:\n  data_pvc: blob\n  output: /data/runs/train\n"
        "metrics:\n  history: [h/*.jsonl]\n  offload:\n    enabled: true\n"
        "experiment:\n  project: portal-demo\n  name: ray-plus-stellar\n"
    )
    policy = {"TAU_METRICS_OFFLOAD_IMAGE": OFFLOAD_IMAGE,
              "TAU_METRICS_OFFLOAD_ADX_CLUSTER_URI": "https://adx1.westeurope.kusto.windows.net/",
              "TAU_METRICS_OFFLOAD_ADX_DATABASE": "Telemetry",
              "TAU_METRICS_OFFLOAD_ADX_CLIENT_ID": "00000000-1111-2222-3333-444444444444",
              "AZURE_CLIENT_SECRET": "never-rendered", "KUSTO_TOKEN": "never-rendered"}
    [job] = render(tmp_path, text, env=policy, context={"namespace": "team-a"})
    sidecar = offload_sidecar(job)
    args = sidecar["args"]
    assert args[args.index("--kusto-endpoint") + 1] == "https://adx1.westeurope.kusto.windows.net"
    assert args[args.index("--kusto-database") + 1] == "Telemetry"
    assert args[args.index("--kusto-namespace") + 1] == "team-a"
    assert {"name": "AZURE_CLIENT_ID", "value": "00000000-1111-2222-3333-444444444444"} in sidecar["env"]
    assert "never-rendered" not in json.dumps(job)  # only the identity's id; the pod signs in with it
    # without the policy: no Kusto at all; the database defaults to Metrics
    [plain] = render(tmp_path, text, env={"TAU_METRICS_OFFLOAD_IMAGE": OFFLOAD_IMAGE})
    plain_sidecar = offload_sidecar(plain)
    assert not any(a.startswith("--kusto") for a in plain_sidecar["args"])
    assert not any(e["name"] == "AZURE_CLIENT_ID" for e in plain_sidecar["env"])
    [default_db] = render(tmp_path, text, env={"TAU_METRICS_OFFLOAD_IMAGE": OFFLOAD_IMAGE,
                                               "TAU_METRICS_OFFLOAD_ADX_CLUSTER_URI": "https://adx1.kusto.windows.net"})
    args = offload_sidecar(default_db)["args"]
    assert args[args.index("--kusto-database") + 1] == "Metrics"
    for bad in ("http://adx1.kusto.windows.net", "https://user:pw@adx1.kusto.windows.net", "https://adx1/db?x=1"):
        with pytest.raises(ConfigError, match="TAU_METRICS_OFFLOAD_ADX_CLUSTER_URI"):
            render(tmp_path, text, env={"TAU_METRICS_OFFLOAD_IMAGE": OFFLOAD_IMAGE,
                                        "TAU_METRICS_OFFLOAD_ADX_CLUSTER_URI": bad})


def test_secret_refs_never_values_and_redacted_in_client_dry_run(tmp_path: Path) -> None:
    text = BASE + "  workspace: ws\n".replace("  workspace: ws\n", "") + "runtime:\n  image: python:3.12\n"
    text = BASE.replace(
        "  image: python:3.12\n",
        "  image: python:3.12\n  env:\n    LOG: debug\n  env_secret:\n    HF_TOKEN: hf-secret:token\n",
    )
    [job] = render(tmp_path, text, context={"dry_run": "client"})
    env = env_of(main(job))
    assert env["LOG"] == "debug"
    assert env["HF_TOKEN"] == {"secretKeyRef": {"name": "<redacted>", "key": "<redacted>"}}
    assert "hf-secret" not in json.dumps(job)
    [job] = render(tmp_path, text, context={"dry_run": None})
    assert env_of(main(job))["HF_TOKEN"] == {"secretKeyRef": {"name": "hf-secret", "key": "token"}}


def test_tau_command_annotation_redacts_secret_flags(tmp_path: Path) -> None:
    [job] = render(tmp_path, BASE, context={"tau_command": ["tau", "run", "--token", "abc", "--client-secret=xyz"]})
    value = job["metadata"]["annotations"][keys.TAU_COMMAND]
    assert "abc" not in value and "xyz" not in value and "<redacted>" in value


def test_env_size_limits(tmp_path: Path) -> None:
    big = "x" * (64 * 1024 + 1)
    with pytest.raises(ConfigError, match="TAU_SCRIPT_B64"):
        render(tmp_path, BASE, files={"train.py": "#" + big + "\n"})


def test_torchrun_single_node(tmp_path: Path) -> None:
    text = BASE.replace("gpus: 0", "gpus: 4") + "execution:\n  launcher: torchrun\n  processes_per_node: 4\n"
    [job] = render(tmp_path, text)
    m = main(job)
    assert "python3 -m torch.distributed.run --standalone --nproc_per_node=4 /tmp/tau-entrypoint.py" in m["command"][2]
    env = env_of(m)
    assert env["MASTER_ADDR"] == "localhost" and env["MASTER_PORT"] == "29500" and env["OMP_NUM_THREADS"] == "1"
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}} in pod(job)["volumes"]
    execution = json.loads(job["metadata"]["annotations"][keys.WORKLOADSPEC_EXECUTION])
    assert execution == {"launcher": "torchrun", "nodes": 1, "processes_per_node": 4}


def test_multi_node_torchrun_indexed_job_and_headless_service(tmp_path: Path) -> None:
    text = (
        BASE.replace("gpus: 0", "gpus: 8") + "execution:\n  launcher: torchrun\n  nodes: 3\n  processes_per_node: 8\n"
    )
    job, svc = render(tmp_path, text)
    assert job["kind"] == "Job" and svc["kind"] == "Service"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == 3 and spec["parallelism"] == 3
    assert pod(job)["subdomain"] == "train-headless"
    command = main(job)["command"][2]
    assert "--nnodes=3" in command and '--node_rank="$JOB_COMPLETION_INDEX"' in command
    assert "--rdzv-backend=c10d --rdzv-endpoint=train-0.train-headless:29500 --rdzv-id=train" in command
    assert env_of(main(job))["MASTER_ADDR"] == "train-0.train-headless"
    assert svc["metadata"]["name"] == "train-headless"
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {keys.JOB_NAME: "train"}
    assert svc["spec"]["ports"] == [{"name": "c10d", "port": 29500, "protocol": "TCP", "targetPort": 29500}]
    assert svc["metadata"]["annotations"][keys.SUBMISSION_ID] == "0123456789abcdef01234567"


def test_workload_profile_stamps(tmp_path: Path) -> None:
    profile = {
        "name": "research.training.1x",
        "gpusPerWorker": 1,
        "workerCount": 1,
        "placement": "independent",
        "defaultLocalQueue": "jobqueue",
        "priorities": {"workloadPriorityClassName": "wl-p", "podPriorityClassName": "pod-p"},
    }
    text = BASE.replace("  queue: team-q\n", "").replace("  gpus: 0\n", "  cpu_request: '1'\n")
    [job] = render(
        tmp_path,
        text,
        context={"workload_profile": profile, "profile_set_hash": "f" * 64, "tau_cluster_generation": 23},
    )
    labels, ann = job["metadata"]["labels"], job["metadata"]["annotations"]
    assert labels[keys.PROFILE] == "research.training.1x" and labels[keys.KUEUE_QUEUE_NAME] == "jobqueue"
    assert labels[keys.KUEUE_PRIORITY_CLASS] == "wl-p" and pod(job)["priorityClassName"] == "pod-p"
    assert ann[keys.WORKLOAD_PROFILE] == "research.training.1x"
    assert ann[keys.WORKLOAD_PROFILE_SET_HASH] == "f" * 64 and ann[keys.TAU_CLUSTER_GENERATION] == "23"
    assert env_of(main(job))["TAU_PROFILE"] == "research.training.1x"
    assert main(job)["resources"]["requests"]["nvidia.com/gpu"] == "1"


def test_retry_env(tmp_path: Path) -> None:
    [job] = render(tmp_path, BASE, context={"retry": {"attempt": 2, "max": 3, "reason": "Preempted"}})
    env = env_of(main(job))
    assert env["TAU_RETRY_ATTEMPT"] == "2" and env["TAU_RETRY_MAX"] == "3" and env["TAU_RETRY_REASON"] == "Preempted"
    assert env["TAU_RESUME_FROM"] == "/data/checkpoints/finetunes/train"


def test_missing_queue_and_namespace_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="LocalQueue is required"):
        render(tmp_path, BASE.replace("  queue: team-q\n", ""))
    with pytest.raises(ConfigError, match="no namespace resolved"):
        render(tmp_path, BASE.replace("  namespace: research\n", ""))


def test_placeholders_pass_through(tmp_path: Path) -> None:
    text = BASE.replace("  namespace: research\n  queue: team-q\n", "  lane: training\n")
    [job] = render(
        tmp_path,
        text,
        validate=False,
        context={
            "namespace": "<unresolved-namespace>",
            "queue": "<unresolved-queue>",
            "service_account": "<unresolved-service-account>",
            "workload_identity": True,
        },
    )
    assert job["metadata"]["namespace"] == "<unresolved-namespace>"
    assert job["metadata"]["labels"][keys.KUEUE_QUEUE_NAME] == "<unresolved-queue>"
    assert pod(job)["serviceAccountName"] == "<unresolved-service-account>"
    assert keys.WORKLOAD_IDENTITY_USE not in job["spec"]["template"]["metadata"]["labels"]


def test_workload_identity_label(tmp_path: Path) -> None:
    [job] = render(tmp_path, BASE, context={"service_account": "trainer", "workload_identity": True})
    assert job["spec"]["template"]["metadata"]["labels"][keys.WORKLOAD_IDENTITY_USE] == "true"
    assert pod(job)["serviceAccountName"] == "trainer"


def test_deterministic(tmp_path: Path) -> None:
    text = BASE + "storage:\n  data_pvc: blob\n  publish: staged\n"
    first = json.dumps(render(tmp_path, text), sort_keys=False)
    second = json.dumps(render(tmp_path, text), sort_keys=False)
    assert first == second


def test_config_hash_tracks_config_not_script(tmp_path: Path) -> None:
    [a] = render(tmp_path, BASE)
    [b] = render(tmp_path, BASE, files={"train.py": "print('changed')\n"})
    [c] = render(tmp_path, BASE.replace("  gpus: 0\n", "  gpus: 0\n  cpu_request: '2'\n"))
    h = keys.CONFIG_HASH
    assert a["metadata"]["annotations"][h] == b["metadata"]["annotations"][h] != c["metadata"]["annotations"][h]
    d = keys.SCRIPT_PAYLOAD_DIGEST
    assert a["metadata"]["annotations"][d] != b["metadata"]["annotations"][d] == b["metadata"]["annotations"][d]


def test_extra_pvc_volumes_and_mounts(tmp_path: Path) -> None:
    text = (
        BASE + "storage:\n  volumes: [data=pvc:blob-training, models=pvc:model-cache]\n"
        "  mounts: ['data:/data', 'models:/models:ro']\n"
    )
    [job] = render(tmp_path, text)
    volumes = pod(job)["volumes"]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "blob-training"}} in volumes
    assert {"name": "models", "persistentVolumeClaim": {"claimName": "model-cache"}} in volumes
    mounts = main(job)["volumeMounts"]
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in mounts
    assert [m for m in mounts if m["mountPath"] == "/data"] == [{"name": "data", "mountPath": "/data"}]
    assert job["metadata"]["annotations"][keys.RESULT_PVC] == "blob-training"


def test_clear_node_selector_drops_generated_selectors(tmp_path: Path) -> None:
    text = (
        BASE.replace("gpus: 0", "gpus: 1") + "  gpu_class: a100-80gb\n  clear_node_selector: true\n"
        "  node_selector:\n    agentpool: gpu\n"
    )
    [job] = render(tmp_path, text)
    assert pod(job)["nodeSelector"] == {"agentpool": "gpu"}
    assert job["metadata"]["labels"][keys.GPU_CLASS] == "a100-80gb"


def test_profiler_nsys(tmp_path: Path) -> None:
    text = (
        BASE.replace("gpus: 0", "gpus: 1") + "storage:\n  data_pvc: blob\n  output: /data/runs/p\n"
        "profiler:\n  mode: nsys\n  warmup: 30s\n  duration: 1m\n"
    )
    [job] = render(tmp_path, text)
    env = env_of(main(job))
    assert env["TAU_PROFILE_MODE"] == "nsys" and env["TAU_PROFILE_OUT"] == "/data/runs/p/profile/rank-0.nsys-rep"
    assert env["TAU_PROFILE_WARMUP_SEC"] == "30" and env["TAU_PROFILE_ACTIVE_SEC"] == "60"
    assert (
        "nsys profile --force-overwrite=true --delay=30 --duration=60 --output=/data/runs/p/profile/rank-0"
        in main(job)["command"][2]
    )
    ann = job["metadata"]["annotations"]
    assert ann[keys.PROFILE_MODE] == "nsys" and ann[keys.PROFILE_PATH] == "/data/runs/p/profile"
    assert ann[keys.PROFILE_PVC] == "blob"


def test_workspace_placeholder_stays_visible(tmp_path: Path) -> None:
    [job] = render(tmp_path, BASE, validate=False, context={"workspace": "<unresolved-workspace>"})
    assert job["metadata"]["labels"][keys.WORKSPACE] == "<unresolved-workspace>"
    [job] = render(tmp_path, BASE, context={"workspace": "Team Space"})
    assert job["metadata"]["labels"][keys.WORKSPACE] == "team-space"
    assert json.loads(job["metadata"]["annotations"][keys.STELLAR_TAGS]) == {"workspace": "Team Space"}


def test_rendered_command_runs_the_script_with_flags(tmp_path: Path) -> None:
    """Execute the rendered main command with its env (``/tmp`` redirected into the test dir)."""
    import os
    import subprocess

    script = "import json, os, sys\nopen(os.environ['RESULT'], 'w').write(json.dumps(sys.argv[1:]))\nsys.exit(3)\n"
    [job] = render(tmp_path, BASE + "execution:\n  configs:\n    lr: 0.1\n    name: a b\n", files={"train.py": script})
    m = main(job)
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    command = m["command"][2].replace("/tmp/", f"{sandbox}/")
    env = {**os.environ, **{e["name"]: e["value"] for e in m["env"]}, "RESULT": str(tmp_path / "argv.json")}
    proc = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert json.loads((tmp_path / "argv.json").read_text()) == ["--lr=0.1", "--name=a b"]
