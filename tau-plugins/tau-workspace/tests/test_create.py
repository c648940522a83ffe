"""`tau workspace create` against the simulated cluster: preview, --apply, preflight refusals, bad input."""

from __future__ import annotations

from functools import partial

import pytest
import yaml

from tau_core import keys

TAU = keys.API_VERSION
SYSTEM = "tau-system"


def _workspaces(cluster):
    return cluster.store.list(TAU, "TauWorkspace", SYSTEM)


def test_preview_reads_but_creates_nothing(tau_cli, platform):
    result = tau_cli("workspace", "create", "aurora", "--principal-name", "aurora-researchers")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    uid = platform.store.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "jobqueue")["metadata"]["uid"]
    assert lines[0] == (f'# preflight passed: ClusterQueue "jobqueue" exists (uid={uid}); the controller will '
                        "create the Namespace, researcher RBAC, and LocalQueue")
    doc = yaml.safe_load("\n".join(lines[1:]))
    assert doc["kind"] == "TauWorkspace" and doc["metadata"] == {"name": "aurora", "namespace": SYSTEM}
    assert doc["spec"] == {
        "authorization": {"mode": "workspace-rbac"},
        "principalRef": {"provider": "entra", "name": "aurora-researchers"},
        "kubernetesSubject": {"kind": "Group", "name": "aurora-researchers"},
        "role": "tau-researcher-v1",
        "target": {"namespace": "aurora", "createNamespace": True},
        "queue": "jobqueue",
        "defaults": {"outputRoot": "/data/projects/aurora/runs", "priority": "normal"},
    }
    assert _workspaces(platform) == []


def test_apply_creates_once_then_reports_no_change_and_refuses_a_second(tau_cli, platform):
    args = ("workspace", "create", "aurora", "--principal-name", "aurora-researchers",
            "--service-account", "tau-workload", "--workload-identity-client-id", "0000-client")
    result = tau_cli(*args, "--apply")
    assert result.exit_code == 0, result.stderr
    assert "TauWorkspace tau-system/aurora created" in result.stdout
    [ws] = _workspaces(platform)
    assert ws["spec"]["workloadIdentity"] == {"serviceAccountName": "tau-workload", "clientId": "0000-client"}
    again = tau_cli(*args, "--apply")
    assert again.exit_code == 0, again.stderr
    assert again.stdout.splitlines()[-1] == ('TauWorkspace "aurora" already matches the requested v0 workspace; '
                                             "no changes made")
    other = tau_cli("workspace", "create", "borealis", "--principal-name", "b", "--apply")
    assert other.exit_code == 1
    assert 'TauWorkspace "aurora" already exists' in other.stderr and "different intent" in other.stderr
    changed = tau_cli("workspace", "create", "aurora", "--principal-name", "someone-else", "--apply")
    assert changed.exit_code == 1 and "different intent" in changed.stderr
    assert [w["metadata"]["name"] for w in _workspaces(platform)] == ["aurora"]


def test_inert_binding_is_announced(tau_cli, platform):
    result = tau_cli("workspace", "create", "aurora")
    assert result.exit_code == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith('# the RBAC subject defaulted to Group "aurora", which no identity provider asserts')
    assert first.endswith("grants nobody access; rerun with --principal-name <group>")
    applied = tau_cli("workspace", "create", "aurora", "--apply")
    assert applied.exit_code == 0, applied.stderr
    assert "kubectl edit workspaces.tau.azure.com aurora -n tau-system" in applied.stdout.splitlines()[0]
    [ws] = _workspaces(platform)
    assert ws["spec"]["kubernetesSubject"] == {"kind": "Group", "name": "aurora"}


@pytest.mark.parametrize(("args", "message"), [
    (("--principal-provider", "github"), "--principal-name is required for --principal-provider github with "
                                         "--subject-kind Group"),
    (("--subject-kind", "User"), "--principal-name is required for --principal-provider entra with --subject-kind"),
    (("--principal-name", "  "), "--principal-name must not be blank; omit the flag entirely"),
    (("--queue", "other"), '--queue must be "jobqueue"'),
    (("--service-account", "sa"), "--service-account and --workload-identity-client-id must be set together"),
    (("--priority", "urgent"), "--priority must be one of: default, priority, normal"),
    (("--output-root", "data/../x"), "--output-root"),
    (("--namespace", "Bad_NS"), '--namespace "Bad_NS" is not a valid DNS-1123 label'),
    (("--principal-name", "a\x1b]0;pwned\x07"), "contains control characters"),
])
def test_bad_flags_are_one_line_usage_errors(tau_cli, platform, args, message):
    result = tau_cli("workspace", "create", "aurora", *args)
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr
    assert "Traceback" not in result.stderr and "\x1b" not in result.stderr
    assert _workspaces(platform) == []


