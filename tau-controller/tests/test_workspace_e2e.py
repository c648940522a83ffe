"""TauWorkspace reconciler end to end: the real controller (kopf) against the simulated cluster."""

from __future__ import annotations

from typing import Any

import pytest
from ctrl_platform import QUEUE, workspace

from tau_core import keys
from tau_testing.sim.scenarios.taugrid import SYSTEM_NAMESPACE

pytestmark = pytest.mark.realclock  # the controller runs in real time

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
    assert {c["observedGeneration"] for c in ws["status"]["conditions"]} == {ws["metadata"]["generation"]}
    assert _conditions(platform, "aurora")["WorkloadIdentityReady"]["reason"] == "ServiceAccountReady"
    sa = platform.store.get("v1", "ServiceAccount", "aurora", "tau-workload")["metadata"]
    assert sa["labels"][keys.WORKLOAD_IDENTITY_USE] == "true" and sa["labels"][keys.WORKSPACE] == "aurora"
    assert sa["annotations"][keys.WORKLOAD_IDENTITY_CLIENT_ID] == "00000000-0000-0000-0000-000000000000"


def _ssar(cluster: Any, tmp_path: Any, user: str, namespace: str, verb: str, group: str, resource: str) -> bool:
    from tau_core.kube import KubeSession, run

    path = cluster.write_kubeconfig(tmp_path / f"{user}.kubeconfig", user=user)

    async def review() -> bool:
        async with await KubeSession.connect(kubeconfig=str(path)) as session:
            body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                    "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "group": group,
                                                    "resource": resource}}}
            result = await session.create("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body)
            return bool(result["status"]["allowed"])

    return run(review)


def test_researcher_may_create_jobs_then_connects_and_runs(platform, controller, tmp_path, tau_cli, tau_env,
                                                            monkeypatch, tau_commands):
    import subprocess

    platform.store.create(workspace())
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)
    assert _ssar(platform, tmp_path, "researcher", "aurora", "create", "batch", "jobs")
    assert not _ssar(platform, tmp_path, "researcher", "default", "create", "batch", "jobs")
    assert not _ssar(platform, tmp_path, "mallory", "aurora", "create", "batch", "jobs")

    repo = tmp_path / "repo"
    (repo / "tau").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    context = platform.context_for("researcher")
    (repo / "tau" / "workspace.connection.yaml").write_text(
        f"schema: tau.workspace.connection.v1\nworkspace: aurora\ncluster:\n  contextName: {context}\n"
        "  systemNamespace: tau-system\naccess:\n  method: kubeconfig\nauthorization:\n  mode: workspace-rbac\n"
        "  requiredRole: tau-researcher-v1\nrequirements:\n  minTauVersion: 0.1.0\n")
    (repo / "train.py").write_text("print('training')\n")
    (repo / "tau" / "train.yaml").write_text(
        "name: train\nengine: job\nentrypoint: ../train.py\ncompute:\n  gpus: 0\n  cpu_request: \"1\"\n"
        "  memory_limit: 1Gi\nruntime:\n  image: ghcr.io/acme/train:1.0\n")
    tau_env["KUBECONFIG"] = str(platform.write_kubeconfig(tmp_path / "researcher" / "config", user="researcher"))
    monkeypatch.chdir(repo)
    r = tau_cli("workspace", "connection", str(repo), input="y\n")
    assert r.exit_code == 0, r
    assert "Status:        Ready" in r.stdout and "Queue:         jobqueue" in r.stdout
    r = tau_cli("run", "train")
    assert r.exit_code == 0, r
    assert "submitted train (kind=job, ns=aurora)" in r.stdout
    job = platform.store.get("batch/v1", "Job", "aurora", "train")
    assert job["metadata"]["labels"][keys.KUEUE_QUEUE_NAME] == QUEUE


def test_second_workspace_is_blocked_then_promoted(platform, controller):
    platform.store.create(workspace())
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)
    platform.store.create(workspace("borealis"))
    platform.wait_for(lambda: _phase(platform, "borealis") == "Degraded", timeout=20)
    conditions = _conditions(platform, "borealis")
    assert conditions["RBACReady"]["reason"] == conditions["QueueReady"]["reason"] == "AdditionalWorkspaceBlocked"
    assert "'aurora' is primary and 'borealis' is blocked" in conditions["QueueReady"]["message"]
    assert platform.store.get("v1", "Namespace", None, "borealis") is None  # namespace untouched while blocked
    platform.store.delete(TAU, "TauWorkspace", SYSTEM_NAMESPACE, "aurora")
    platform.wait_for(lambda: _ws(platform, "aurora") is None, timeout=20)
    # cleanup removed aurora's grants and queue, and kept its namespace
    assert platform.store.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "aurora", QUEUE) is None
    assert platform.store.get("rbac.authorization.k8s.io/v1", "RoleBinding", "aurora", "tau-researcher-v1") is None
    assert platform.store.get("v1", "Namespace", None, "aurora") is not None
    platform.wait_for(lambda: _phase(platform, "borealis") == "Ready", timeout=20)
    assert _ws(platform, "borealis")["metadata"]["annotations"][keys.V0_PRIMARY_WORKSPACE] == "true"


