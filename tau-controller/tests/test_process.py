"""The real ``tau-controller run`` process: flags, health, readiness, Prometheus metrics, clean shutdown."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from ctrl_platform import workspace

from tau_controller.cli import main
from tau_core import keys


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> httpx.Response | None:
    try:
        return httpx.get(url, timeout=2)
    except httpx.HTTPError:
        return None


def test_help_lists_the_flags():
    result = CliRunner().invoke(main, ["run", "--help"])
    assert result.exit_code == 0
    for flag in ("--kubeconfig", "--context", "--system-namespace", "--namespace-scope", "--leader-elect",
                 "--health-probe-bind-address", "--metrics-bind-address"):
        assert flag in result.output
    # run by hand it serves health and metrics on loopback only; the chart passes ':8081' and ':8080'
    defaults = {p.name: p.default for p in main.commands["run"].params}
    assert defaults["health_probe_bind_address"] == "127.0.0.1:8081"
    assert defaults["metrics_bind_address"] == "127.0.0.1:8080"


def test_a_conflicting_deprecated_platform_namespace_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["run", "--system-namespace", "ops", "--platform-namespace", "tau-platform"])
    assert result.exit_code == 2
    assert "--system-namespace 'ops' conflicts with deprecated --platform-namespace 'tau-platform'" in result.output


def test_bad_bind_address_is_a_one_line_usage_error(tmp_path):
    cfg = tmp_path / "kubeconfig"
    cfg.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
                   "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                   "current-context: x\n")
    code = ("import sys\nfrom tau_controller.cli import main\ntry:\n    main()\n"
            "finally:\n    print('kopf loaded:', 'kopf' in sys.modules)")
    for flag in ("--health-probe-bind-address", "--metrics-bind-address"):
        result = subprocess.run([sys.executable, "-c", code, "run", "--kubeconfig", str(cfg), flag, "nonsense"],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, result.stderr
        assert f"{flag} 'nonsense' is not host:port or :port" in result.stderr
        assert "Traceback" not in result.stderr
        assert "kopf loaded: False" in result.stdout  # refused before the operator framework loads


@pytest.mark.realclock  # the controller process runs in real time
@pytest.mark.slow
def test_process_serves_health_and_metrics_on_loopback_and_reconciles(platform: Any, tmp_path):
    exe = shutil.which("tau-controller") or sys.executable
    health, metrics = _free_port(), _free_port()
    kubeconfig = platform.write_kubeconfig(tmp_path / "kubeconfig")
    args = [exe] if exe != sys.executable else [sys.executable, "-m", "tau_controller"]
    proc = subprocess.Popen([*args, "run", "--kubeconfig", str(kubeconfig),
                             "--health-probe-bind-address", f"127.0.0.1:{health}",
                             "--metrics-bind-address", f"127.0.0.1:{metrics}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while (r := _get(f"http://127.0.0.1:{health}/readyz")) is None or r.status_code != 200:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the controller never became ready"
            time.sleep(0.1)
        assert _get(f"http://127.0.0.1:{health}/healthz").text == "ok"
        platform.store.create(workspace())
        platform.wait_for(lambda: ((platform.store.get(keys.API_VERSION, "TauWorkspace", "tau-system", "aurora")
                                    or {}).get("status") or {}).get("phase") == "Ready", timeout=30)
        text = _get(f"http://127.0.0.1:{metrics}/metrics").text
        assert 'tau_controller_reconcile_total{kind="workspace",result="success"}' in text
        assert 'tau_controller_reconcile_duration_seconds_count{kind="cluster"}' in text
        assert "tau_controller_reconcile_errors_total" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output
    assert "Traceback" not in output
