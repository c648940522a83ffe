"""Managed workflow manifests (schema_version: 1) through `tau run`: rendering, schema, hostile input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tau_core import keys
from tau_testing.k8s_schema import validate_objects

TRAIN = """\
schema_version: 1
name: train-model
compute: {gpus: 2, workers: 3, cpus: "4", memory: 16Gi}
eval: {}
runtime:
  pip: [torch]
  env: [{name: HF_HUB_OFFLINE, value: "1"}]
storage:
  data_pvc: blob-training
  mounts: [{name: model-cache, mountPath: /models, pvc: model-cache, readOnly: true}]
artifacts: {checkpoint: best/model.safetensors}
entrypoint: {script: ../train.py, function: train, kwargs: {lr: 0.01}}
policy: {gpu_class: any, namespace: ray, queue: jobqueue}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "tau").mkdir()
    (tmp_path / "train.py").write_text("def train(ctx, lr=0.1):\n    return lr\n")
    (tmp_path / "tau" / "train.yaml").write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _render(tau_cli: Any, *args: str) -> list[dict[str, Any]]:
    r = tau_cli("run", *args, "--dry-run=client", "-o", "json")
    assert r.exit_code == 0, r
    doc = json.loads(r.stdout)
    return doc if isinstance(doc, list) else [doc]