def test_deleted_local_queue_is_restored(platform, controller):
    platform.store.create(workspace())
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)
    platform.store.delete("kueue.x-k8s.io/v1beta2", "LocalQueue", "aurora", QUEUE)
    assert platform.wait_for(lambda: platform.store.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "aurora", QUEUE),
                             timeout=20)
    lq = platform.store.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "aurora", QUEUE)
    assert lq["spec"]["clusterQueue"] == QUEUE and lq["metadata"]["labels"][keys.WORKSPACE] == "aurora"
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)


def test_reserved_namespace_is_refused(platform, controller):
    platform.store.create(workspace(namespace="kube-system"))
    platform.wait_for(lambda: _phase(platform, "aurora") == "Degraded", timeout=20)
    drift = _conditions(platform, "aurora")["DriftDetected"]
    assert (drift["status"], drift["reason"]) == ("True", "NamespaceReconcileFailed")
    assert drift["message"] == "refusing to manage namespace 'kube-system': kube-* namespaces are reserved by Kubernetes"
    assert keys.WORKSPACE not in (platform.store.get("v1", "Namespace", None, "kube-system")["metadata"]
                                  .get("labels") or {})


def test_foreign_objects_are_never_adopted(platform, controller):
    rbac = "rbac.authorization.k8s.io/v1"
    platform.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "aurora", "labels": {"team": "vision", "pod-security.kubernetes.io/enforce": "privileged"}}})
    foreign_rb = platform.store.create({
        "apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": "tau-researcher-v1", "namespace": "aurora"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "someone"}]})
    foreign_sa = platform.store.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                        "metadata": {"name": "tau-workload", "namespace": "aurora"}})
    platform.store.create(workspace(create_namespace=False))
    platform.wait_for(lambda: _phase(platform, "aurora") == "Degraded", timeout=20)
    conditions = _conditions(platform, "aurora")
    assert conditions["RBACReady"]["reason"] == "AuthorizationNotReady"
    assert "RoleBinding aurora/tau-researcher-v1 already exists and is not owned by workspace 'aurora'" in \
        conditions["RBACReady"]["message"]
    assert conditions["WorkloadIdentityReady"]["reason"] == "ServiceAccountNotReady"
    rb = platform.store.get(rbac, "RoleBinding", "aurora", "tau-researcher-v1")
    assert rb["metadata"]["resourceVersion"] == foreign_rb["metadata"]["resourceVersion"]
    sa = platform.store.get("v1", "ServiceAccount", "aurora", "tau-workload")
    assert sa["metadata"]["resourceVersion"] == foreign_sa["metadata"]["resourceVersion"]
    labels = platform.store.get("v1", "Namespace", None, "aurora")["metadata"]["labels"]
    # only the three declared keys are added to a namespace we did not create; nothing else changes
    assert labels["team"] == "vision" and labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels[keys.WORKSPACE] == "aurora" and keys.APP_MANAGED_BY not in labels
    # a platform-owned LocalQueue is used as it is (never relabelled or retargeted)
    lq = platform.store.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "aurora", QUEUE)
    assert lq is not None  # created by us (no foreign one existed) and labelled as ours
    assert lq["metadata"]["labels"][keys.WORKSPACE] == "aurora"


@pytest.mark.slow
def test_platform_owned_local_queue_is_used_not_adopted(platform, controller):
    lq = platform.store.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                                "metadata": {"name": QUEUE, "namespace": "aurora", "labels": {"owner": "gitops"}},
                                "spec": {"clusterQueue": QUEUE}}) if platform.store.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "aurora"}}) else None
    platform.store.create(workspace(create_namespace=False))
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)
    assert _conditions(platform, "aurora")["QueueReady"]["message"] == \
        "workspace queue and backing ClusterQueue are readable"
    now = platform.store.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "aurora", QUEUE)
    assert now["metadata"]["uid"] == lq["metadata"]["uid"]  # neither replaced
    assert now["metadata"]["labels"] == {"owner": "gitops"} and now["spec"] == lq["spec"]  # nor relabelled


