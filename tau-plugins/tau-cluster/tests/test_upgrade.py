"""Upgrading a release installed from the previous chart version (built from git history) to this one."""

from __future__ import annotations

import json

import pytest

from tau_testing.charts import build_test_umbrella, deploy_tree_at, previous_chart_revision


@pytest.fixture(scope="module")
def previous_umbrella(helm_bin, tmp_path_factory):
    work = tmp_path_factory.mktemp("previous")
    revision = previous_chart_revision()
    return build_test_umbrella(work, helm_bin, deploy=deploy_tree_at(revision, work / "git")), revision


def test_upgrade_from_the_previous_chart_keeps_workspaces_and_runs(tau_cli, env_for, live, umbrella,
                                                                   previous_umbrella):
    previous, revision = previous_umbrella
    env_for(live)
    first = tau_cli("cluster", "install", "--chart", str(previous), "--timeout", "2m")
    assert first.exit_code == 0, f"install of {revision[:12]} failed: {first.stderr}"
    store = live.store
    store.create({"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": "research", "labels": {"tau.azure.com/workspace": "research"}}})
    store.create({"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauWorkspace",
                  "metadata": {"name": "research", "namespace": "tau-system"},
                  "spec": {"target": {"namespace": "research"}, "authorization": {"mode": "cluster-wide"}}})
    store.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                  "metadata": {"name": "jobqueue", "namespace": "research"}, "spec": {"clusterQueue": "jobqueue"}})
    store.create({"apiVersion": "batch/v1", "kind": "Job",
                  "metadata": {"name": "train-1", "namespace": "research",
                               "labels": {"kueue.x-k8s.io/queue-name": "jobqueue"}},
                  "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                      {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}})
    result = tau_cli("cluster", "install", "--chart", str(umbrella), "--timeout", "2m", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert "Phase 1/2" not in result.stderr and "Updating the TauGrid CRDs" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["upgrade"] is True and doc["readiness"]["ready"] is True
    assert store.get("tau.azure.com/v1alpha1", "TauWorkspace", "tau-system", "research") is not None
    assert store.get("batch/v1", "Job", "research", "train-1") is not None
    assert store.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "research", "jobqueue") is not None
    secrets = {s["metadata"]["name"] for s in store.list("v1", "Secret", "tau-system")}
    assert "sh.helm.release.v1.taugrid.v3" in secrets
