"""Fixtures: a bare TauGrid platform (CRDs, system namespace, ClusterQueue ``jobqueue``, no workspace)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # ws_platform (tests run with --import-mode=importlib)

from ws_platform import install


@pytest.fixture
def platform(sim_cluster_factory: Callable[..., Any], tau_env: dict[str, str | None]) -> Any:
    """A fake-clock simulated cluster with the Tau CRDs and the baseline ClusterQueue; tau_cli talks to it as
    admin."""
    cluster = install(sim_cluster_factory())
    tau_env["KUBECONFIG"] = str(cluster.kubeconfig_path)
    return cluster
