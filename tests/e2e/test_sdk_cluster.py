"""`tau python submit` of a train then an eval against the simulated TauGrid cluster.

The train RayJob runs to success, is cleaned up, and the eval RayJob carries the upstream checkpoint
path; the real clock is sped up so the CLI polls on its own.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tau_core import keys
from tau_testing.sim.scenarios.taugrid import NAMESPACE, RESEARCHER_GROUP
from tau_testing.sim.scripts import PodScript, scripts_of

MODULE = '''\
import tau

PIP = ["tau-python==0.5.0"]


@tau.train(name="e2e-train", gpus=1, runtime_pip=PIP, queue="jobqueue", checkpoint_artifact="model.bin")
def train(ctx):
    return 1


@tau.eval(name="e2e-eval", after="e2e-train", gpus=1, cpu_workers=1, runtime_pip=PIP, queue="jobqueue")
def evaluate(ctx):
    return ctx.upstream_checkpoint
'''


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "workflow.py").write_text(MODULE)
    monkeypatch.chdir(root)
    return root


def _env(obj: dict[str, Any]) -> dict[str, str]:
    head = obj["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in head.get("env") or []}


def test_python_submit_train_then_eval(taugrid_factory, tau_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    scenario = taugrid_factory(clock="real", time_scale=20)
    cluster = scenario.cluster
    scripts_of(cluster).add({}, PodScript(run_seconds=10, logs=["driver: done"]), kind="RayJob")
    r = tau_cli("python", "submit", "workflow.py", "--namespace", NAMESPACE, "--poll-interval", "0.2",
                "--cleanup-timeout", "60s", "--timeout", "120s")
    assert r.exit_code == 0, r
    assert f"{NAMESPACE}/tau-e2e-train succeeded" in r.stderr
    assert cluster.store.get("ray.io/v1", "RayJob", NAMESPACE, "tau-e2e-train") is None  # cleaned up
    ev = cluster.store.get("ray.io/v1", "RayJob", NAMESPACE, "tau-e2e-eval")
    assert ev is not None
    env = _env(ev)
    assert env["TAU_UPSTREAM_CHECKPOINT"] == "/data/checkpoints/finetunes/e2e-train/artifacts/model.bin"
    assert env[keys.ENV_CLUSTER_JOB] == "1"
    groups = ev["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert [g["groupName"] for g in groups] == ["tau-e2e-eval-w", "tau-e2e-eval-w-gpu"]
    assert ev["metadata"]["labels"][keys.MANAGED_WORKFLOW_KIND] == "rayjob-eval"
    r = tau_cli("run", "status", "tau-e2e-eval", "-n", NAMESPACE, "-o", "json")
    assert r.exit_code == 0, r


def test_python_submit_keep_train_rayjob(taugrid_factory, tau_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    scenario = taugrid_factory(clock="real", time_scale=20)
    scripts_of(scenario.cluster).add({}, PodScript(run_seconds=5), kind="RayJob")
    r = tau_cli("python", "submit", "workflow.py", "--namespace", NAMESPACE, "--poll-interval", "0.2",
                "--timeout", "120s", "--keep-train-rayjob")
    assert r.exit_code == 0, r
    assert scenario.cluster.store.get("ray.io/v1", "RayJob", NAMESPACE, "tau-e2e-train") is not None


def test_a_failed_train_stops_before_the_eval(taugrid_factory, tau_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    scenario = taugrid_factory(clock="real", time_scale=20)
    scripts_of(scenario.cluster).add({}, PodScript(run_seconds=3, exit_code=1), kind="RayJob")
    r = tau_cli("python", "submit", "workflow.py", "--namespace", NAMESPACE, "--poll-interval", "0.2",
                "--timeout", "120s")
    assert r.exit_code == 1, r
    assert "RayJob aurora/tau-e2e-train failed" in r.stderr and "tau run logs tau-e2e-train" in r.stderr
    assert scenario.cluster.store.get("ray.io/v1", "RayJob", NAMESPACE, "tau-e2e-eval") is None


def test_secrets_are_created_as_a_secret_never_in_the_workload(taugrid_cluster, tau_cli, repo: Path,  # type: ignore[no-untyped-def]
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("E2E_TOKEN", "tok-123-secret")
    (repo / "secret_wf.py").write_text(
        "import tau\n\n@tau.train(name='sec', gpus=0, runtime_pip=['x'], queue='jobqueue', "
        "env={'TOKEN': tau.secret_from_env('E2E_TOKEN'), 'PLAIN': 'p'})\ndef train(ctx):\n    return 1\n")
    r = tau_cli("python", "submit", "secret_wf.py", "--namespace", NAMESPACE)
    assert r.exit_code == 1 and "secrets" in r.stderr and "tau CLI failed (exit=1)" in r.stderr, r
    cluster = taugrid_cluster.cluster
    assert cluster.store.get("ray.io/v1", "RayJob", NAMESPACE, "tau-sec") is None  # rolled back, nothing leaks
    # a platform that lets researchers ship SDK secrets grants them create on Secrets in the namespace
    rbac = "rbac.authorization.k8s.io/v1"
    cluster.store.create({"apiVersion": rbac, "kind": "Role", "metadata": {"name": "sdk-secrets", "namespace": NAMESPACE},
                          "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "get"]}]})
    cluster.store.create({"apiVersion": rbac, "kind": "RoleBinding",
                          "metadata": {"name": "sdk-secrets", "namespace": NAMESPACE},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "sdk-secrets"},
                          "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                        "name": RESEARCHER_GROUP}]})
    r = tau_cli("python", "submit", "secret_wf.py", "--namespace", NAMESPACE)
    assert r.exit_code == 0, r
    rayjob = cluster.store.get("ray.io/v1", "RayJob", NAMESPACE, "tau-sec")
    secret = cluster.store.get("v1", "Secret", NAMESPACE, "tau-sec-secrets")
    assert rayjob is not None and secret is not None
    assert "tok-123-secret" not in str(rayjob)
    stored = secret.get("stringData") or {}
    data = secret.get("data") or {}
    import base64

    assert stored.get("TOKEN") == "tok-123-secret" or base64.b64decode(data["TOKEN"]).decode() == "tok-123-secret"
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    ref = next(e for e in head["env"] if e["name"] == "TOKEN")["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "tau-sec-secrets", "key": "TOKEN"}


def test_python_doctor_against_the_cluster(taugrid_cluster, tau_cli) -> None:  # type: ignore[no-untyped-def]
    """The researcher may create RayJobs in the workspace namespace, not in the platform's."""
    r = tau_cli("python", "doctor", "-n", NAMESPACE)
    assert r.exit_code == 0, r
    assert f"create rayjobs in {NAMESPACE}: ok" in r.stdout and r.stdout.rstrip().endswith("tau python doctor: ok")
    r = tau_cli("python", "doctor", "-n", "kube-system")
    assert r.exit_code == 1 and "you cannot create rayjobs.ray.io in namespace kube-system" in r.stderr, r
    assert "researcher role" in r.stderr


def test_python_build_then_submit_build(taugrid_factory, tau_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    """A build submitted later: train polled to success and cleaned up, then the eval with the upstream path."""
    scenario = taugrid_factory(clock="real", time_scale=20)
    scripts_of(scenario.cluster).add({}, PodScript(run_seconds=5), kind="RayJob")
    r = tau_cli("python", "build", "workflow.py", "-o", "build", "--namespace", NAMESPACE)
    assert r.exit_code == 0, r
    r = tau_cli("python", "submit-build", "build", "--poll-interval", "0.2", "--timeout", "120s")
    assert r.exit_code == 0, r
    assert f"{NAMESPACE}/tau-e2e-train succeeded" in r.stderr
    store = scenario.cluster.store
    assert store.get("ray.io/v1", "RayJob", NAMESPACE, "tau-e2e-train") is None
    ev = store.get("ray.io/v1", "RayJob", NAMESPACE, "tau-e2e-eval")
    assert ev is not None
    assert _env(ev)["TAU_UPSTREAM_CHECKPOINT"] == "/data/checkpoints/finetunes/e2e-train/artifacts/model.bin"
