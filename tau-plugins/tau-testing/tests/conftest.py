"""The simulated cluster the API-server conformance modules (test_sim_api_*.py) share."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tau_testing.sim import SimCluster


@pytest.fixture
def cluster(sim_cluster_factory: Callable[..., SimCluster]) -> SimCluster:
    """A simulated cluster without controllers: only the API server's own behaviour."""
    return sim_cluster_factory(controllers=False)
