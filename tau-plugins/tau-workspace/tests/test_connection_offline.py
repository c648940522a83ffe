"""`tau workspace connection --offline` and the error paths that need no cluster."""

from __future__ import annotations

import json
from pathlib import Path

DESCRIPTOR = """\
schema: tau.workspace.connection.v1
workspace: research
cluster:
  contextName: research-cluster
access:
  method: {method}
authorization:
  mode: cluster-wide
requirements:
  minTauVersion: 0.1.0
"""


def make_repo(root: Path, method: str = "kubeconfig") -> Path:
    (root / ".git").mkdir(parents=True)
    (root / "tau").mkdir()
    (root / "tau" / "workspace.connection.yaml").write_text(DESCRIPTOR.format(method=method))
    (root / "src" / "pkg").mkdir(parents=True)
    return root


def test_offline_validates_without_network(tau_cli, tmp_path):
    repo = make_repo(tmp_path / "repo")
    result = tau_cli("workspace", "connection", "--offline", str(repo / "src" / "pkg"))
    assert result.exit_code == 0, result
    assert result.stdout.splitlines()[0] == "Workspace connection configuration is valid."
    assert "Workspace:     research" in result.stdout
    assert result.stdout.rstrip().endswith("Cluster access was not checked.")


def test_offline_json(tau_cli, tmp_path):
    repo = make_repo(tmp_path / "repo")
    result = tau_cli("workspace", "connection", "--offline", "-o", "json", str(repo))
    doc = json.loads(result.stdout)
    assert doc["workspace"] == "research" and doc["access"] == "kubeconfig" and doc["digest"].startswith("sha256:")


def test_offline_saves_no_state(tau_cli, tau_env, tmp_path):
    repo = make_repo(tmp_path / "repo")
    assert tau_cli("workspace", "connection", "--offline", str(repo)).exit_code == 0
    assert not Path(tau_env["TAU_CONFIG_DIR"]).exists()


def test_missing_descriptor_names_the_search_range(tau_cli, tmp_path):
    repo = tmp_path / "bare"
    (repo / ".git").mkdir(parents=True)
    result = tau_cli("workspace", "connection", "--offline", str(repo))
    assert result.exit_code == 1
    assert "Tau workspace connection descriptor not found: expected tau/workspace.connection.yaml" in result.stderr
    assert "hint:" in result.stderr and "Traceback" not in result.stderr


def test_invalid_descriptor_reports_file_line_and_field(tau_cli, tmp_path):
    repo = make_repo(tmp_path / "repo")
    path = repo / "tau" / "workspace.connection.yaml"
    path.write_text(path.read_text().replace("mode: cluster-wide", "mode: open"))
    result = tau_cli("workspace", "connection", "--offline", str(repo))
    assert result.exit_code == 1
    assert "workspace.connection.yaml:8:3: authorization.mode: 'open' is not one of" in result.stderr


def test_aks_access_asks_for_approval_before_any_sign_in(tau_cli, tau_env, tmp_path):
    repo = tmp_path / "repo"
    make_repo(repo)
    path = repo / "tau" / "workspace.connection.yaml"
    path.write_text(path.read_text().replace(
        "  method: kubeconfig\n",
        "  method: aks\n  aks:\n    resourceID: /subscriptions/6f1e3b1a-0000-4000-8000-000000000001/resourceGroups/rg/"
        "providers/Microsoft.ContainerService/managedClusters/c\n    tenantID: 72f988bf-86f1-41af-91ab-2d7cd011db47\n"))
    assert tau_cli("workspace", "connection", "--offline", str(repo)).exit_code == 0
    result = tau_cli("workspace", "connection", str(repo))
    assert result.exit_code == 1
    assert "this repository has not been connected with Tau on this machine" in result.stderr
    assert "AKS cluster:    /subscriptions/6f1e3b1a-0000-4000-8000-000000000001/" in result.stderr
    assert not (Path(tau_env["TAU_CONFIG_DIR"]) / "auth").exists()  # no sign-in was attempted


def test_unreachable_context_is_a_clean_error(tau_cli, tmp_path):
    repo = make_repo(tmp_path / "repo")
    result = tau_cli("workspace", "connection", str(repo), input="y\n")
    assert result.exit_code == 1
    assert "no kubeconfig found" in result.stderr
    assert "Traceback" not in result.stderr
