"""Strict parsing of tau/workspace.connection.yaml and its discovery."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tau_core.config.issues import ConfigValidationError
from tau_core.errors import ConfigError, NotFoundError
from tau_core.workspace import find_descriptor, load_descriptor, require_descriptor
from tau_core.workspace.descriptor import check_min_version

VALID = """\
schema: tau.workspace.connection.v1
workspace: research
cluster:
  contextName: research-cluster
  systemNamespace: tau-system
access:
  method: kubeconfig
authorization:
  mode: workspace-rbac
  requiredRole: tau-researcher-v1
requirements:
  minTauVersion: 0.3.0
network:
  privateCluster: false
"""
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
AKS_ID = ("/subscriptions/6f1e3b1a-0000-4000-8000-000000000001/resourceGroups/rg/providers/"
          "Microsoft.ContainerService/managedClusters/research")


def write(repo: Path, text: str) -> Path:
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    path = repo / "tau" / "workspace.connection.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def errors_of(path: Path) -> list[tuple[str, int]]:
    with pytest.raises(ConfigValidationError) as info:
        load_descriptor(path)
    return [(issue.path, issue.line) for issue in info.value.issues]


def test_valid_descriptor(tmp_path):
    d = load_descriptor(write(tmp_path, VALID))
    assert (d.workspace, d.context_name, d.system_namespace, d.access_method) == (
        "research", "research-cluster", "tau-system", "kubeconfig")
    assert (d.authorization_mode, d.required_role, d.private_cluster) == ("workspace-rbac", "tau-researcher-v1", False)
    assert d.digest.startswith("sha256:") and len(d.digest) == 71
    assert d.repository_root == tmp_path.resolve()


def test_digest_ignores_formatting_but_not_content(tmp_path):
    a = load_descriptor(write(tmp_path / "a", VALID)).digest
    b = load_descriptor(write(tmp_path / "b", "# comment\n" + VALID.replace("  ", "    "))).digest
    c = load_descriptor(write(tmp_path / "c", VALID.replace("research-cluster", "other"))).digest
    assert a == b != c


def test_system_namespace_defaults_to_tau_system(tmp_path):
    d = load_descriptor(write(tmp_path, VALID.replace("  systemNamespace: tau-system\n", "")))
    assert d.system_namespace == "tau-system"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("tau.workspace.connection.v1", "tau.workspace.connection.v9"), [("schema", 1)]),
        (("workspace: research", "workspace: Research_1"), [("workspace", 2)]),
        (("  contextName: research-cluster\n", ""), [("cluster.contextName", 3)]),
        (("systemNamespace: tau-system", "systemNamespace: tau.system"), [("cluster.systemNamespace", 5)]),
        (("method: kubeconfig", "method: token"), [("access.method", 7)]),
        (("mode: workspace-rbac", "mode: everyone"), [("authorization.mode", 9)]),
        (("  requiredRole: tau-researcher-v1\n", ""), [("authorization.requiredRole", 8)]),
        (("minTauVersion: 0.3.0", "minTauVersion: latest"), [("requirements.minTauVersion", 12)]),
        (("privateCluster: false", "privateCluster: true"), [("network.instructions", 13)]),
        (("privateCluster: false", "privateCluster: 'no'"), [("network.privateCluster", 14)]),
        (("  contextName:", "  contextNmae:"), [("cluster.contextNmae", 4), ("cluster.contextName", 3)]),
    ],
)
def test_field_rules_name_the_field_and_line(tmp_path, change, expected):
    path = write(tmp_path, VALID.replace(*change))
    assert errors_of(path) == expected


def test_unknown_key_suggests_the_right_one(tmp_path):
    path = write(tmp_path, VALID + "authorisation:\n  mode: cluster-wide\n")
    with pytest.raises(ConfigValidationError) as info:
        load_descriptor(path)
    issue = info.value.issues[0]
    assert (issue.path, issue.line, issue.hint) == ("authorisation", 15, "did you mean 'authorization'?")


def test_all_errors_are_reported_together(tmp_path):
    text = VALID.replace("workspace: research", "workspace: BAD!").replace("method: kubeconfig", "method: x")
    assert errors_of(write(tmp_path, text)) == [("workspace", 2), ("access.method", 7)]


def test_cluster_wide_forbids_required_role(tmp_path):
    text = VALID.replace("mode: workspace-rbac", "mode: cluster-wide")
    assert errors_of(write(tmp_path, text)) == [("authorization.requiredRole", 10)]
    ok = load_descriptor(write(tmp_path / "ok", text.replace("  requiredRole: tau-researcher-v1\n", "")))
    assert ok.required_role is None


def test_aks_block_rules(tmp_path):
    with_aks = VALID.replace("  method: kubeconfig\n", f"  method: kubeconfig\n  aks:\n    tenantID: {TENANT}\n")
    assert errors_of(write(tmp_path / "a", with_aks)) == [("access.aks", 8)]
    aks = VALID.replace("  method: kubeconfig\n", f"  method: aks\n  aks:\n    resourceID: {AKS_ID}\n    tenantID: {TENANT}\n")
    d = load_descriptor(write(tmp_path / "b", aks))
    assert (d.aks_resource_id, d.aks_tenant_id) == (AKS_ID, TENANT)
    bad = aks.replace("6f1e3b1a-0000-4000-8000-000000000001", "my-sub").replace(TENANT, "tenant")
    assert errors_of(write(tmp_path / "c", bad)) == [("access.aks.resourceID", 9), ("access.aks.tenantID", 10)]


def test_credentials_in_network_instructions_are_refused(tmp_path):
    text = VALID.replace("privateCluster: false", "privateCluster: true\n  instructions: 'connect VPN then use token: abc123'")
    assert errors_of(write(tmp_path, text)) == [("network.instructions", 15)]


def test_local_access_needs_no_cluster(tmp_path):
    text = "schema: tau.workspace.connection.v1\nworkspace: laptop\naccess:\n  method: local\nrequirements:\n  minTauVersion: 0.1.0\n"
    d = load_descriptor(write(tmp_path, text))
    assert d.is_local and d.context_name is None


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "schema: [\n", "\x00\x01binary", "a: 1\na: 2\n"])
def test_malformed_documents_get_clean_errors(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_descriptor(path)
    assert "workspace.connection.yaml" in str(info.value)


def test_min_tau_version():
    check_min_version("0.3.0", "0.5.0")
    check_min_version("v0.5.0-rc1", "0.5.0")
    check_min_version("9.0.0", "dev")
    with pytest.raises(ConfigError, match=r"Tau 0\.5\.0 is too old for this repository") as info:
        check_min_version("1.2.0", "0.5.0")
    assert "install Tau 1.2.0 or newer" in info.value.hint


def test_too_old_cli_is_refused_at_load(tmp_path):
    with pytest.raises(ConfigError, match="too old"):
        load_descriptor(write(tmp_path, VALID.replace("0.3.0", "99.0.0")))


def test_discovery_walks_up_to_the_git_boundary(tmp_path):
    repo = tmp_path / "repo"
    path = write(repo, VALID)
    deep = repo / "services" / "trainer"
    deep.mkdir(parents=True)
    assert find_descriptor(deep) == path.resolve()
    # a descriptor above the repository boundary is not used
    outer = tmp_path / "outer"
    write(outer, VALID)
    inner = outer / "nested-repo"
    (inner / ".git").mkdir(parents=True)
    assert find_descriptor(inner) is None
    with pytest.raises(NotFoundError, match=r"expected tau/workspace\.connection\.yaml between"):
        require_descriptor(inner)


def test_descriptor_symlinked_out_of_the_repository_is_refused(tmp_path):
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text(VALID)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "tau").mkdir()
    os.symlink(outside, repo / "tau" / "workspace.connection.yaml")
    with pytest.raises(ConfigError, match="outside the repository"):
        find_descriptor(repo)


def test_run_targets_find_the_descriptor_outside_a_git_repository(tmp_path):
    from tau_core.config.targets import resolve_target

    repo = tmp_path / "fresh-scaffold"  # no .git: a scaffold that was never committed
    (repo / "tau").mkdir(parents=True)
    descriptor = repo / "tau" / "workspace.connection.yaml"
    descriptor.write_text(VALID)
    (repo / "tau" / "train.yaml").write_text("name: train\n")
    target = resolve_target("train", cwd=repo)
    assert target.connection_path() == descriptor.resolve()
