"""`tau.serve(...).submit()` against the simulated TauGrid cluster, as the researcher, in-process.

The SDK reaches `tau serve deploy` through the `serve` root in tau_core's root registry (no subprocess, no
`tau` on PATH); the simulator's KubeRay controller brings the RayService to Running, and `tau serve status`
(the real command) reports it ready. A client dry-run of the same handle prints the objects with the
secret reference redacted and creates nothing.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

import tau
from tau_core.plugins import Host, set_host

IMAGE = "registry.example.com/serve/llm@sha256:" + "c" * 64
NS = "aurora"


@pytest.fixture
def sdk_env(taugrid_cluster: Any, tau_env: dict[str, str | None], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The SDK's process environment is the researcher's (the same kubeconfig `tau_cli` uses); no PATH."""
    for key, value in tau_env.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    monkeypatch.delenv("TAU_BINARY", raising=False)
    monkeypatch.setenv("PATH", "")

    def no_subprocess(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the SDK must deploy in-process")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    previous = set_host(Host.create())
    try:
        yield taugrid_cluster
    finally:
        set_host(previous)


def handle() -> tau.ServeHandle:
    return tau.serve("sdk-llm", "cpu-small", checkpoint="sdk-train/step-100", image=IMAGE, replicas=2,
                     env={"LOG_LEVEL": "info", "HF_TOKEN": tau.secret_ref("hf-secret", "token")})


def test_a_serve_handle_deploys_a_rayservice_that_becomes_ready(sdk_env: Any, tau_cli: Any) -> None:
    store = sdk_env.cluster.store
    dry = handle().submit(dry_run="client", namespace=NS, capture=True)
    (rendered,) = [o for o in yaml.safe_load_all(dry.stdout) if o]
    assert rendered["kind"] == "RayService" and "hf-secret" not in dry.stdout  # the reference is redacted
    assert store.get("ray.io/v1", "RayService", NS, "sdk-llm") is None  # a client dry-run creates nothing
    server = handle().submit(dry_run="server", namespace=NS, capture=True)
    assert "validated (server dry-run) service sdk-llm" in server.stdout
    assert store.get("ray.io/v1", "RayService", NS, "sdk-llm") is None  # nor does a server dry-run

    out = handle().submit(namespace=NS, capture=True)
    assert out.exit_code == 0 and "deployed service sdk-llm (kind=rayservice, profile=cpu-small" in out.stdout
    service = store.get("ray.io/v1", "RayService", NS, "sdk-llm")
    assert service is not None
    head = service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in head["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf-secret", "key": "token"}
    assert env["TAU_MODEL_PATH"]["value"] == "/data/checkpoints/sdk-train/step-100"
    assert yaml.safe_load(service["spec"]["serveConfigV2"])["applications"][0]["deployments"][0]["num_replicas"] == 2

    sdk_env.cluster.advance(60)
    status = tau_cli("serve", "status", "sdk-llm", "-n", NS, "-o", "json")
    assert status.exit_code == 0, status
    ready = json.loads(status.stdout)
    assert ready["ready"] is True and ready["status"] == "Running" and ready["endpoints"] >= 1

    sdk_env.cluster.settle()
    before = store.get("ray.io/v1", "RayService", NS, "sdk-llm")
    again = handle().deploy(namespace=NS, capture=True)  # the same intent again changes nothing
    assert again.exit_code == 0
    after = store.get("ray.io/v1", "RayService", NS, "sdk-llm")
    assert before and after and after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_a_refused_profile_is_the_cli_error(sdk_env: Any) -> None:
    with pytest.raises(tau.TauCLIError, match=r"tau serve deploy failed for 'sdk-llm' \(exit=\d\): .*no-such"):
        tau.serve("sdk-llm", "no-such", image=IMAGE).submit(namespace=NS, capture=True)
    assert sdk_env.cluster.store.get("ray.io/v1", "RayService", NS, "sdk-llm") is None
