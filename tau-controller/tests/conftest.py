"""Fixtures: a simulated cluster with TauGrid's platform pieces installed (no workspace yet), and the real
controller running against it in a thread (kopf embedded, talking HTTP to the simulator through a kubeconfig)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # ctrl_platform (tests run with --import-mode=importlib)

from ctrl_platform import install_platform

from tau_controller.runtime import Controller, Options


@pytest.fixture
def platform(sim_cluster_factory: Callable[..., Any]) -> Any:
    """A fake-clock simulated cluster holding the Tau CRDs, the baseline ClusterQueue ``jobqueue``, flavors,
    priority classes, the chart's ClusterRoles, nodes and the TauCluster ``cluster`` (spec only)."""
    cluster = sim_cluster_factory()
    install_platform(cluster)
    return cluster


@pytest.fixture
def controller_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Controller]]:
    started: list[Controller] = []

    def start(cluster: Any, *, user: str = "admin", wait_ready: bool = True, **options: Any) -> Controller:
        path = cluster.write_kubeconfig(tmp_path_factory.mktemp("ctrl") / "kubeconfig", user=user)
        options.setdefault("health_address", "127.0.0.1:0")
        options.setdefault("metrics_address", "127.0.0.1:0")
        controller = Controller(Options(kubeconfig=str(path), **options))
        started.append(controller)
        return controller.start_thread(wait_ready=wait_ready)

    yield start
    for controller in started:
        controller.stop()


@pytest.fixture
def controller(platform: Any, controller_factory: Callable[..., Controller]) -> Controller:
    """The controller, running against ``platform``."""
    return controller_factory(platform)


@pytest.fixture
def tau_commands() -> None:
    """The ``tau run`` and ``tau workspace`` roots: tau-controller's test extra installs them (also in the
    isolated ``nox -s "dist(tau-controller)"`` session), so a missing one is an error, never a skip."""
    import tau_run  # noqa: F401
    import tau_workspace  # noqa: F401
