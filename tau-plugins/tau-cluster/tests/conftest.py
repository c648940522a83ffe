"""Fixtures: the real Helm on PATH, the umbrella with local stand-ins, and a simulated cluster Helm can reach."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tau_core.config.profiles import profile_set_hash
from tau_testing.charts import DaemonSetStatus, build_test_umbrella


class TauClusterStandIn:
    """A test-side stand-in for the Tau controller (issue 11), which is not part of this branch.

    It writes the status the controller publishes for the singleton: the generation observed, phase Ready,
    NodesReady=True and every declared workload profile resolved and Ready, with the profileSetHash
    computed by tau_core. What it proves is that the readiness checks and the export read that status
    correctly, not that a controller produces it.
    """

    def __init__(self) -> None:
        self.enabled = True

    def reconcile(self, cluster: Any) -> bool:
        from tau_testing.sim import ApiError

        try:
            tc = cluster.store.get("tau.azure.com/v1alpha1", "TauCluster", None, "cluster")
        except ApiError:  # the Tau CRDs are not installed yet
            return False
        if tc is None:
            return False
        generation = tc["metadata"].get("generation", 1)
        if (tc.get("status") or {}).get("observedGeneration") == generation:
            return False
        ready = {"status": "True", "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z"}
        profiles = []
        for p in (tc.get("spec") or {}).get("workloadProfiles") or []:
            profiles.append({**p, "conditions": [{"type": "Ready", "reason": "WorkloadProfileReady",
                                                  "message": "resolved", **ready}]})
        hashable = [{k: v for k, v in p.items() if k != "conditions"} for p in profiles]
        tc["status"] = {
            "phase": "Ready", "observedGeneration": generation,
            "conditions": [{"type": "NodesReady", "reason": "NoMatchingNodes", "message": "no catalog node", **ready},
                           {"type": "WorkloadProfilesReady", "reason": "WorkloadProfilesReady",
                            "message": f"{len(profiles)} workload profiles resolved", **ready}],
            "workloadProfiles": {"observedGeneration": generation, "observed": len(profiles),
                                 "ready": len(profiles), "drifted": 0,
                                 "profileSetHash": profile_set_hash(hashable), "profiles": profiles},
        }
        cluster.store.update_status(tc)
        return True


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
