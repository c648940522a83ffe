"""RayJob rendering (reference §3.4 plus the shared §3.1/§3.5-§3.9 rules), schema-checked."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tau_core import keys
from tau_core.config import load_config
from tau_core.errors import ConfigError
from tau_core.rendering import RenderRequest
from tau_run.renderers.rayjob import render_rayjob
from tau_testing.k8s_schema import validate_objects

OFFLOAD_IMAGE = "registry.example.com/taugrid-portal@sha256:" + "b" * 64

BASE = """
name: tune
engine: rayjob
entrypoint: train.py
runtime:
  image: mcr.microsoft.com/aks/ai-runtime/ray:py3.12-ray2.54.0
compute:
  workers: 2
  gpus_per_worker: 0
policy:
  namespace: ray
  queue: kind-cpu
"""


def render(
    tmp_path: Path,
    text: str,
    *,
    context: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    files: dict[str, str | bytes] | None = None,
) -> dict[str, Any]:
    (tmp_path / "tau.yaml").write_text(textwrap.dedent(text))
    for rel, content in {"train.py": "def train_loop_per_worker(config):\n    pass\n", **(files or {})}.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    cfg = load_config(tmp_path / "tau.yaml")
    request = RenderRequest(
        name=cfg.name or "tune",
        config=cfg.normalized,
        context=context or {},
        sources=cfg.sources,
        config_hash=cfg.config_hash,
        config_dir=tmp_path,
        env=env or {},
    )
    objects = render_rayjob(request)
    validate_objects(objects)
    assert len(objects) == 1
    return objects[0]


def head(rj: dict[str, Any]) -> dict[str, Any]:
    return rj["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]


def worker_group(rj: dict[str, Any]) -> dict[str, Any]:
    return rj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]


def container(spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == name)


def env_of(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def payload_files(rj: dict[str, Any]) -> dict[str, bytes]:
    env = env_of(container(head(rj), "tau-payload"))
    raw = base64.b64decode(env["TAU_PAYLOAD_B64"])
    assert (
        hashlib.sha256(raw).hexdigest()
        == env["TAU_PAYLOAD_DIGEST"]
        == rj["metadata"]["annotations"][keys.PAYLOAD_DIGEST]
    )
    assert env["TAU_PAYLOAD_TARGET_DIR"] == "/script"
    doc = json.loads(gzip.decompress(raw))
    return {k: base64.b64decode(v) for k, v in doc["files"].items()}


def test_rayjob_shape(tmp_path: Path) -> None:
    rj = render(tmp_path, BASE + "  lane: training\nexperiment:\n  project: Tau Local\n  name: kind-ray-smoke\n")
    assert rj["apiVersion"] == "ray.io/v1" and rj["kind"] == "RayJob"
    spec = rj["spec"]
    assert spec["suspend"] is True and spec["shutdownAfterJobFinishes"] is True
    assert spec["ttlSecondsAfterFinished"] == 15 and spec["submissionMode"] == "HTTPMode"
    assert spec["rayClusterSpec"]["rayVersion"] == "2.54.0"
    labels = rj["metadata"]["labels"]
    assert labels[keys.KUEUE_QUEUE_NAME] == "kind-cpu" and labels[keys.WORKLOAD_KIND] == "rayjob"
    hg = spec["rayClusterSpec"]["headGroupSpec"]
    assert hg["rayStartParams"] == {"dashboard-host": "0.0.0.0", "num-cpus": "0", "num-gpus": "0"}
    h = head(rj)
    assert [c["name"] for c in h["containers"]] == ["ray-head", "ray-driver-log-offload"]
    assert [c["name"] for c in h["initContainers"]] == ["prepare-ray-tmp", "tau-payload"]
    ports = {p["name"]: p["containerPort"] for p in container(h, "ray-head")["ports"]}
    assert ports == {"metrics": 8080, "gcs-server": 6379, "dashboard": 8265, "client": 10001}
    assert {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"} in h["tolerations"]
    terms = h["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["system"]
    head_ann = hg["template"]["metadata"]["annotations"]
    assert head_ann[keys.ADX_LOG_DESTINATION] == "Logs:ContainerLogs" and head_ann[keys.ADX_SCRAPE] == "true"
    wg = worker_group(rj)
    assert wg["groupName"] == "tune-w"
    assert wg["replicas"] == wg["minReplicas"] == wg["maxReplicas"] == 2
    assert wg["rayStartParams"] == {"num-gpus": "0"}
    w = container(wg["template"]["spec"], "ray-worker")
    assert w["startupProbe"]["httpGet"] == {"path": "/api/healthz", "port": 52365}
    assert w["startupProbe"]["failureThreshold"] == 60
    assert w["readinessProbe"]["tcpSocket"]["port"] == 52365
    assert "initContainers" not in wg["template"]["spec"]
    assert payload_files(rj) == {"train.py": b"def train_loop_per_worker(config):\n    pass\n"}
    assert "python3 /script/train.py" in spec["entrypoint"]
    assert "/tmp/ray/tau-driver-complete" in spec["entrypoint"]


def test_default_resources_and_overrides(tmp_path: Path) -> None:
    text = BASE.replace(
        "  gpus_per_worker: 0\n",
        "  gpus_per_worker: 0\n  head_cpu_request: 20m\n  worker_memory_request: 256Mi\n  worker_memory_limit: 768Mi\n",
    )
    rj = render(tmp_path, text)
    hr = container(head(rj), "ray-head")["resources"]
    assert hr == {"limits": {"cpu": "20m", "memory": "16Gi"}, "requests": {"cpu": "20m", "memory": "8Gi"}}
    wr = container(worker_group(rj)["template"]["spec"], "ray-worker")["resources"]
    assert wr == {"limits": {"cpu": "4", "memory": "768Mi"}, "requests": {"cpu": "2", "memory": "256Mi"}}


def test_gpu_workers_resources_tolerations_and_default_image(tmp_path: Path) -> None:
    text = BASE.replace("  image: mcr.microsoft.com/aks/ai-runtime/ray:py3.12-ray2.54.0\n", "  env:\n    X: '1'\n")
    text = (
        text.replace("gpus_per_worker: 0", "gpus_per_worker: 2")
        + "  gpu_class: h200-141gb\n  topology: single-node-nvlink\n  lane: large-memory\n"
    )
    rj = render(tmp_path, text)
    wg = worker_group(rj)
    w = container(wg["template"]["spec"], "ray-worker")
    assert w["image"] == "mcr.microsoft.com/aks/ai-runtime/ray:py3.12-ray2.56.0-cuda13.0"
    assert w["resources"]["requests"] == {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"}
    assert w["resources"]["limits"] == {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "2"}
    assert wg["template"]["spec"]["nodeSelector"] == {keys.GPU_CLASS: "h200-141gb"}
    assert any(t["key"] == "nvidia.com/gpu" for t in wg["template"]["spec"]["tolerations"])
    assert wg["rayStartParams"] == {"num-gpus": "2"}
    assert wg["template"]["metadata"]["annotations"][keys.KUEUE_PODSET_REQUIRED_TOPOLOGY] == keys.HOSTNAME
    head_ann = rj["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["metadata"]["annotations"]
    assert not set(head_ann) & set(keys.KUEUE_TOPOLOGY_KEYS)
    assert "nvidia.com/gpu" not in json.dumps(container(head(rj), "ray-head")["resources"])
    env = env_of(w)
    assert env["TAU_DIST_BACKEND"] == "nccl" and env["TAU_NUM_WORKERS"] == "2" and env["TAU_WORLD_SIZE"] == "4"
    assert env["HF_HOME"] == "/tmp/hf" and env["NCCL_DEBUG"] == "WARN" and env["X"] == "1"
    assert rj["metadata"]["annotations"][keys.GPU_COUNT] == "4"


def test_runtime_env_pip(tmp_path: Path) -> None:
    rj = render(
        tmp_path,
        BASE + "runtime:\n  image: ray:py3.12-ray2.40.0\n  pip: [torch==2.4.0, numpy]\n".replace("runtime:\n", "")
        if False
        else BASE.replace("ray2.54.0\n", "ray2.54.0\n  pip:\n    - torch==2.4.0\n    - numpy\n"),
    )
    assert rj["spec"]["runtimeEnvYAML"] == 'pip:\n  - "torch==2.4.0"\n  - "numpy"\n'
    assert "python3 -m pip install torch==2.4.0 numpy" in rj["spec"]["entrypoint"]


def test_working_dir_archive(tmp_path: Path) -> None:
    text = (
        BASE.replace("entrypoint: train.py", "entrypoint: project/pkg/main.py")
        + "run:\n  working_dir: project\n  working_dir_excludes: ['*.log']\n"
    )
    files: dict[str, str | bytes] = {
        "project/pkg/__init__.py": "",
        "project/pkg/main.py": "print(1)\n",
        "project/requirements.txt": "pyyaml\n",
        "project/debug.log": "noise",
        "project/.git/HEAD": "ref",
        "project/pkg/__pycache__/x.pyc": "bytes",
    }
    rj = render(tmp_path, text, files=files)
    assert rj["spec"]["runtimeEnvYAML"] == 'working_dir: "file:///script/_tau_project.zip"\n'
    assert "python3 -m pkg.main" in rj["spec"]["entrypoint"]
    got = payload_files(rj)
    assert set(got) == {"_tau_project.zip", "requirements.txt"}
    names = zipfile.ZipFile(io.BytesIO(got["_tau_project.zip"])).namelist()
    assert names == ["pkg/__init__.py", "pkg/main.py", "requirements.txt"]
    wspec = worker_group(rj)["template"]["spec"]
    assert [c["name"] for c in wspec["initContainers"]] == ["tau-payload"]
    assert {"name": "script", "mountPath": "/script", "readOnly": True} in container(wspec, "ray-worker")[
        "volumeMounts"
    ]


def test_working_dir_archive_limits(tmp_path: Path) -> None:
    import os

    text = BASE.replace("entrypoint: train.py", "entrypoint: project/main.py") + "run:\n  working_dir: project\n"
    with pytest.raises(ConfigError, match=r"archive is .* bytes; maximum is 46080"):
        render(tmp_path, text, files={"project/main.py": "x", "project/blob.bin": os.urandom(60 * 1024)})
    with pytest.raises(ConfigError, match="more than 8388608 bytes"):
        render(tmp_path, text, files={"project/main.py": "x", "project/big.bin": b"\0" * (8 * 1024 * 1024 + 10)})


def test_ray_tune_driver_env_and_payload(tmp_path: Path) -> None:
    text = BASE.replace(
        "  workers: 2\n  gpus_per_worker: 0\n", "  workers: 1\n  gpus_per_worker: 1\n"
    ) + textwrap.dedent("""\
        execution:
          launcher: ray-tune
          metric: loss
          mode: min
          num_samples: 1
          max_concurrent_trials: 2
          configs:
            lr: [0.001, 0.01, 0.1]
            batch_size: [32, 64]
        """)
    rj = render(tmp_path, text)
    env = env_of(container(head(rj), "ray-head"))
    assert env["TAU_TUNE_METRIC"] == "loss" and env["TAU_TUNE_MODE"] == "min"
    assert env["TAU_TUNE_NUM_SAMPLES"] == "1" and env["TAU_TUNE_MAX_CONCURRENT_TRIALS"] == "2"
    assert json.loads(env["TAU_TUNE_PARAM_SPACE"]) == {"batch_size": [32, 64], "lr": [0.001, 0.01, 0.1]}
    assert env["TAU_TUNE_TRAIN_PATH"] == "/script/train.py"
    files = payload_files(rj)
    assert "_tau_tune_driver.py" in files and "train.py" in files
    compile(files["_tau_tune_driver.py"], "_tau_tune_driver.py", "exec")
    assert "python3 /script/_tau_tune_driver.py" in rj["spec"]["entrypoint"]
    wspec = worker_group(rj)["template"]["spec"]
    assert [c["name"] for c in wspec["initContainers"]] == ["tau-payload"]
    assert json.loads(rj["metadata"]["annotations"][keys.WORKLOADSPEC_EXECUTION]) == {"launcher": "ray-tune"}


def test_ray_train_config_json(tmp_path: Path) -> None:
    rj = render(tmp_path, BASE + "execution:\n  configs:\n    torch_config:\n      backend: gloo\n")
    env = env_of(container(head(rj), "ray-head"))
    assert json.loads(env["TAU_RAY_TRAIN_CONFIG_JSON"]) == {"torch_config": {"backend": "gloo"}}


def test_restricted_rayjob(tmp_path: Path) -> None:
    text = BASE.replace("ray2.54.0\n", "ray2.54.0\n  security:\n    mode: restricted\n")
    rj = render(tmp_path, text)
    for spec in (head(rj), worker_group(rj)["template"]["spec"]):
        assert spec["securityContext"]["fsGroup"] == 65532 and spec["securityContext"]["runAsNonRoot"] is True
        for c in spec.get("initContainers", []) + spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
            assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 65532
    assert "prepare-ray-tmp" not in [c["name"] for c in head(rj)["initContainers"]]


def test_storage_staged_and_metrics_offload(tmp_path: Path) -> None:
    text = BASE + (
        "  workspace: taugrid-default\nstorage:\n  data_pvc: blob-training\n"
        "  output: /data/projects/taugrid-default/runs/portal-ray-stellar\n  publish: staged\n"
        "metrics:\n  history: [metrics-history-attempt-0/*.jsonl]\n  offload:\n    enabled: true\n"
        "experiment:\n  project: portal-demo\n  name: ray-plus-stellar\n  group: default\n"
    )
    rj = render(tmp_path, text, env={"TAU_METRICS_OFFLOAD_IMAGE": OFFLOAD_IMAGE})
    h = head(rj)
    assert [c["name"] for c in h["containers"]] == ["ray-head", "ray-driver-log-offload", "metrics-offload"]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "blob-training"}} in h["volumes"]
    ann = rj["metadata"]["annotations"]
    assert ann[keys.STELLAR_EXPERIMENT_ID] == "ray-plus-stellar" and ann[keys.STELLAR_GROUP_VALUE] == "default"
    assert ann[keys.EXPERIMENT_SOURCE] == "stellar" and ann[keys.ARTIFACT_PUBLICATION] == "staged"
    head_env = env_of(container(h, "ray-head"))
    worker_env = env_of(container(worker_group(rj)["template"]["spec"], "ray-worker"))
    assert head_env["TAU_OUTPUT_STAGING_DIR"] == "/mnt/tau-output/tune"
    assert "TAU_OUTPUT_STAGING_DIR" not in worker_env
    assert head_env["TAU_DATA_DIR"] == "/data" and "TAU_DATASETS_DIR" not in head_env


def test_name_rules(tmp_path: Path) -> None:
    long_name = "r" * 48
    with pytest.raises(ConfigError, match="too long"):
        from tau_run.renderers.rayjob import render_rayjob as rr

        rr(
            RenderRequest(
                name=long_name,
                config={"engine": "rayjob", "entrypoint": "train.py"},
                context={"namespace": "n", "queue": "q"},
            )
        )


def test_queue_falls_back_to_jobqueue(tmp_path: Path) -> None:
    rj = render(tmp_path, BASE.replace("  queue: kind-cpu\n", ""))
    assert rj["metadata"]["labels"][keys.KUEUE_QUEUE_NAME] == "jobqueue"


def test_deterministic(tmp_path: Path) -> None:
    text = BASE.replace("entrypoint: train.py", "entrypoint: project/main.py") + "run:\n  working_dir: project\n"
    files: dict[str, str | bytes] = {"project/main.py": "print(1)\n"}
    assert json.dumps(render(tmp_path, text, files=files)) == json.dumps(render(tmp_path, text, files=files))


def test_limit_only_caps_the_default_request(tmp_path: Path) -> None:
    text = BASE.replace(
        "  gpus_per_worker: 0\n", "  gpus_per_worker: 0\n  worker_memory_limit: 768Mi\n  worker_cpu_limit: '1'\n"
    )
    rj = render(tmp_path, text)
    wr = container(worker_group(rj)["template"]["spec"], "ray-worker")["resources"]
    assert wr == {"limits": {"cpu": "1", "memory": "768Mi"}, "requests": {"cpu": "1", "memory": "768Mi"}}


def test_request_above_limit_is_an_error(tmp_path: Path) -> None:
    text = BASE.replace(
        "  gpus_per_worker: 0\n", "  gpus_per_worker: 0\n  head_cpu_request: '4'\n  head_cpu_limit: 500m\n"
    )
    with pytest.raises(ConfigError, match="head cpu request 4 is above its limit 500m"):
        render(tmp_path, text)


def test_working_dir_entrypoint_rules(tmp_path: Path) -> None:
    from tau_run.renderers.rayjob import render_rayjob as rr

    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "main.py").write_text("print(1)\n")
    (tmp_path / "project" / "notes.txt").write_text("x")
    (tmp_path / "outside.py").write_text("print(2)\n")
    base = {"engine": "rayjob", "run": {"working_dir": "project"}, "compute": {"workers": 1, "gpus_per_worker": 0}}
    ctx = {"namespace": "n", "queue": "q"}

    def req(entry: str, **run: Any) -> RenderRequest:
        cfg = json.loads(json.dumps(base))
        cfg["entrypoint"] = entry
        cfg["run"].update(run)
        return RenderRequest(name="wd", config=cfg, context=ctx, config_dir=tmp_path)

    with pytest.raises(ConfigError, match=r"must lie inside run\.working_dir"):
        rr(req("outside.py"))
    with pytest.raises(ConfigError, match=r"must be a \.py file"):
        rr(req("project/notes.txt"))
    with pytest.raises(ConfigError, match=r"excluded from the run\.working_dir archive"):
        rr(req("project/main.py", working_dir_excludes=["main.py"]))
    with pytest.raises(ConfigError, match="is not a directory"):
        rr(req("project/main.py", working_dir="missing"))
    (tmp_path / "project" / "link.py").symlink_to(tmp_path / "outside.py")
    [rj] = rr(req("project/main.py"))
    env = {e["name"]: e["value"] for e in head(rj)["initContainers"][-1]["env"]}
    doc = json.loads(gzip.decompress(base64.b64decode(env["TAU_PAYLOAD_B64"])))
    names = zipfile.ZipFile(io.BytesIO(base64.b64decode(doc["files"]["_tau_project.zip"]))).namelist()
    assert names == ["main.py", "notes.txt"]
