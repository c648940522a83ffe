"""The lifecycle verbs' command line: routing precedence, flag conflicts, list, not-Ready workspaces."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tau_core import keys
from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario


def job(name: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta = {keys.KUEUE_QUEUE_NAME: "jobqueue", keys.MANAGED_BY: keys.MANAGED_BY_VALUE, **(labels or {})}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": meta},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "main", "image": "ghcr.io/acme/t:1",
                                                          "resources": {"requests": {"cpu": "100m"}}}]}}}}


@pytest.fixture
def in_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_help_teaches_with_examples(tau_cli) -> None:
    for verb, example in (("list", "tau run list --include-external -o json"), ("status", "--watch"),
                          ("logs", "tau run logs train-7f2c -f"), ("get", "--artifact metrics/final.json"),
                          ("cancel", "--wait=false"), ("resume", "--config tau/train.yaml")):
        r = tau_cli("run", verb, "--help")
        assert r.exit_code == 0, r
        assert example in r.stdout
        assert "--system-namespace" in r.stdout and "--context" in r.stdout


def test_list_filters_and_shows_external_jobs_on_request(taugrid_cluster: TauGridScenario, tau_cli,
                                                          in_repo: Path) -> None:
    store = taugrid_cluster.cluster.store
    store.create(job("mine"))
    store.create(job("other-queue", labels={keys.KUEUE_QUEUE_NAME: "other"}))
    ext = job("external")
    del ext["metadata"]["labels"][keys.MANAGED_BY]
    store.create(ext)
    r = tau_cli("run", "list")  # namespace from the cluster's primary workspace
    assert r.exit_code == 0, r
    names = [line.split()[0] for line in r.stdout.splitlines()[1:]]
    assert sorted(names) == ["mine", "other-queue"]
    r = tau_cli("run", "list", "--queue", "jobqueue", "-o", "json")
    assert [d["name"] for d in json.loads(r.stdout)] == ["mine"]
    r = tau_cli("run", "list", "--include-external")
    assert "external" in r.stdout and "SOURCE" in r.stdout


def test_empty_list_says_so(taugrid_cluster, tau_cli, in_repo: Path) -> None:
    r = tau_cli("run", "list", "-n", NAMESPACE)
    assert r.exit_code == 0
    assert 'No jobs found in namespace "aurora"' in r.stdout


def test_outside_a_git_repository_needs_context_or_namespace(taugrid_cluster, tau_cli, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = tau_cli("run", "status", "x")
    assert r.exit_code == 2
    assert "lifecycle commands outside a Git repository require explicit --context or --namespace" in r.stderr


def test_workspace_flag_routes_and_conflicting_namespace_is_refused(taugrid_cluster, tau_cli,
                                                                    in_repo: Path) -> None:
    taugrid_cluster.cluster.store.create(job("w1"))
    r = tau_cli("run", "status", "w1", "--workspace", "aurora", "-o", "json")
    assert r.exit_code == 0, r
    assert json.loads(r.stdout)["namespace"] == NAMESPACE
    r = tau_cli("run", "status", "w1", "--workspace", "aurora", "-n", "elsewhere")
    assert r.exit_code == 2
    assert 'namespace "elsewhere" conflicts with TauWorkspace "aurora" target namespace "aurora"' in r.stderr
    r = tau_cli("run", "status", "w1", "--workspace", "nope")
    assert r.exit_code == 1 and 'TauWorkspace "nope" not found' in r.stderr


def test_a_workspace_that_is_not_ready_is_refused(taugrid_cluster: TauGridScenario, tau_cli,
                                                  in_repo: Path) -> None:
    store = taugrid_cluster.cluster.store
    ws = store.get("tau.azure.com/v1alpha1", "TauWorkspace", "tau-system", "aurora")
    ws["status"]["phase"] = "Degraded"
    store.update_status(ws)
    r = tau_cli("run", "status", "anything")
    assert r.exit_code == 1
    assert 'workspace "aurora" is not Ready (phase=Degraded)' in r.stderr
    assert "tau workspace status aurora" in r.stderr


def test_tau_context_conflicting_with_the_descriptor_is_an_error(taugrid_cluster, tau_cli,
                                                                in_repo: Path) -> None:
    (in_repo / "tau").mkdir()
    (in_repo / "tau" / "workspace.connection.yaml").write_text(
        "schema: tau.workspace.connection.v1\nworkspace: aurora\ncluster:\n  contextName: tau-sim-researcher\n"
        "access:\n  method: kubeconfig\nauthorization:\n  mode: workspace-rbac\n  requiredRole: tau-researcher-v1\n"
        "requirements:\n  minTauVersion: 0.1.0\n")
    r = tau_cli("run", "status", "x", env={"TAU_CONTEXT": "tau-sim"})
    assert r.exit_code == 2
    assert '$TAU_CONTEXT names context "tau-sim" but' in r.stderr and "pass --context" in r.stderr
    r = tau_cli("run", "status", "x", "--context", "tau-sim-researcher", "-n", NAMESPACE)  # a typed flag never conflicts
    assert r.exit_code == 1 and 'no Job or RayJob named "x"' in r.stdout + r.stderr


def test_cancel_wait_false_and_logs_tail_zero(taugrid_cluster: TauGridScenario, tau_cli, in_repo: Path) -> None:
    taugrid_cluster.cluster.store.create(job("c1"))
    r = tau_cli("run", "logs", "c1", "-n", NAMESPACE, "--tail", "0")
    assert r.exit_code == 0 and r.stdout == ""
    r = tau_cli("run", "cancel", "c1", "-n", NAMESPACE, "--wait=false")
    assert r.exit_code == 0, r
    assert "teardown is incomplete" in r.stdout
    r = tau_cli("run", "logs", "c1", "-n", NAMESPACE, "--tail", "-5")
    assert r.exit_code == 2
