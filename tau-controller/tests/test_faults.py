"""API faults (409, 429, 5xx, dropped watches) and a restart mid-reconcile: the controller converges, once."""

from __future__ import annotations

import time
from typing import Any

import pytest
from ctrl_platform import QUEUE, workspace

from tau_core import keys
from tau_testing.sim.scenarios.taugrid import SYSTEM_NAMESPACE

pytestmark = pytest.mark.realclock  # the controller runs in real time

TAU = keys.API_VERSION


def _phase(cluster: Any, name: str = "aurora") -> str | None:
    return ((cluster.store.get(TAU, "TauWorkspace", SYSTEM_NAMESPACE, name) or {}).get("status") or {}).get("phase")


def _owned(cluster: Any) -> dict[str, int]:
    counts = {}
    for api_version, kind in (("kueue.x-k8s.io/v1beta2", "LocalQueue"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
                              ("rbac.authorization.k8s.io/v1", "Role"), ("v1", "ServiceAccount"),
                              ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")):
        counts[kind] = sum(1 for o in cluster.store.list(api_version, kind)
                           if (o["metadata"].get("labels") or {}).get(keys.WORKSPACE) == "aurora")
    return counts


EXPECTED = {"LocalQueue": 1, "RoleBinding": 2, "Role": 1, "ServiceAccount": 1, "ClusterRoleBinding": 1}


@pytest.mark.slow
def test_converges_through_errors_and_dropped_watches(platform, controller):
    platform.faults.add(method="POST", status=500, rate=0.5, count=6)
    platform.faults.add(method="PUT", path_regex="/status", status=409, count=2, message="the object has been modified")
    platform.faults.add(method="GET", path_regex="/workspaces", status=429, retry_after=0, count=3)
    platform.faults.add(method="PATCH", status=503, count=2)
    platform.faults.drop_watches(after_events=1, path_regex="localqueues|workspaces", count=4)
    platform.store.create(workspace())
    platform.wait_for(lambda: _phase(platform) == "Ready", timeout=60)
    assert _owned(platform) == EXPECTED
    assert controller.metrics.errors.labels("workspace")._value.get() >= 1  # the faults were felt, and survived
    platform.store.delete("kueue.x-k8s.io/v1beta2", "LocalQueue", "aurora", QUEUE)  # watches still work
    platform.wait_for(lambda: platform.store.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "aurora", QUEUE), timeout=30)


def test_restart_mid_reconcile_converges_without_duplicates(platform, controller_factory):
    first = controller_factory(platform)
    slow = platform.faults.latency(3.0, method="POST", path_regex="/localqueues")
    platform.store.create(workspace())
    platform.wait_for(lambda: platform.store.get("rbac.authorization.k8s.io/v1", "RoleBinding", "aurora",
                                                 "tau-researcher-v1"), timeout=20)
    first.stop()  # the LocalQueue create may or may not have landed
    slow.remove()
    controller_factory(platform)
    platform.wait_for(lambda: _phase(platform) == "Ready", timeout=30)
    time.sleep(0.5)
    assert _owned(platform) == EXPECTED
