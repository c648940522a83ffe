"""The simulated cluster the API-server conformance modules (test_sim_api_*.py) share."""

from __future__ import annotations

import pytest


@pytest.fixture
def cluster(sim_cluster_factory):
    """A simulated cluster without controllers: only the API server's own behaviour."""
    return sim_cluster_factory(controllers=False)
