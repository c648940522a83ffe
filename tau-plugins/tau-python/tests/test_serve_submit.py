"""``tau.serve(...).submit()``: ``tau serve deploy`` in-process through the ``serve`` root that tau-serve
registers (tau-python never imports tau_serve), rendered offline from a profile snapshot, goldens
schema-checked against the KubeRay CRD and the Kubernetes schemas, and every documented refusal.

Regenerate the goldens after an intended change with ``TAU_REGEN_SDK_GOLDENS=1`` and review the diff.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import tau
from tau._errors import TauCLIError, TauSDKError
from tau_core import keys
from tau_core.config.profiles import profile_set_hash
from tau_core.plugins import Host, set_host

GOLDEN = Path(__file__).parent / "golden"
IMAGE = "registry.example.com/serve/llm@sha256:" + "b" * 64
NS = "aurora"


@pytest.fixture
def snapshot(tmp_path: Path, repo: Path) -> str:
    """The simulated TauGrid cluster's published profiles, exported as an offline snapshot."""
    from tau_testing.sim.scenarios.taugrid import objects

    cluster = next(o for o in objects() if o["kind"] == "TauCluster")
    profiles = cluster["status"]["workloadProfiles"]["profiles"]
    path = tmp_path / "profiles.snapshot.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauWorkloadProfileSnapshot",
                                    "tauClusterGeneration": 1, "profileSetHash": profile_set_hash(profiles),
                                    "profiles": profiles}))
    return str(path)


def _golden(name: str, objects: list[dict[str, Any]]) -> None:
    from tau_testing.k8s_schema import validate_objects

    validate_objects(objects)  # KubeRay CRD (RayService) and the Kubernetes schemas (Deployment, Service, HPA)
    text = yaml.safe_dump_all(objects, sort_keys=False)
    path = GOLDEN / name
    if os.environ.get("TAU_REGEN_SDK_GOLDENS"):
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden {path}; create it with TAU_REGEN_SDK_GOLDENS=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden"


def _render(handle: tau.ServeHandle, snapshot: str, **kw: Any) -> tuple[list[dict[str, Any]], str]:
    out = handle.submit(dry_run="client", namespace=NS, workload_profile_snapshot=snapshot, capture=True, **kw)
    assert out.exit_code == 0 and out.resource_name == handle.name
    return [o for o in yaml.safe_load_all(out.stdout) if o], out.stderr


def test_rayservice_handle_golden_renders_in_process(snapshot: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_subprocess(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the SDK must deploy in-process")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    monkeypatch.setenv("PATH", "")  # no `tau` on PATH is needed
    handle = tau.serve("sdk-llm", "gpu-1x", checkpoint="sdk-train/artifacts/best", image=IMAGE, replicas=2,
                       import_path="serve_app:app", port=8000, runtime_pip=["vllm==0.6.0"],
                       env={"LOG_LEVEL": "info", "HF_TOKEN": tau.secret_ref("hf-secret", "token")})
    argv_before = list(sys.argv)
    objects, err = _render(handle, snapshot)
    assert sys.argv == argv_before
    _golden("serve-rayservice.yaml", objects)
    (service,) = objects
    assert service["kind"] == "RayService" and service["metadata"]["namespace"] == NS
    head = service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in head["env"]}
    assert env["TAU_MODEL_PATH"]["value"] == "/data/checkpoints/sdk-train/artifacts/best"
    assert "hf-secret" not in yaml.safe_dump(objects)  # a client dry-run redacts the secret reference
    assert "secretKeyRef" in env["HF_TOKEN"]["valueFrom"]
    assert "offline client dry-run" in err


def test_deployment_handle_golden(snapshot: str) -> None:
    handle = tau.serve("sdk-web", "cpu-small", kind="deployment", image=IMAGE, replicas=1,
                       args=["--port", "8080", "--greeting", "hello world"],
                       volumes=["cache=emptyDir"], mounts=["cache:/cache"], env={"MODE": "eval"})
    objects, _ = _render(handle, snapshot)
    _golden("serve-deployment.yaml", objects)
    (deployment,) = objects
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["--port", "8080", "--greeting", "hello world"]  # literal words, not re-split
    assert {"name": "cache", "mountPath": "/cache"}.items() <= container["volumeMounts"][-1].items()


def test_namespace_argument_overrides_the_handle(snapshot: str) -> None:
    handle = tau.serve("sdk-llm", "gpu-1x", image=IMAGE, namespace="elsewhere")
    assert handle.deploy_args(namespace=NS)[-2:] == ["-n", NS]
    objects, _ = _render(handle, snapshot)
    assert objects[0]["metadata"]["namespace"] == NS


def test_cli_usage_error_keeps_its_exit_code(snapshot: str) -> None:
    handle = tau.serve("sdk-llm", "gpu-1x", image="python:3.12")
    with pytest.raises(TauCLIError, match=r"tau serve deploy failed for 'sdk-llm' \(exit=2\): .*--image") as info:
        handle.submit(dry_run="client", namespace=NS, workload_profile_snapshot=snapshot, capture=True)
    assert info.value.exit_code == 2


def test_submit_refuses_inside_a_cluster_job(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(keys.ENV_CLUSTER_JOB, "1")
    with pytest.raises(TauSDKError, match=r"refusing to \.submit\(\) from inside .*" + keys.ENV_CLUSTER_JOB):
        tau.serve("s", "p").submit(dry_run="client")


def test_submit_rejects_an_unknown_dry_run(repo: Path) -> None:
    with pytest.raises(TauSDKError, match=r"dry_run must be 'client' or 'server'"):
        tau.serve("s", "p").submit(dry_run="all")


def test_without_the_serve_root_the_error_names_the_distribution(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    previous = set_host(Host.create(entry_points=False))  # an environment without tau-serve
    try:
        with pytest.raises(TauSDKError, match=r"`tau serve` command is not installed.*pip install tau-serve"):
            tau.serve("s", "p").submit(dry_run="client")
    finally:
        set_host(previous)


def test_tau_binary_selects_another_cli(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "argv.txt"
    binary = tmp_path / "other-tau"
    binary.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {record}\nexit 3\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("TAU_BINARY", str(binary))
    handle = tau.serve("s", "p", image=IMAGE)
    with pytest.raises(TauCLIError, match=r"exit=3") as info:
        handle.submit(dry_run="server", context="prod", namespace=NS, capture=True)
    assert info.value.exit_code == 3
    assert record.read_text().splitlines() == handle.deploy_args(dry_run="server", context="prod", namespace=NS)


def test_serve_parameter_errors() -> None:
    with pytest.raises(TauSDKError, match=r"profiles_dir is not supported.*workload_profile_snapshot"):
        tau.serve("s", "p", profiles_dir="profiles/")
    with pytest.raises(TauSDKError, match=r"args applies to kind='deployment' only"):
        tau.serve("s", "p", args=["--x"])