def test_cluster_wide_authorization_grants_nothing_and_removes_our_bindings(platform, controller):
    platform.store.create(workspace())
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)
    ws = _ws(platform, "aurora")
    for key in ("principalRef", "kubernetesSubject", "role"):
        ws["spec"].pop(key)
    ws["spec"]["authorization"] = {"mode": "cluster-wide"}
    platform.store.update(ws)
    platform.wait_for(lambda: _conditions(platform, "aurora")["RBACReady"]["reason"] == "ExistingClusterAuthorization",
                      timeout=20)
    rbac = "rbac.authorization.k8s.io/v1"
    platform.wait_for(lambda: platform.store.get(rbac, "RoleBinding", "aurora", "tau-researcher-v1") is None, timeout=20)
    assert platform.store.get(rbac, "ClusterRoleBinding", None, "tau-clusterqueue-reader-aurora") is None
    assert _phase(platform, "aurora") == "Ready"


def test_empty_queue_defaults_from_the_tau_cluster(platform, controller):
    platform.store.create(workspace(queue=None))
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)
    assert _ws(platform, "aurora")["status"]["queue"]["localQueue"] == QUEUE


@pytest.mark.slow
def test_namespace_of_a_deleted_workspace_is_reclaimed_and_a_retarget_releases_the_old_one(platform, controller):
    platform.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "aurora", "labels": {keys.WORKSPACE: "ghost", "team": "vision"}}})
    platform.store.create(workspace(create_namespace=False))
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)
    labels = platform.store.get("v1", "Namespace", None, "aurora")["metadata"]["labels"]
    assert labels[keys.WORKSPACE] == "aurora" and labels["team"] == "vision"

    ws = _ws(platform, "aurora")
    ws["spec"]["target"] = {"namespace": "aurora-2", "createNamespace": True}
    platform.store.update(ws)
    platform.wait_for(lambda: (_ws(platform, "aurora")["status"].get("target") or {}).get("resolvedNamespace")
                      == "aurora-2" and _phase(platform, "aurora") == "Ready", timeout=20)
    old = platform.store.get("v1", "Namespace", None, "aurora")["metadata"]
    assert keys.WORKSPACE not in old.get("labels", {}) and old["labels"]["team"] == "vision"
    assert keys.RESULT_SCOPE not in (old.get("annotations") or {})
    # stale grants in the old namespace are gone; the new namespace has them
    rbac = "rbac.authorization.k8s.io/v1"
    platform.wait_for(lambda: platform.store.get(rbac, "RoleBinding", "aurora", "tau-researcher-v1") is None, timeout=20)
    assert platform.store.get(rbac, "RoleBinding", "aurora-2", "tau-researcher-v1") is not None
    assert platform.store.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "aurora", QUEUE) is None


@pytest.mark.slow
def test_a_refused_retarget_withdraws_every_grant_the_workspace_held(platform: Any, controller: Any) -> None:
    rbac = "rbac.authorization.k8s.io/v1"
    platform.store.create(workspace())
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)
    assert platform.store.get(rbac, "RoleBinding", "aurora", "tau-researcher-v1") is not None
    default_labels = dict(platform.store.get("v1", "Namespace", None, "default")["metadata"].get("labels") or {})
    ws = _ws(platform, "aurora")
    assert ws is not None
    ws["spec"]["target"] = {"namespace": "default", "createNamespace": False}
    platform.store.update(ws)
    platform.wait_for(lambda: _conditions(platform, "aurora")["DriftDetected"]["reason"] == "NamespaceReconcileFailed",
                      timeout=20)
    refusal = "refusing to manage namespace 'default': the default namespace is shared cluster-wide"
    conditions = _conditions(platform, "aurora")
    assert (conditions["RBACReady"]["reason"], conditions["RBACReady"]["message"]) == ("AuthorizationNotReady", refusal)
    assert (conditions["QueueReady"]["reason"], conditions["QueueReady"]["message"]) == ("QueueNotReady", refusal)
    assert conditions["WorkloadIdentityReady"]["reason"] == "ServiceAccountNotReady"
    status = (_ws(platform, "aurora") or {})["status"]
    assert status["phase"] == "Degraded" and status["queue"] == {"localQueue": QUEUE}
    # the researcher keeps no access to the namespace the workspace no longer (validly) targets
    platform.wait_for(lambda: platform.store.get(rbac, "RoleBinding", "aurora", "tau-researcher-v1") is None, timeout=20)
    platform.wait_for(lambda: platform.store.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "aurora", QUEUE) is None,
                      timeout=20)
    platform.wait_for(lambda: platform.store.get("v1", "ServiceAccount", "aurora", "tau-workload") is None, timeout=20)
    assert (platform.store.get("v1", "Namespace", None, "default")["metadata"].get("labels") or {}) == default_labels


