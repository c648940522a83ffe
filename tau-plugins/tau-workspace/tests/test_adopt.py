"""`tau workspace adopt`: the platform-provisioned handoff, with every UID guard; creates only the TauWorkspace."""

from __future__ import annotations

from functools import partial

import pytest
import yaml

from tau_core import keys

TAU = keys.API_VERSION
KUEUE = "kueue.x-k8s.io/v1beta2"


def _pvc(phase: str = "Bound") -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "blob-training", "namespace": "aurora"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Ti"}},
                     "storageClassName": "azureblob-fuse-premium"},
            "status": {"phase": phase}}


@pytest.fixture
def provisioned(platform):
    platform.load_scenario([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "aurora"}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "jobqueue", "namespace": "aurora"},
         "spec": {"clusterQueue": "jobqueue"}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "azureblob-fuse-premium"},
         "provisioner": "blob.csi.azure.com"},
        _pvc(),
    ])
    return platform


def _uid(cluster, api, kind, ns, name):
    return cluster.store.get(api, kind, ns, name)["metadata"]["uid"]


def test_preview_then_apply_creates_only_the_workspace(tau_cli, provisioned):
    ns_uid = _uid(provisioned, "v1", "Namespace", None, "aurora")
    preview = tau_cli("workspace", "adopt", "aurora", "--namespace-uid", ns_uid, "--cluster-queue", "jobqueue",
                      "--storage-class", "azureblob-fuse-premium")
    assert preview.exit_code == 0, preview.stderr
    lines = preview.stdout.splitlines()
    assert lines[0] == ("# preflight passed: Namespace aurora; LocalQueue aurora/jobqueue -> ClusterQueue jobqueue; "
                        "PVC aurora/blob-training Bound (storageClass=azureblob-fuse-premium); TauWorkspace absent")
    doc = yaml.safe_load("\n".join(lines[1:]))
    assert doc["spec"] == {"authorization": {"mode": "cluster-wide"},
                           "target": {"namespace": "aurora", "createNamespace": False}, "queue": "jobqueue",
                           "defaults": {"outputRoot": "/data/projects/aurora/runs", "priority": "normal"}}
    before = provisioned.store.count()
    applied = tau_cli("workspace", "adopt", "aurora", "--apply")
    assert applied.exit_code == 0, applied.stderr
    assert "TauWorkspace tau-system/aurora created" in applied.stdout
    assert provisioned.store.count() == before + 1
    assert provisioned.store.get(TAU, "TauWorkspace", "tau-system", "aurora")["spec"]["authorization"] == \
        {"mode": "cluster-wide"}
    again = tau_cli("workspace", "adopt", "aurora", "--apply")
    assert again.exit_code == 0 and "no changes made" in again.stdout


@pytest.mark.parametrize(("change", "args", "message"), [
    (lambda c: c.store.delete("v1", "Namespace", None, "aurora"), (), 'Namespace "aurora" not found'),
    (lambda c: c.store.patch("v1", "Namespace", None, "aurora",
                             {"metadata": {"labels": {keys.WORKSPACE: "other"}}}), (),
     'Namespace "aurora" is already assigned to TauWorkspace "other"'),
    (lambda c: c.store.delete("v1", "PersistentVolumeClaim", "aurora", "blob-training"), (),
     'PVC "aurora/blob-training" not found'),
    (None, ("--namespace-uid", "0000"), "not the --namespace-uid 0000"),
    (None, ("--cluster-queue", "other"), 'references ClusterQueue "jobqueue", not --cluster-queue "other"'),
    (None, ("--storage-class", "premium"), 'uses storageClass "azureblob-fuse-premium", not --storage-class'),
    (lambda c: c.store.delete("storage.k8s.io/v1", "StorageClass", None, "azureblob-fuse-premium"), (),
     'StorageClass "azureblob-fuse-premium" not found'),
    (lambda c: c.store.delete(KUEUE, "ClusterQueue", None, "jobqueue"), (), 'ClusterQueue "jobqueue" not found'),
    (lambda c: c.store.delete(KUEUE, "LocalQueue", "aurora", "jobqueue"), (),
     'LocalQueue "aurora/jobqueue" not found'),
    (lambda c: c.store.patch("v1", "Namespace", None, "aurora",
                             {"metadata": {"labels": {keys.KUEUE_DEFAULT_LOCAL_QUEUE: "team-q"}}}), (),
     'Namespace "aurora" names default LocalQueue "team-q", not "jobqueue"'),
    (None, ("--queue-uid", "0000"), "not the --queue-uid 0000"),
    (None, ("--pvc-uid", "0000"), "not the --pvc-uid 0000"),
])
def test_preflight_refusals_create_nothing(tau_cli, provisioned, change, args, message):
    if change is not None:
        change(provisioned)
    result = tau_cli("workspace", "adopt", "aurora", "--apply", *args)
    assert result.exit_code == 1, result.stdout
    assert message in result.stderr
    assert provisioned.store.list(TAU, "TauWorkspace", "tau-system") == []


def test_unbound_pvc_is_refused_but_can_be_skipped(tau_cli, provisioned):
    pvc = provisioned.store.get("v1", "PersistentVolumeClaim", "aurora", "blob-training")
    pvc["status"] = {"phase": "Pending"}
    provisioned.store.update_status(pvc)
    refused = tau_cli("workspace", "adopt", "aurora")
    assert refused.exit_code == 1 and 'PVC "aurora/blob-training" is not Bound (phase Pending)' in refused.stderr
    skipped = tau_cli("workspace", "adopt", "aurora", "--data-pvc", "")
    assert skipped.exit_code == 0 and "PVC" not in skipped.stdout.splitlines()[0]


def test_pvc_replaced_between_preflight_and_apply(provisioned, monkeypatch):
    from tau_core.errors import ConflictError
    from tau_core.kube import run
    from tau_workspace.adopt import AdoptRequest, adopt, build_intent
    from tau_workspace.target import Target

    monkeypatch.setenv("KUBECONFIG", str(provisioned.kubeconfig_path))
    request = AdoptRequest(name="aurora")
    intent = build_intent(request, "tau-system")

    async def replace(_session):
        provisioned.store.delete("v1", "PersistentVolumeClaim", "aurora", "blob-training")
        provisioned.store.create(_pvc())
        fresh = provisioned.store.get("v1", "PersistentVolumeClaim", "aurora", "blob-training")
        provisioned.store.update_status({**fresh, "status": {"phase": "Bound"}})

    with pytest.raises(ConflictError, match=r'PVC "aurora/blob-training" was replaced during preflight'):
        run(partial(adopt, apply=True, between=replace), Target(None, "tau-system"), request, intent)
    assert provisioned.store.list(TAU, "TauWorkspace", "tau-system") == []
