"""In a cluster the controller runs from its ServiceAccount: no kubeconfig, the token and CA the kubelet mounts,
the API server from ``KUBERNETES_SERVICE_HOST``/``_PORT`` (here a TLS simulator standing in for the pod)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ctrl_platform import install_platform, workspace

from tau_controller.runtime import Controller, Options
from tau_core import keys

pytestmark = pytest.mark.realclock  # the controller runs in real time

ACCOUNT = "system:serviceaccount:tau-system:tau-core-controller"


def test_the_controller_reconciles_as_its_service_account_without_a_kubeconfig(
        sim_cluster_factory: Any, in_pod: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = sim_cluster_factory(tls=True)
    install_platform(cluster)
    in_pod(cluster, ACCOUNT, ["system:serviceaccounts", "system:masters"])
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.kube/config to fall back on
    controller = Controller(Options(health_address="0", metrics_address="0", leader_elect=True))
    try:
        controller.start_thread()
        cluster.store.create(workspace())
        cluster.wait_for(lambda: ((cluster.store.get(keys.API_VERSION, "TauWorkspace", "tau-system", "aurora") or {})
                                  .get("status") or {}).get("phase") == "Ready", timeout=30)
    finally:
        controller.stop()
    writers = {r.user for r in cluster.requests.entries if r.method not in ("GET", "HEAD")}
    assert writers == {ACCOUNT}, writers  # the Lease, the workspace's objects and its status
    lease = cluster.store.get("coordination.k8s.io/v1", "Lease", "tau-system", keys.CONTROLLER_LEASE)
    assert lease is not None
