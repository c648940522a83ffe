"""The pod's ServiceAccount as a kubeconfig (``tau_core.kubeconfig.in_cluster_config``): only inside a pod."""

from __future__ import annotations

from pathlib import Path

from tau_core.kubeconfig import in_cluster_config


def test_outside_a_pod_there_is_no_in_cluster_config(tmp_path: Path) -> None:
    assert in_cluster_config({}, tmp_path) is None
    (tmp_path / "token").write_text("t0ken\n")
    assert in_cluster_config({}, tmp_path) is None  # a token but no KUBERNETES_SERVICE_HOST


def test_in_a_pod_the_mounted_token_and_ca_reach_the_service_address(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t0ken\n")
    config = in_cluster_config({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}, tmp_path)
    assert config is not None
    assert config["clusters"][0]["cluster"] == {"server": "https://10.0.0.1:6443",
                                                "certificate-authority": str(tmp_path / "ca.crt")}
    assert config["users"][0]["user"] == {"token": "t0ken"}
    ipv6 = in_cluster_config({"KUBERNETES_SERVICE_HOST": "fd00::1"}, tmp_path)
    assert ipv6 is not None and ipv6["clusters"][0]["cluster"]["server"] == "https://[fd00::1]:443"
