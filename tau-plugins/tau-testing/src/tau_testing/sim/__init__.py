"""A simulated Kubernetes API server for tests: real HTTP, in-memory objects, scriptable controllers.

It is a test double, never a backend. See the tau-testing README ("Simulated cluster") for what it simulates.
"""

from tau_testing.sim.cluster import SimCluster
from tau_testing.sim.errors import ApiError

__all__ = ["ApiError", "SimCluster"]
