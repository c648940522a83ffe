"""Fixtures: the real Helm on PATH, the umbrella with local stand-ins, and a simulated cluster Helm can reach."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tau_testing.charts import DaemonSetStatus, TauClusterStandIn, build_test_umbrella


@pytest.fixture(scope="session")
def umbrella(helm_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_test_umbrella(tmp_path_factory.mktemp("umbrella"), helm_bin)


@pytest.fixture
def live(sim_cluster_factory: Any) -> Any:
    """A simulated cluster (TLS, so Helm sends its token) with one node and the stand-in controllers."""
    from tau_testing.sim.controllers.scheduler import add_node

    cluster = sim_cluster_factory(tls=True)
    cluster.add_controller("daemonsets", DaemonSetStatus())
    cluster.stand_in = TauClusterStandIn()
    cluster.add_controller("tau-controller-stand-in", cluster.stand_in)
    add_node(cluster, "node-1", cpu="16", memory="64Gi")
    return cluster


@pytest.fixture
def env_for(tau_env: dict[str, str | None], helm_bin: Path) -> Any:
    """Point ``tau_cli`` at a cluster's kubeconfig with the real Helm first on PATH."""
    def point(cluster: Any | None = None, *, path: str | None = None) -> dict[str, str | None]:
        tau_env["PATH"] = path if path is not None else f"{helm_bin.parent}{os.pathsep}{os.environ.get('PATH', '')}"
        if cluster is not None:
            tau_env["KUBECONFIG"] = str(cluster.kubeconfig_path)
        return tau_env
    return point
