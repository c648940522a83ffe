"""`tau workspace connection` against the simulated TauGrid cluster (real HTTP, real client)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

DESCRIPTOR = """\
schema: tau.workspace.connection.v1
workspace: {workspace}
cluster:
  contextName: {context}
  systemNamespace: tau-system
access:
  method: kubeconfig
authorization:
  mode: workspace-rbac
  requiredRole: tau-researcher-v1
requirements:
  minTauVersion: 0.1.0
"""
TAU = ("tau.azure.com/v1alpha1", "TauWorkspace")


def make_repo(root: Path, workspace: str, context: str) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / "tau").mkdir()
    (root / "tau" / "workspace.connection.yaml").write_text(DESCRIPTOR.format(workspace=workspace, context=context))
    return root


@pytest.fixture
def repo(tmp_path, taugrid_cluster):
    return make_repo(tmp_path / "repo", taugrid_cluster.workspace, taugrid_cluster.researcher_context)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_first_connection_pins_workspace_and_isolates_kubeconfig(tau_cli, tau_env, repo, taugrid_cluster):
    result = tau_cli("workspace", "connection", str(repo), "-o", "json", input="y\n")
    assert result.exit_code == 0, result
    assert "Approve and connect? [y/N]" in result.stderr
    doc = json.loads(result.stdout)
    ws = taugrid_cluster.cluster.store.get(*TAU, "tau-system", taugrid_cluster.workspace)
    assert doc["workspace_uid"] == ws["metadata"]["uid"]
    assert (doc["namespace"], doc["queue"], doc["service_account"]) == ("aurora", "jobqueue", "tau-workload")
    kubeconfig = Path(doc["kubeconfig_path"])
    assert kubeconfig.is_relative_to(Path(tau_env["TAU_CONFIG_DIR"]))
    assert (_mode(kubeconfig), _mode(kubeconfig.parent)) == (0o600, 0o700)
    isolated = json.loads(kubeconfig.read_text())
    assert [c["name"] for c in isolated["contexts"]] == [taugrid_cluster.researcher_context]
    assert len(isolated["users"]) == 1
    state_files = list((Path(tau_env["TAU_CONFIG_DIR"]) / "connections").glob("*.json"))
    assert len(state_files) == 1 and _mode(state_files[0]) == 0o600


def test_table_output(tau_cli, repo):
    result = tau_cli("workspace", "connection", str(repo), input="y\n")
    assert result.exit_code == 0, result
    assert result.stdout.splitlines()[0] == "Connected."
    assert "Status:        Ready" in result.stdout and "Queue:         jobqueue" in result.stdout


def test_first_use_without_an_answer_is_refused(tau_cli, tau_env, repo):
    result = tau_cli("workspace", "connection", str(repo))
    assert result.exit_code == 1
    assert "this repository has not been connected with Tau on this machine" in result.stderr
    assert not (Path(tau_env["TAU_CONFIG_DIR"]) / "connections").exists()


def test_declining_saves_nothing(tau_cli, tau_env, repo):
    result = tau_cli("workspace", "connection", str(repo), input="n\n")
    assert result.exit_code == 1
    assert "was not approved" in result.stderr
    assert not (Path(tau_env["TAU_CONFIG_DIR"]) / "connections").exists()


def test_readiness_is_cached_for_five_minutes(tau_cli, tau_env, repo, taugrid_cluster):
    from tau_core.workspace import activate
    from tau_core.workspace.connection import stdin_confirm

    assert tau_cli("workspace", "connection", str(repo), input="y\n").exit_code == 0
    env = {**os.environ, **{k: v for k, v in tau_env.items() if v is not None}}
    log = taugrid_cluster.cluster.requests
    before = log.total
    conn = activate(repo, confirm=stdin_confirm, env=env)
    assert conn is not None and conn.cached and conn.namespace == "aurora"
    assert log.total == before  # no request at all inside the readiness TTL


def test_workspace_not_ready_is_refused(tau_cli, repo, taugrid_cluster):
    store = taugrid_cluster.cluster.store
    ws = store.get(*TAU, "tau-system", taugrid_cluster.workspace)
    ws["status"]["phase"] = "Degraded"
    ws["status"]["conditions"] = [{"type": "QueueReady", "status": "False", "reason": "LocalQueueMissing",
                                   "message": "LocalQueue jobqueue not found", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    store.update_status(ws)
    result = tau_cli("workspace", "connection", str(repo), input="y\n")
    assert result.exit_code == 1
    assert "TauWorkspace aurora is not Ready (phase Degraded)" in result.stderr
    assert "QueueReady=False (LocalQueueMissing" in result.stderr
    assert "hint: tau workspace status aurora" in result.stderr


def test_drift_needs_review(tau_cli, repo, taugrid_cluster):
    assert tau_cli("workspace", "connection", str(repo), input="y\n").exit_code == 0
    store = taugrid_cluster.cluster.store
    ws = store.get(*TAU, "tau-system", taugrid_cluster.workspace)
    ws["spec"]["workloadIdentity"]["serviceAccountName"] = "other-sa"
    store.update(ws)
    ws = store.get(*TAU, "tau-system", taugrid_cluster.workspace)
    ws["status"]["observedGeneration"] = ws["metadata"]["generation"]
    store.update_status(ws)
    result = tau_cli("workspace", "connection", str(repo))
    assert result.exit_code == 1
    assert "workspace connection requires interactive review" in result.stderr
    result = tau_cli("workspace", "connection", str(repo), "-o", "json", input="y\n")
    assert result.exit_code == 0, result
    assert json.loads(result.stdout)["service_account"] == "other-sa"


def test_stale_generation_is_not_ready(tau_cli, repo, taugrid_cluster):
    store = taugrid_cluster.cluster.store
    ws = store.get(*TAU, "tau-system", taugrid_cluster.workspace)
    ws["spec"]["defaults"] = {**(ws["spec"].get("defaults") or {}), "priority": "normal"}
    store.update(ws)  # the controller has not observed the new generation
    result = tau_cli("workspace", "connection", str(repo), input="y\n")
    assert result.exit_code == 1
    assert "status describes generation 1, spec is at 2" in result.stderr


def test_researcher_without_permission_gets_a_clear_error(tau_cli, tmp_path, taugrid_cluster):
    repo = make_repo(tmp_path / "outsider", taugrid_cluster.workspace, taugrid_cluster.outsider_context)
    result = tau_cli("workspace", "connection", str(repo), input="y\n")
    assert result.exit_code == 1
    assert "forbidden" in result.stderr.lower() or "not allowed" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_context_lists_the_available_ones(tau_cli, tmp_path, taugrid_cluster):
    repo = make_repo(tmp_path / "typo", taugrid_cluster.workspace, "no-such-context")
    result = tau_cli("workspace", "connection", str(repo), input="y\n")
    assert result.exit_code == 1
    assert 'context "no-such-context" not found' in result.stderr
    assert taugrid_cluster.researcher_context in result.stderr


def test_cluster_without_taugrid_is_named(tau_cli, tau_env, tmp_path, sim_cluster):
    kubeconfig = sim_cluster.write_kubeconfig(tmp_path / "kube", user="admin")
    repo = make_repo(tmp_path / "plain", "aurora", sim_cluster.context_for("admin"))
    result = tau_cli("workspace", "connection", str(repo), input="y\n", env={"KUBECONFIG": str(kubeconfig)})
    assert result.exit_code == 1
    assert "TauGrid" in result.stderr
    assert "Traceback" not in result.stderr
