"""``--namespace-scope``: a controller scoped to namespaces leaves runs elsewhere alone."""

from __future__ import annotations

from typing import Any

from tau_core import keys
from tau_core.retry import OWNER_CONTROLLER, RetryPolicy, policy_annotation

POLICY = policy_annotation(RetryPolicy(2, ("Unknown",), 600.0, 600.0, ""))


def _failed_job(cluster: Any, namespace: str) -> None:
    cluster.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    cluster.store.create({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "run", "namespace": namespace,
                     "annotations": {keys.RETRY_OWNER: OWNER_CONTROLLER, keys.RETRY_POLICY: POLICY}},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "ghcr.io/acme/train:1.0"}]}}}})
    job = cluster.store.get("batch/v1", "Job", namespace, "run")
    job["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}
    cluster.store.update_status(job)


def _annotations(cluster: Any, namespace: str) -> dict[str, str]:
    return cluster.store.get("batch/v1", "Job", namespace, "run")["metadata"].get("annotations") or {}


def test_a_namespace_scoped_controller_ignores_runs_elsewhere(platform, controller_factory):
    _failed_job(platform, "outside")
    _failed_job(platform, "inside")
    controller_factory(platform, namespace_scope=("inside",))
    # the controller takes on the failed run in its namespace (stamps when its retry is due)...
    platform.wait_for(lambda: keys.RETRY_DUE in _annotations(platform, "inside"), timeout=30)
    # ...and never touches the one outside it
    assert keys.RETRY_DUE not in _annotations(platform, "outside")
    assert not [r for r in platform.requests.entries if "/namespaces/outside/" in r.path and r.method != "GET"]


def test_a_cluster_wide_controller_takes_both(platform, controller_factory):
    _failed_job(platform, "outside")
    _failed_job(platform, "inside")
    controller_factory(platform)
    for namespace in ("inside", "outside"):
        platform.wait_for(lambda ns=namespace: keys.RETRY_DUE in _annotations(platform, ns), timeout=30)