@pytest.mark.slow
def test_service_account_subjects_and_a_queue_without_its_cluster_queue(platform: Any, controller: Any) -> None:
    rbac = "rbac.authorization.k8s.io/v1"
    platform.store.create(workspace(queue="gpu-burst", kubernetesSubject={"kind": "ServiceAccount",
                                                                          "name": "trainer"}))
    platform.wait_for(lambda: _conditions(platform, "aurora").get("RBACReady", {}).get("status") == "True"
                      and _conditions(platform, "aurora").get("QueueReady", {}).get("status") == "False", timeout=20)
    sa = {"kind": "ServiceAccount", "name": "trainer"}
    assert platform.store.get(rbac, "RoleBinding", "aurora", "tau-researcher-v1")["subjects"] == \
        [{**sa, "namespace": "aurora"}]
    assert platform.store.get(rbac, "ClusterRoleBinding", None, "tau-clusterqueue-reader-aurora")["subjects"] == \
        [{**sa, "namespace": "aurora"}]
    assert platform.store.get(rbac, "RoleBinding", SYSTEM_NAMESPACE, "tau-workspace-reader-aurora")["subjects"] == \
        [{**sa, "namespace": SYSTEM_NAMESPACE}]
    queue = _conditions(platform, "aurora")["QueueReady"]
    assert queue["message"].startswith("backing ClusterQueue 'gpu-burst' is not ready")
    status = (_ws(platform, "aurora") or {})["status"]
    assert status["phase"] == "Degraded"
    assert status["queue"] == {"localQueue": "gpu-burst", "clusterQueue": "gpu-burst"}  # reported while not ready


@pytest.mark.slow
def test_a_queue_that_cannot_be_defaulted_is_reported_then_resolved(platform: Any, controller: Any) -> None:
    cluster = platform.store.get(TAU, "TauCluster", None, "cluster")
    platform.store.delete(TAU, "TauCluster", None, "cluster")
    body = workspace(queue=None)
    del body["spec"]["workloadIdentity"]
    platform.store.create(body)
    platform.wait_for(lambda: _conditions(platform, "aurora").get("QueueReady", {}).get("reason") == "QueueUnresolved",
                      timeout=20)
    conditions = _conditions(platform, "aurora")
    assert conditions["QueueReady"]["message"] == \
        'spec.queue is empty and the TauCluster default is unavailable: TauCluster "cluster" not found'
    assert (conditions["RBACReady"]["reason"], conditions["WorkloadIdentityReady"]["status"]) == \
        ("QueueUnresolved", "Unknown")
    assert _phase(platform, "aurora") == "Degraded"
    platform.store.create({k: cluster[k] for k in ("apiVersion", "kind", "spec")} | {"metadata": {"name": "cluster"}})
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)  # the TauCluster event re-queues it
    assert _conditions(platform, "aurora")["WorkloadIdentityReady"]["reason"] == "NotConfigured"


@pytest.mark.slow
def test_a_drifted_local_queue_is_pointed_back_at_its_cluster_queue(platform: Any, controller_factory: Any) -> None:
    kueue = "kueue.x-k8s.io/v1beta2"
    first = controller_factory(platform)
    platform.store.create(workspace())
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)
    first.stop()
    # spec.clusterQueue is immutable: drift is a replacement, here one that kept our labels
    lq = platform.store.get(kueue, "LocalQueue", "aurora", QUEUE)
    assert lq is not None
    platform.store.delete(kueue, "LocalQueue", "aurora", QUEUE)
    platform.store.create({"apiVersion": kueue, "kind": "LocalQueue", "metadata": {
        "name": QUEUE, "namespace": "aurora", "labels": lq["metadata"]["labels"]},
        "spec": {"clusterQueue": "someone-elses-queue"}})
    controller_factory(platform)
    platform.wait_for(lambda: ((platform.store.get(kueue, "LocalQueue", "aurora", QUEUE) or {}).get("spec") or {})
                      .get("clusterQueue") == QUEUE, timeout=20)
    restored = platform.store.get(kueue, "LocalQueue", "aurora", QUEUE)
    assert restored is not None and restored["metadata"]["labels"][keys.WORKSPACE] == "aurora"
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)
