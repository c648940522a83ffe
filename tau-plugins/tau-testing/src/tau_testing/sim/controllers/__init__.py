"""Controllers of the simulated cluster: Kueue, Jobs, KubeRay, Deployments, the scheduler and the kubelet.

Each controller has ``enabled`` and ``reconcile(cluster) -> bool`` (True when it wrote anything). They are
deterministic (objects are visited in namespace/name order, times come from ``cluster.clock``) and idempotent:
a pass over a settled cluster writes nothing.
"""

from __future__ import annotations

from typing import Any

from tau_testing.sim.controllers.deployments import DeploymentController
from tau_testing.sim.controllers.jobs import JobController
from tau_testing.sim.controllers.kuberay import KubeRayController
from tau_testing.sim.controllers.kueue import KueueController, evict, preempt, workloads_for
from tau_testing.sim.controllers.pods import Kubelet, evict_pod
from tau_testing.sim.controllers.scheduler import Scheduler, add_node

__all__ = [
    "DeploymentController",
    "JobController",
    "KubeRayController",
    "Kubelet",
    "KueueController",
    "Scheduler",
    "add_node",
    "default_controllers",
    "evict",
    "evict_pod",
    "install_default_controllers",
    "preempt",
    "workloads_for",
]


def default_controllers() -> dict[str, Any]:
    """The controllers in the order one settle pass runs them (name → controller)."""
    return {
        "kueue": KueueController(),
        "jobs": JobController(),
        "kuberay": KubeRayController(),
        "deployments": DeploymentController(),
        "scheduler": Scheduler(),
        "pods": Kubelet(),
    }


def install_default_controllers(cluster: Any) -> Any:
    """Register every default controller on ``cluster`` (skipping names it already has) and return it."""
    from tau_testing.sim.scripts import scripts_of

    scripts_of(cluster)
    existing = getattr(cluster, "controllers", {}) or {}
    for name, controller in default_controllers().items():
        if name not in existing:
            cluster.add_controller(name, controller)
    kueue = cluster.controllers.get("kueue")
    hooks = getattr(cluster.store, "admission_hooks", None)
    if isinstance(kueue, KueueController) and hooks is not None and kueue.admission_hook not in hooks:
        hooks.append(kueue.admission_hook)
    return cluster