@pytest.mark.parametrize("name", ["Aurora", "a" * 64, "x-", "x;rm -rf /", "../etc", "a\u202eb"])
def test_hostile_names_are_refused_offline(tau_cli, tau_env, name):
    result = tau_cli("workspace", "create", name, "--principal-name", "g")
    assert result.exit_code == 2
    assert "workspace name" in result.stderr and "DNS-1123 label" in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # error + hint


def test_uuid_shaped_name_needs_a_principal(tau_cli, platform):
    result = tau_cli("workspace", "create", "6f1d2c3b-1a2b-4c5d-8e9f-0a1b2c3d4e5f")
    assert result.exit_code == 2
    assert "--principal-name is required when the workspace name is object-ID-shaped" in result.stderr


def test_missing_cluster_queue_is_refused(tau_cli, platform):
    platform.store.delete("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "jobqueue")
    result = tau_cli("workspace", "create", "aurora", "--principal-name", "g", "--apply")
    assert result.exit_code == 1
    assert 'ClusterQueue "jobqueue" not found' in result.stderr and "tau cluster install" in result.stderr
    assert _workspaces(platform) == []


def test_cluster_queue_replaced_between_preflight_and_apply_creates_nothing(platform, tau_env, monkeypatch):
    from ws_platform import cluster_queue

    from tau_core.errors import ConflictError
    from tau_core.kube import run
    from tau_workspace.create import CreateRequest, build_intent, create
    from tau_workspace.target import Target

    monkeypatch.setenv("KUBECONFIG", str(platform.kubeconfig_path))
    intent, inert = build_intent(CreateRequest(name="aurora", principal_name="g"), SYSTEM)

    async def replace(_session):
        platform.store.delete("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "jobqueue")
        platform.store.create(cluster_queue())

    with pytest.raises(ConflictError, match=r'ClusterQueue "jobqueue" was replaced during preflight'):
        run(partial(create, inert=inert, apply=True, between=replace), Target(None, SYSTEM), intent)
    assert _workspaces(platform) == []


def test_terminating_workspace_blocks_create(tau_cli, platform):
    tau_cli("workspace", "create", "aurora", "--principal-name", "g", "--apply")
    platform.store.patch(TAU, "TauWorkspace", SYSTEM, "aurora",
                         {"metadata": {"finalizers": [keys.WORKSPACE_CLEANUP_FINALIZER]}})
    platform.store.delete(TAU, "TauWorkspace", SYSTEM, "aurora")
    result = tau_cli("workspace", "create", "aurora", "--principal-name", "g", "--apply")
    assert result.exit_code == 1 and 'TauWorkspace "aurora" in namespace tau-system is being deleted' in result.stderr


def test_apply_asks_the_server_for_a_dry_run_before_the_create(tau_cli, platform):
    platform.requests.clear()
    result = tau_cli("workspace", "create", "aurora", "--principal-name", "g", "--apply")
    assert result.exit_code == 0, result.stderr
    posts = [r for r in platform.requests.entries if r.method == "POST" and r.path.endswith("/workspaces")]
    assert len(posts) == 2 and all(r.status == 201 for r in posts)  # the dry run, then the one real create
    assert len(_workspaces(platform)) == 1


def test_more_than_one_existing_workspace_is_refused(tau_cli, platform):
    for name in ("aurora", "borealis"):
        platform.store.create({"apiVersion": TAU, "kind": "TauWorkspace",
                               "metadata": {"name": name, "namespace": SYSTEM},
                               "spec": {"authorization": {"mode": "cluster-wide"},
                                        "target": {"namespace": name}, "queue": "jobqueue"}})
    result = tau_cli("workspace", "create", "aurora", "--principal-name", "g")
    assert result.exit_code == 1
    assert ("v0 supports one TauWorkspace, but 2 already exist in namespace tau-system (aurora, borealis)"
            in result.stderr)
    assert "Traceback" not in result.stderr


def test_terminating_cluster_queue_is_refused(tau_cli, platform):
    platform.store.patch("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "jobqueue",
                         {"metadata": {"finalizers": ["example.com/hold"]}})
    platform.store.delete("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "jobqueue")
    result = tau_cli("workspace", "create", "aurora", "--principal-name", "g", "--apply")
    assert result.exit_code == 1 and 'ClusterQueue "jobqueue" is being deleted' in result.stderr
    assert _workspaces(platform) == []


def test_unknown_context_and_non_taugrid_cluster(tau_cli, tau_env, sim_cluster_factory):
    bare = sim_cluster_factory()
    tau_env["KUBECONFIG"] = str(bare.kubeconfig_path)
    unknown = tau_cli("workspace", "create", "aurora", "--principal-name", "g", "--context", "nowhere")
    assert unknown.exit_code == 1 and '"nowhere"' in unknown.stderr
    result = tau_cli("workspace", "create", "aurora", "--principal-name", "g")
    assert result.exit_code == 1
    assert "has no TauWorkspace resources, so it does not appear to be a TauGrid cluster" in result.stderr
