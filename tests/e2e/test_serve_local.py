"""`tau serve deploy --local`: a supervised local server on 127.0.0.1, managed through the same verbs."""

from __future__ import annotations

import socket
import sys
import time
import urllib.request
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(tau_cli: Any, name: str, timeout: float = 60.0) -> dict[str, Any]:
    import json

    deadline = time.monotonic() + timeout
    while True:
        result = tau_cli("serve", "status", name, "--local", "--kind", "deployment", "-o", "json")
        assert result.exit_code == 0, result
        status = json.loads(result.stdout)
        if status["ready"] or time.monotonic() > deadline:
            return dict(status)
        time.sleep(0.2)


def test_local_deployment_serves_on_localhost_scales_and_deletes(tau_cli: Any, tmp_path: Any) -> None:
    (tmp_path / "index.html").write_text("hello from tau serve\n")
    port = free_port()
    args = ["serve", "deploy", "web", "--local", "--kind", "deployment", "--deployment-port", str(port),
            "--command", sys.executable, "--arg", "-m", "--arg", "http.server", "--arg", str(port),
            "--arg", "--bind", "--arg", "127.0.0.1", "--arg", "--directory", "--arg", str(tmp_path)]
    deployed = tau_cli(*args)
    assert deployed.exit_code == 0, deployed
    try:
        assert f"http://127.0.0.1:{port}" in deployed.stdout
        status = wait_ready(tau_cli, "web")
        assert status["ready"] is True and status["phase"] == "Ready"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=5) as response:
            assert response.read() == b"hello from tau serve\n"
        again = tau_cli(*args)
        assert again.exit_code == 0 and "unchanged" in again.stdout
        assert tau_cli("serve", "scale", "web", "--local", "--kind", "deployment", "--replicas", "0").exit_code == 0
        stopped = tau_cli("serve", "status", "web", "--local", "--kind", "deployment", "-o", "json")
        assert '"ready": false' in stopped.stdout
        too_many = tau_cli("serve", "scale", "web", "--local", "--kind", "deployment", "--replicas", "2")
        assert too_many.exit_code == 2 and "--replicas" in too_many.stderr
        assert tau_cli("serve", "scale", "web", "--local", "--kind", "deployment", "--replicas", "1").exit_code == 0
        assert wait_ready(tau_cli, "web")["ready"] is True
    finally:
        deleted = tau_cli("serve", "delete", "web", "--local", "--kind", "deployment")
    assert deleted.exit_code == 0, deleted
    assert tau_cli("serve", "delete", "web", "--local", "--kind", "deployment").stdout.strip().endswith("already gone")


def test_local_rayservice_without_ray_names_the_extra(tau_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray looks like to an import
    result = tau_cli("serve", "deploy", "llm", "--local")
    assert result.exit_code == 2
    assert "Ray is not installed" in result.stderr and "tau[ray]" in result.stderr


def test_local_rayservice_without_serve_s_http_stack_names_what_is_missing(tau_cli: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray installed without its serve extra: say so before a head starts (the dashboard would answer 501)."""
    monkeypatch.setitem(sys.modules, "fastapi", None)
    result = tau_cli("serve", "deploy", "llm", "--local")
    assert result.exit_code == 2
    assert "Ray Serve's HTTP stack is missing (fastapi)" in result.stderr and "tau[ray]" in result.stderr


def test_local_needs_a_command_and_refuses_secrets(tau_cli: Any) -> None:
    no_command = tau_cli("serve", "deploy", "web", "--local", "--kind", "deployment")
    assert no_command.exit_code == 2 and "--command" in no_command.stderr
    secret = tau_cli("serve", "deploy", "web", "--local", "--kind", "deployment", "--command", "true",
                     "--env-secret", "T=s:k")
    assert secret.exit_code == 2 and "--env-secret" in secret.stderr