def _containers(rayjob: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = rayjob["spec"]["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in cluster["workerGroupSpecs"]]
    return [c for p in pods for c in p["containers"] if c["name"] in ("ray-head", "ray-worker")]


def test_train_manifest_renders_the_documented_rayjob(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    objects = _render(tau_cli, "train")
    validate_objects(objects)  # KubeRay CRD and Kubernetes schemas
    rayjob = objects[0]
    assert rayjob["kind"] == "RayJob" and rayjob["metadata"]["name"] == "tau-train-model"
    assert "python3 /script/tau_py_wrapper.py" in rayjob["spec"]["entrypoint"]
    workers = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert workers["replicas"] == workers["minReplicas"] == workers["maxReplicas"] == 3
    assert workers["template"]["spec"]["containers"][0]["resources"]["limits"][keys.NVIDIA_GPU] == "2"
    for c in _containers(rayjob):
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"] == "0" and env[keys.ENV_CLUSTER_JOB] == "1"
        assert env["HF_HUB_OFFLINE"] == "1" and "TAU_UPSTREAM_CHECKPOINT" not in env
        assert {"name": "model-cache", "mountPath": "/models", "readOnly": True} in c["volumeMounts"]
    ann = rayjob["metadata"]["annotations"]
    assert ann[keys.CHECKPOINT_ARTIFACT] == "/data/checkpoints/finetunes/train-model/artifacts/best/model.safetensors"
    assert len(ann[keys.MANAGED_MANIFEST_DIGEST]) == 64


def test_config_flag_and_the_resource_prefix(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    (project / "tau" / "train.yaml").write_text(TRAIN + "resource_naming: {prefix: acme}\n")
    assert _render(tau_cli, "--config", "tau/train.yaml")[0]["metadata"]["name"] == "acme-train-model"


def test_eval_manifest_gets_the_upstream_checkpoint(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    body = TRAIN.replace("name: train-model", "name: eval-model").replace("eval: {}", "eval: {cpu_workers: 4, "
                                                                          "upstream: train-model}")
    body += "workflow: {upstream_checkpoint: /data/checkpoints/finetunes/train-model/artifacts/x}\n"
    (project / "tau" / "eval.yaml").write_text(body.replace("artifacts: {checkpoint: best/model.safetensors}\n", ""))
    objects = _render(tau_cli, "eval")
    validate_objects(objects)
    groups = objects[0]["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert [(g["replicas"], g["rayStartParams"]["num-gpus"]) for g in groups] == [(4, "0"), (1, "2")]
    for c in _containers(objects[0]):
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["TAU_UPSTREAM_CHECKPOINT"] == "/data/checkpoints/finetunes/train-model/artifacts/x"
    labels = objects[0]["metadata"]["labels"]
    assert labels[keys.MANAGED_WORKFLOW_KIND] == "rayjob-eval"


def test_secret_payload_becomes_a_redacted_secret(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    (project / "tau" / "secrets.json").write_text(json.dumps({"name": "x", "stringData": {"HF_TOKEN": "s3cr3t"}}))
    (project / "tau" / "train.yaml").write_text(TRAIN + "workflow: {secret_payload: secrets.json}\n")
    r = tau_cli("run", "train", "--dry-run=client")
    assert r.exit_code == 0, r
    assert "s3cr3t" not in r.stdout and "kind: Secret" in r.stdout and "<redacted>" in r.stdout
    objects = _render(tau_cli, "train")
    validate_objects(objects)
    head = _containers(objects[0])[0]
    ref = next(e for e in head["env"] if e["name"] == "HF_TOKEN")["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "tau-train-model-secrets", "key": "HF_TOKEN"}


BASE: dict[str, Any] = {"schema_version": 1, "name": "h", "runtime": {"pip": ["x"]},
                        "entrypoint": {"script": "../train.py"}}


@pytest.mark.parametrize(("patch", "expected"), [
    ({"entrypoint": {"script": "../../outside.py"}}, "is outside the repository"),
    ({"storage": {"data_pvc": "p", "mounts": [{"name": "data", "mountPath": "/x", "pvc": "c"}]}}, "is reserved"),
    ({"storage": {"mounts": [{"name": "cache", "mountPath": "/data/cache", "pvc": "c"}]}},
     "must be absolute and outside"),
    ({"runtime": {"pip": ["x"], "env": [{"name": "TAU_DATA_DIR", "value": "/x"}]}}, "Tau owns the TAU_ namespace"),
    ({"compute": {"gpus": 9}}, "compute.gpus"),
    ({"workflow": {"upstream_checkpoint": "relative/path"}}, "must be an absolute in-pod path"),
    ({"runtime": {"pip": []}}, "runtime.pip: required"),
    ({"workload_kind": "rayjob-eval", "eval": {"cpu_workers": 0}}, "eval.cpu_workers must be >= 1"),
])
def test_hostile_manifests_are_clean_errors(tau_cli, project: Path, patch: dict[str, Any],  # type: ignore[no-untyped-def]
                                            expected: str) -> None:
    (project.parent / "outside.py").write_text("def main(ctx):\n    pass\n")
    (project / "tau" / "train.yaml").write_text(json.dumps({**BASE, **patch}))
    r = tau_cli("run", "validate", "train")
    assert r.exit_code == 1 and expected in r.stderr and "Traceback" not in r.stderr, r


def test_positional_name_is_refused_and_schema_prints_either(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", "other", "--config", "tau/train.yaml", "--dry-run=client")
    assert r.exit_code == 1 and "take the run name from the config file" in r.stderr, r
    managed = json.loads(tau_cli("run", "schema", "--managed").stdout)
    direct = json.loads(tau_cli("run", "schema").stdout)
    assert managed["title"] == "Tau managed workflow manifest" and direct["title"] == "Tau direct run config"
    assert managed["required"] == ["schema_version", "name"] and "entrypoint" in managed["properties"]


def test_local_backend_points_at_tau_python(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", "train", "--local")
    assert r.exit_code == 1 and "tau python submit MODULE --local" in r.stderr, r


def test_every_rendered_workload_carries_the_cluster_job_marker(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    """The SDK refuses .submit() inside a job by this marker; direct Jobs and RayJobs carry it too."""
    (project / "tau" / "job.yaml").write_text("name: j\nengine: job\nentrypoint: ../train.py\nimage: python:3.12\n"
                                              "compute: {gpus: 0}\npolicy: {namespace: ray, queue: q}\n")
    (project / "tau" / "ray.yaml").write_text("name: r\nengine: rayjob\nentrypoint: ../train.py\n"
                                              "policy: {namespace: ray, queue: q}\n")
    job = _render(tau_cli, "job")[0]
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env[keys.ENV_CLUSTER_JOB] == "1"
    for c in _containers(_render(tau_cli, "ray")[0]):
        assert {"name": keys.ENV_CLUSTER_JOB, "value": "1"} in c["env"]


def test_unknown_keys_warn_with_a_suggestion(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    (project / "tau" / "train.yaml").write_text(json.dumps({**BASE, "compute": {"gpu": 1}, "eval": {"custom": 1}}))
    r = tau_cli("run", "validate", "train")
    assert r.exit_code == 0, r
    assert 'unknown config key "compute.gpu" in tau/train.yaml (ignored); did you mean "compute.gpus"?' in r.stderr
    assert "eval.custom" not in r.stderr  # manifest-owned pass-through keys never warn
