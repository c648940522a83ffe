"""`tau workspace list/status/check` and `quota show/request` against the TauGrid scenario (researcher user)."""

from __future__ import annotations

import json

import yaml

from tau_core import keys

TAU = keys.API_VERSION


def test_list_table_and_json(tau_cli, taugrid_cluster):
    table = tau_cli("workspace", "list")
    assert table.exit_code == 0, table.stderr
    assert table.stdout.splitlines() == ["NAME    PHASE  NAMESPACE  QUEUE", "aurora  Ready  aurora     jobqueue"]
    doc = json.loads(tau_cli("workspace", "list", "-o", "json").stdout)
    assert [i["metadata"]["name"] for i in doc["items"]] == ["aurora"]
    bad = tau_cli("workspace", "list", "-o", "yaml")
    assert bad.exit_code == 2 and "-o/--output must be one of: table, json" in bad.stderr


def test_empty_list(tau_cli, taugrid_cluster):
    taugrid_cluster.cluster.store.delete(TAU, "TauWorkspace", "tau-system", "aurora")
    assert tau_cli("workspace", "list").stdout.strip() == "no workspaces found"


def test_status_and_check_ready(tau_cli, taugrid_cluster):
    status = tau_cli("workspace", "status", "aurora")
    assert status.exit_code == 0, status.stderr
    out = status.stdout
    assert out.startswith("Workspace: aurora\n") and "serviceAccount: tau-workload" in out
    assert "clusterQ:       tau-cq" in out and "outputRoot:     /data/projects/aurora/runs" in out
    assert "TYPE" in out and "RBACReady" in out
    doc = json.loads(tau_cli("workspace", "status", "aurora", "-o", "json").stdout)
    assert doc["resolved"] == {"namespace": "aurora", "localQueue": "jobqueue", "serviceAccount": "tau-workload"}
    check = tau_cli("workspace", "check", "aurora", "--data-pvc", "blob-training")
    assert check.exit_code == 0, check.stderr
    assert "warning" not in check.stdout


def test_check_applies_the_exact_ready_rule(tau_cli, taugrid_cluster):
    store = taugrid_cluster.cluster.store
    store.patch(TAU, "TauWorkspace", "tau-system", "aurora", {"spec": {"defaults": {"priority": "priority"}}})
    stale = tau_cli("workspace", "check", "aurora")  # phase still Ready, but observedGeneration is behind
    assert stale.exit_code == 1
    assert 'workspace "aurora" is not Ready (phase=Ready)' in stale.stderr
    ws = store.get(TAU, "TauWorkspace", "tau-system", "aurora")
    ws["status"] = {**ws["status"], "phase": "Degraded", "observedGeneration": ws["metadata"]["generation"]}
    store.update_status(ws)
    degraded = tau_cli("workspace", "check", "aurora", "-o", "json")
    assert degraded.exit_code == 1 and 'is not Ready (phase=Degraded)' in degraded.stderr
    assert json.loads(degraded.stdout)["status"]["phase"] == "Degraded"
    missing = tau_cli("workspace", "check", "nope")
    assert missing.exit_code == 1 and 'TauWorkspace "nope" not found in namespace tau-system' in missing.stderr


def test_check_data_pvc_warnings(tau_cli, taugrid_cluster):
    missing = tau_cli("workspace", "check", "aurora", "--data-pvc", "no-such-claim")
    assert missing.exit_code == 0
    assert 'warning: durable /data PVC "no-such-claim" not found in namespace "aurora".' in missing.stdout
    as_json = tau_cli("workspace", "check", "aurora", "--data-pvc", "no-such-claim", "-o", "json")
    assert as_json.exit_code == 0 and "not found" in as_json.stderr
    json.loads(as_json.stdout)  # stdout stays parseable
    store = taugrid_cluster.cluster.store
    pvc = store.get("v1", "PersistentVolumeClaim", "aurora", "blob-training")
    pvc["status"] = {"phase": "Pending"}
    store.update_status(pvc)
    pending = tau_cli("workspace", "check", "aurora", "--data-pvc", "blob-training")
    assert pending.exit_code == 0 and "is not Bound (phase Pending)" in pending.stdout


def test_check_data_pvc_lookup_error_is_fatal(tau_cli, taugrid_cluster):
    taugrid_cluster.cluster.faults.add(method="GET", path_regex="/persistentvolumeclaims/blob-training$",
                                       status=403)
    result = tau_cli("workspace", "check", "aurora", "--data-pvc", "blob-training")
    assert result.exit_code == 1
    assert result.stderr.startswith('error: cannot verify durable /data PVC "blob-training" in namespace "aurora"')
    assert "Traceback" not in result.stderr


def test_not_a_taugrid_cluster(tau_cli, tau_env, sim_cluster_factory):
    bare = sim_cluster_factory()
    tau_env["KUBECONFIG"] = str(bare.kubeconfig_path)
    result = tau_cli("workspace", "list")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {bare.context_for('admin')} has no TauWorkspace resources, so it does "
                                    "not appear to be a TauGrid cluster")


