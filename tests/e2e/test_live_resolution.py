"""Resolution against the live (simulated) cluster: workspace discovery and defaults, the
repository connection, and TauCluster workload profiles, all with visible sources."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tau_core import keys

TAU = ("tau.azure.com/v1alpha1", "TauCluster")
DESCRIPTOR = """\
schema: tau.workspace.connection.v1
workspace: aurora
cluster:
  contextName: {context}
access:
  method: kubeconfig
authorization:
  mode: workspace-rbac
  requiredRole: tau-researcher-v1
requirements:
  minTauVersion: 0.1.0
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    (root / "tau").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "train.py").write_text("print('hi')\n")
    monkeypatch.chdir(root)
    return root


def target(repo: Path, body: str, name: str = "train") -> None:
    (repo / "tau" / f"{name}.yaml").write_text(
        f"name: {name}\nengine: job\nentrypoint: ../train.py\nruntime:\n  image: ghcr.io/acme/train:1.0\n" + body)


def dry_run(tau_cli, *args: str):
    result = tau_cli("run", "train", "--dry-run=server", *args)
    assert result.exit_code == 0, result
    return result


def test_primary_workspace_supplies_namespace_queue_and_service_account(taugrid_cluster, tau_cli, repo):
    target(repo, "compute:\n  gpus: 0\n")
    result = tau_cli("run", "train")
    assert result.exit_code == 0, result
    job = taugrid_cluster.cluster.store.get("batch/v1", "Job", "aurora", "train")
    assert job is not None
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "jobqueue"
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "tau-workload"


def test_client_dry_run_with_a_descriptor_activates_it_and_shows_sources(taugrid_cluster, tau_cli, repo):
    (repo / "tau" / "workspace.connection.yaml").write_text(
        DESCRIPTOR.format(context=taugrid_cluster.researcher_context))
    target(repo, "compute:\n  gpus: 0\n")
    result = tau_cli("run", "train", "--dry-run=client", input="y\n")
    assert result.exit_code == 0, result
    assert "Approve and connect?" in result.stderr
    assert "namespace: aurora" in result.stdout and "workspace" in result.stdout
    assert "<unresolved-namespace>" not in result.stdout
    # sources are visible: the namespace came from the connection / workspace, not the config
    line = next(x for x in result.stdout.splitlines() if x.strip().startswith("namespace: aurora"))
    assert "workspace" in line


def test_tau_context_conflicting_with_the_descriptor_is_an_error(taugrid_cluster, tau_cli, repo):
    (repo / "tau" / "workspace.connection.yaml").write_text(
        DESCRIPTOR.format(context=taugrid_cluster.researcher_context))
    target(repo, "compute:\n  gpus: 0\n")
    result = tau_cli("run", "train", "--dry-run=client", env={"TAU_CONTEXT": "tau-sim"})
    assert result.exit_code == 1
    assert '$TAU_CONTEXT names context "tau-sim" but' in result.stderr
    assert f'names "{taugrid_cluster.researcher_context}"' in result.stderr
    assert "hint: pass --context to choose one" in result.stderr


def test_selected_profile_comes_from_taucluster_status_with_stamps(taugrid_cluster, tau_cli, repo):
    target(repo, "policy:\n  profile: cpu-small\n")
    result = tau_cli("run", "train", "--dry-run=client", "-n", "aurora")
    assert result.exit_code == 0, result
    docs = [d for d in YAML(typ="safe").load_all(result.stdout) if d]
    job = docs[0]
    annotations = job["metadata"]["annotations"]
    assert annotations[keys.WORKLOAD_PROFILE] == "cpu-small"
    assert annotations[keys.TAU_CLUSTER_GENERATION] == "1"
    published = taugrid_cluster.cluster.store.get(*TAU, None, "cluster")["status"]["workloadProfiles"]
    assert annotations[keys.WORKLOAD_PROFILE_SET_HASH] == published["profileSetHash"]


def _mutate_cluster(scenario, fn) -> None:
    store = scenario.cluster.store
    obj = store.get(*TAU, None, "cluster")
    fn(obj)
    store.update_status(obj)


def test_stale_profile_revision_is_refused(taugrid_cluster, tau_cli, repo):
    _mutate_cluster(taugrid_cluster, lambda o: o["status"]["workloadProfiles"].update(observedGeneration=0))
    target(repo, "policy:\n  profile: cpu-small\n")
    result = tau_cli("run", "train", "--dry-run=client", "-n", "aurora")
    assert result.exit_code == 1
    assert "the profile set is stale" in result.stderr


def test_profile_hash_mismatch_is_refused(taugrid_cluster, tau_cli, repo):
    _mutate_cluster(taugrid_cluster, lambda o: o["status"]["workloadProfiles"].update(profileSetHash="sha256:0"))
    target(repo, "policy:\n  profile: cpu-small\n")
    result = tau_cli("run", "train", "--dry-run=client", "-n", "aurora")
    assert result.exit_code == 1
    assert "profileSetHash does not match its published profiles" in result.stderr


def test_profiles_not_ready_are_refused(taugrid_cluster, tau_cli, repo):
    def unready(obj):
        for cond in obj["status"]["conditions"]:
            if cond["type"] == "WorkloadProfilesReady":
                cond.update(status="False", reason="ProfilesDrifted", message="flavor missing")
    _mutate_cluster(taugrid_cluster, unready)
    target(repo, "policy:\n  profile: cpu-small\n")
    result = tau_cli("run", "train", "--dry-run=client", "-n", "aurora")
    assert result.exit_code == 1
    assert "does not report WorkloadProfilesReady=True (ProfilesDrifted: flavor missing)" in result.stderr


def test_unknown_profile_lists_the_choices(taugrid_cluster, tau_cli, repo):
    target(repo, "policy:\n  profile: h100-8x\n")
    result = tau_cli("run", "train", "--dry-run=client", "-n", "aurora")
    assert result.exit_code == 1
    assert "workload profile 'h100-8x' is not in cluster" in result.stderr
    assert "cpu-small" in result.stderr and "gpu-1x" in result.stderr


def test_workspace_that_is_not_ready_blocks_submission(taugrid_cluster, tau_cli, repo):
    store = taugrid_cluster.cluster.store
    ws = store.get("tau.azure.com/v1alpha1", "TauWorkspace", "tau-system", "aurora")
    ws["status"]["phase"] = "Pending"
    store.update_status(ws)
    target(repo, "compute:\n  gpus: 0\n")
    result = tau_cli("run", "train")
    assert result.exit_code == 1
    assert "TauWorkspace aurora is not Ready (phase Pending)" in result.stderr
    assert store.get("batch/v1", "Job", "aurora", "train") is None
