"""``--local --kind rayservice`` planning, without a head: the service process's argv, its port and the Serve
config it applies (the real Ray Serve run is ``tests/e2e/test_serve_local_ray.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tau_serve import local, ray_local
from tau_serve.options import DeployArgs


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TAU_DATA_DIR", str(tmp_path / "home"))
    return tmp_path


def test_the_service_process_gets_a_free_port_kept_across_redeploys() -> None:
    plan = local.service_plan(DeployArgs(name="llm", kind="rayservice", import_path="app:app", replicas=2,
                                         env=("A=1",)))
    argv, port = plan["argv"], plan["port"]
    assert argv[:3] == [sys.executable, "-m", "tau_serve.ray_local"] and port != 8000
    assert argv[argv.index("--port") + 1] == str(port) and argv[argv.index("--replicas") + 1] == "2"
    assert argv[argv.index("--run-dir") + 1] == local.RUN_DIR and argv[argv.index("--import-path") + 1] == "app:app"
    assert plan["env"]["A"] == "1" and plan["env"]["HOST"] == "127.0.0.1"
    local._write_index("llm", {**plan, "run_id": "serve-llm-1", "replicas": 2})
    again = local.service_plan(DeployArgs(name="llm", kind="rayservice", import_path="app:app", replicas=2,
                                          env=("A=1",)))
    assert again == plan  # a redeploy with the same flags is recognised as unchanged
    fixed = local.service_plan(DeployArgs(name="other", kind="rayservice", port=18123))
    assert fixed["port"] == 18123 and "serve:app" in fixed["argv"]


def test_the_serve_config_is_the_cluster_shape_bound_to_loopback() -> None:
    config = ray_local.serve_config("app:app", 18123, {"model": "m"}, {"Greeter": 3})
    assert config == {"http_options": {"host": "127.0.0.1", "port": 18123}, "applications": [
        {"name": "default", "route_prefix": "/", "import_path": "app:app", "args": {"model": "m"},
         "deployments": [{"name": "Greeter", "num_replicas": 3}]}]}
    assert json.loads(json.dumps(config)) == config
    assert ray_local.head_cpus(1) >= 4 and ray_local.head_cpus(5) >= 10