def _job(name: str, cpu: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "aurora", "labels": {keys.KUEUE_QUEUE_NAME: "jobqueue"}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "python:3.12-slim", "command": ["sleep", "3600"],
                 "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}}}


def _grant_cluster_queue_reader(cluster) -> None:
    """What the controller's workspace-rbac reconcile gives the researcher group (tau-clusterqueue-reader-<ws>)."""
    rbac = "rbac.authorization.k8s.io/v1"
    cluster.store.create({"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "tau-clusterqueue-reader-v1"},
                          "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"],
                                     "verbs": ["get"]}]})
    cluster.store.create({"apiVersion": rbac, "kind": "ClusterRoleBinding",
                          "metadata": {"name": "tau-clusterqueue-reader-aurora"},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                      "name": "tau-clusterqueue-reader-v1"},
                          "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                        "name": "aurora-researchers"}]})


def test_quota_show_reflects_admitted_work(tau_cli, taugrid_cluster):
    cluster = taugrid_cluster.cluster
    _grant_cluster_queue_reader(cluster)
    cluster.store.create(_job("train", "2"))
    cluster.settle()
    result = tau_cli("workspace", "quota", "show", "aurora", "-o", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "tau.workspace.quota.v1"
    assert (doc["namespace"], doc["localQueue"], doc["clusterQueue"]) == ("aurora", "jobqueue", "tau-cq")
    assert doc["workloads"] == {"found": True, "pending": 0, "admitted": 1, "reserving": 1}
    cpu_flavor = doc["flavors"][0]
    cpu = {r["name"]: r for r in cpu_flavor["resources"]}
    assert (cpu["cpu"]["nominal"], cpu["cpu"]["reserved"], cpu["cpu"]["remaining"]) == ("32", "2", "30")
    assert (cpu["memory"]["nominal"], cpu["memory"]["reserved"], cpu["memory"]["remaining"]) == \
        ("128Gi", "1Gi", "127Gi")
    # the researcher may not read cluster-scoped ResourceFlavors: reported, not fatal
    assert cpu_flavor["flavorFound"] is False and any("ResourceFlavor" in w for w in doc["warnings"])
    table = tau_cli("workspace", "quota", "show", "aurora")
    assert "Workloads:    1 admitted, 0 pending, 1 reserving" in table.stdout
    assert "FLAVOR" in table.stdout and "BORROWING_LIMIT" in table.stdout


def test_quota_show_as_admin_reads_flavor_placement(tau_cli, taugrid_cluster):
    admin = taugrid_cluster.cluster.context_for("admin")
    doc = json.loads(tau_cli("workspace", "quota", "show", "aurora", "-o", "json", "--context", admin).stdout)
    gpu = doc["flavors"][1]
    assert gpu["flavorFound"] is True and gpu["nodeLabels"] == {"agentpool": "gpu"}
    assert gpu["tolerations"] == [{"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    assert doc["warnings"] == []


def test_quota_request_preview_is_offline_and_apply_creates(tau_cli, tau_env, taugrid_cluster):
    kubeconfig = tau_env["KUBECONFIG"]
    tau_env["KUBECONFIG"] = "/nonexistent"
    args = ("workspace", "quota", "request", "aurora", "--resource", "h200", "--requested", "32",
            "--reason", "train-70b-checkpoint-sweep")
    preview = tau_cli(*args)
    assert preview.exit_code == 0, preview.stderr
    doc = yaml.safe_load(preview.stdout)
    assert doc["metadata"] == {"name": "aurora-h200-quota-request", "namespace": "tau-system"}
    assert doc["spec"] == {"workspace": "aurora", "resource": "h200", "requested": 32,
                           "reason": "train-70b-checkpoint-sweep", "mutationMode": "ReportOnly"}
    tau_env["KUBECONFIG"] = kubeconfig
    admin = taugrid_cluster.cluster.context_for("admin")
    created = tau_cli(*args, "--apply", "--context", admin)
    assert created.exit_code == 0, created.stderr
    assert "TauQuotaRequest tau-system/aurora-h200-quota-request created" in created.stdout
    assert taugrid_cluster.cluster.store.get(TAU, "TauQuotaRequest", "tau-system", "aurora-h200-quota-request")
    again = tau_cli(*args, "--apply", "--context", admin)
    assert again.exit_code == 0 and "already exists; no changes made" in again.stdout


def test_quota_request_bad_flags(tau_cli):
    base = ("workspace", "quota", "request", "aurora")
    for extra, message in ((("--requested", "1", "--reason", "r"), "--resource is required"),
                           (("--resource", "h200", "--reason", "r"), "--requested must be > 0"),
                           (("--resource", "h200", "--requested", "2"), "--reason is required"),
                           (("--resource", "h200", "--requested", "2", "--reason", "r", "--mutation-mode", "x"),
                            "--mutation-mode must be one of: ReportOnly, ControllerManagedBurst")):
        result = tau_cli(*base, *extra)
        assert result.exit_code == 2 and message in result.stderr, (extra, result.stderr)


def test_read_verbs_take_the_context_from_the_repository_descriptor(tau_cli, taugrid_cluster, tmp_path,
                                                                    monkeypatch):
    import subprocess

    repo = tmp_path / "repo"
    (repo / "tau").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "tau" / "workspace.connection.yaml").write_text(
        "schema: tau.workspace.connection.v1\nworkspace: aurora\ncluster:\n  contextName: elsewhere\n"
        "  systemNamespace: tau-system\naccess:\n  method: kubeconfig\nauthorization:\n  mode: workspace-rbac\n"
        "  requiredRole: tau-researcher-v1\nrequirements:\n  minTauVersion: 0.1.0\n")
    monkeypatch.chdir(repo)
    from_descriptor = tau_cli("workspace", "status", "aurora")
    assert from_descriptor.exit_code == 1 and '"elsewhere"' in from_descriptor.stderr
    explicit = tau_cli("workspace", "status", "aurora", "--context", taugrid_cluster.researcher_context)
    assert explicit.exit_code == 0, explicit.stderr
