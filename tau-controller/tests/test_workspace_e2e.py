"""TauWorkspace reconciler end to end: the real controller (kopf) against the simulated cluster."""

from __future__ import annotations

from typing import Any

from ctrl_platform import QUEUE, workspace

from tau_core import keys
from tau_testing.sim.scenarios.taugrid import SYSTEM_NAMESPACE

TAU = keys.API_VERSION


def _ws(cluster: Any, name: str) -> dict[str, Any] | None:
    return cluster.store.get(TAU, "TauWorkspace", SYSTEM_NAMESPACE, name)


def _phase(cluster: Any, name: str) -> str | None:
    return ((_ws(cluster, name) or {}).get("status") or {}).get("phase")


def _conditions(cluster: Any, name: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((_ws(cluster, name) or {}).get("status") or {}).get("conditions") or []}


def test_new_workspace_becomes_ready(platform, controller):
    platform.store.create(workspace())
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)
    ws = _ws(platform, "aurora")
    assert ws["metadata"]["finalizers"] == [keys.WORKSPACE_CLEANUP_FINALIZER]
    assert ws["metadata"]["annotations"][keys.V0_PRIMARY_WORKSPACE] == "true"
    assert ws["status"]["queue"] == {"localQueue": QUEUE, "clusterQueue": QUEUE}
    assert ws["status"]["target"] == {"resolvedNamespace": "aurora"}
    ns = platform.store.get("v1", "Namespace", None, "aurora")
    assert ns["metadata"]["labels"][keys.WORKSPACE] == "aurora"
    assert ns["metadata"]["labels"][keys.PSA_ENFORCE] == "baseline"
    assert ns["metadata"]["annotations"][keys.RESULT_SCOPE] == "/data/projects/aurora/runs"
    lq = platform.store.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "aurora", QUEUE)
    assert lq["spec"]["clusterQueue"] == QUEUE
    assert _conditions(platform, "aurora")["RBACReady"]["reason"] == "RoleBindingReady"
