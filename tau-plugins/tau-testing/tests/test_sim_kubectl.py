"""The real kubectl binary against the simulated API server (TLS, bearer tokens, the written kubeconfig)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path

import pytest

from tau_testing.sim.client import configmap, pod


@pytest.fixture
def cluster(sim_cluster_factory):
    return sim_cluster_factory(controllers=False, tls=True)


@pytest.fixture
def kubectl(kubectl_bin, cluster, tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(cluster.kubeconfig_path)}

    def run(*args: str, user: str = "admin", stdin: str | None = None, check: bool = True):
        command = [str(kubectl_bin), "--context", cluster.context_for(user), *args]
        result = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, timeout=60)
        if check:
            assert result.returncode == 0, (command, result.stdout, result.stderr)
        return result

    def popen(*args: str, user: str = "admin") -> subprocess.Popen:
        command = [str(kubectl_bin), "--context", cluster.context_for(user), *args]
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    run.popen = popen  # type: ignore[attr-defined]
    return run


def _lines(proc: subprocess.Popen) -> queue.Queue:
    out: queue.Queue = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.put(line.rstrip("\n"))
        out.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return out


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  replicas: REPLICAS
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.25
        env: [{name: MODE, value: prod}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
"""


def test_apply_creates_then_configures(kubectl, cluster, tmp_path):
    manifest = tmp_path / "app.yaml"
    manifest.write_text(DEPLOYMENT.replace("REPLICAS", "2"))
    first = kubectl("apply", "-f", str(manifest))
    assert "deployment.apps/web created" in first.stdout and "localqueue.kueue.x-k8s.io/lq created" in first.stdout
    again = kubectl("apply", "-f", str(manifest))
    assert "deployment.apps/web unchanged" in again.stdout
    manifest.write_text(DEPLOYMENT.replace("REPLICAS", "5"))
    third = kubectl("apply", "-f", str(manifest))
    assert "deployment.apps/web configured" in third.stdout
    stored = cluster.store.get("apps/v1", "Deployment", "default", "web")
    assert stored["spec"]["replicas"] == 5 and stored["metadata"]["generation"] == 2
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]
    got = json.loads(kubectl("get", "localqueue", "lq", "-o", "json").stdout)
    assert got["spec"] == {"clusterQueue": "cq", "stopPolicy": "None"}


def test_apply_reports_schema_errors_of_custom_resources(kubectl, tmp_path):
    manifest = tmp_path / "bad.yaml"
    manifest.write_text("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\n"
                        "spec: {queueingStrategy: Random}\n")
    result = kubectl("apply", "-f", str(manifest), check=False)
    assert result.returncode != 0
    assert 'The ClusterQueue "cq" is invalid' in result.stderr
    assert "spec.queueingStrategy" in result.stderr


def test_get_watch_streams_events(kubectl, cluster):
    cluster.store.create(configmap("before"))
    proc = kubectl.popen("get", "configmaps", "-w", "-o", "name")
    try:
        lines = _lines(proc)
        assert lines.get(timeout=20) == "configmap/before"
        cluster.store.create(configmap("during"))
        assert lines.get(timeout=20) == "configmap/during"
        cluster.store.patch("v1", "ConfigMap", "default", "during", {"data": {"k": "changed"}})
        assert lines.get(timeout=20) == "configmap/during"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_logs_follow_until_the_container_ends(kubectl, cluster):
    cluster.store.create(pod("runner"))
    cluster.logs.append("default", "runner", "main", "epoch 1")
    proc = kubectl.popen("logs", "-f", "runner")
    try:
        lines = _lines(proc)
        assert lines.get(timeout=20) == "epoch 1"
        cluster.logs.append("default", "runner", "main", "epoch 2")
        assert lines.get(timeout=20) == "epoch 2"
        cluster.logs.mark_terminated("default", "runner", "main")
        assert lines.get(timeout=20) is None
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)
    tail = kubectl("logs", "runner", "--tail=1", "--timestamps")
    assert tail.stdout.strip().endswith("Z epoch 2")


def test_auth_can_i_follows_rbac(kubectl, cluster):
    assert kubectl("auth", "can-i", "delete", "nodes").stdout.strip() == "yes"
    denied = kubectl("auth", "can-i", "list", "pods", "-n", "default", user="alice", check=False)
    assert denied.returncode == 1 and denied.stdout.strip() == "no"
    cluster.store.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                          "metadata": {"name": "alice-view", "namespace": "default"},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                          "subjects": [{"kind": "User", "name": "alice"}]})
    assert kubectl("auth", "can-i", "list", "pods", "-n", "default", user="alice").stdout.strip() == "yes"
    assert kubectl("auth", "can-i", "delete", "pods", "-n", "default", user="alice",
                   check=False).stdout.strip() == "no"
    forbidden = kubectl("get", "pods", "-n", "kube-system", user="alice", check=False)
    assert forbidden.returncode == 1
    assert 'User "alice" cannot list resource "pods" in API group "" in the namespace "kube-system"' in \
        forbidden.stderr
    who = kubectl("auth", "whoami", "-o", "json", user="alice")
    assert json.loads(who.stdout)["status"]["userInfo"]["username"] == "alice"


@pytest.mark.parametrize("cascade", ["background", "foreground", "orphan"])
def test_delete_cascade(kubectl, cluster, cascade):
    owner = cluster.store.create(configmap("owner"))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"],
           "blockOwnerDeletion": True}
    cluster.store.create(configmap("child", ownerReferences=[ref]))
    result = kubectl("delete", "configmap", "owner", f"--cascade={cascade}")
    assert 'configmap "owner" deleted' in result.stdout
    assert cluster.store.get("v1", "ConfigMap", "default", "owner") is None
    child = cluster.store.get("v1", "ConfigMap", "default", "child")
    if cascade == "orphan":
        assert child is not None and "ownerReferences" not in child["metadata"]
    else:
        assert child is None


def test_patch_types(kubectl, cluster):
    cluster.store.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {
            "containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}}})
    kubectl("patch", "deployment", "d", "--type=merge", "-p", '{"metadata":{"labels":{"team":"x"}}}')
    kubectl("patch", "deployment", "d", "--type=strategic", "-p",
            '{"spec":{"template":{"spec":{"containers":[{"name":"b","image":"b:2"}]}}}}')
    kubectl("patch", "deployment", "d", "--type=json", "-p",
            '[{"op":"test","path":"/spec/replicas","value":1},{"op":"replace","path":"/spec/replicas","value":3}]')
    failed = kubectl("patch", "deployment", "d", "--type=json", "-p",
                     '[{"op":"test","path":"/spec/replicas","value":99}]', check=False)
    assert failed.returncode == 1 and "test failed" in failed.stderr
    stored = cluster.store.get("apps/v1", "Deployment", "default", "d")
    assert stored["metadata"]["labels"] == {"team": "x"}
    assert [(c["name"], c["image"]) for c in stored["spec"]["template"]["spec"]["containers"]] == [
        ("a", "a:1"), ("b", "b:2")]
    assert stored["spec"]["replicas"] == 3


def test_server_side_dry_run(kubectl, cluster, tmp_path):
    manifest = tmp_path / "cm.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dry}\ndata: {a: b}\n")
    result = kubectl("apply", "-f", str(manifest), "--dry-run=server")
    assert "(server dry run)" in result.stdout
    assert cluster.store.get("v1", "ConfigMap", "default", "dry") is None
    cluster.store.create(configmap("kept"))
    kubectl("delete", "configmap", "kept", "--dry-run=server")
    assert cluster.store.get("v1", "ConfigMap", "default", "kept") is not None
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n")
    invalid = kubectl("apply", "-f", str(bad), "--dry-run=server", check=False)
    assert invalid.returncode == 1 and "spec.containers: Required value" in invalid.stderr


def test_create_namespace_and_discovery_commands(kubectl, cluster):
    kubectl("create", "namespace", "team-a")
    kubectl("-n", "team-a", "create", "configmap", "settings", "--from-literal=mode=fast")
    assert cluster.store.get("v1", "ConfigMap", "team-a", "settings")["data"] == {"mode": "fast"}
    resources = kubectl("api-resources", "--api-group=kueue.x-k8s.io", "-o", "name").stdout.split()
    assert "clusterqueues.kueue.x-k8s.io" in resources and "workloads.kueue.x-k8s.io" in resources
    version = json.loads(kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == "v1.30.0"
    assert Path(cluster.kubeconfig_path).stat().st_mode & 0o077 == 0


def test_helm_installs_upgrades_and_uninstalls_a_chart(helm_bin, cluster, tmp_path):
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0\n")
    (chart / "templates" / "objects.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: demo-settings}\ndata: {mode: {{ .Values.mode | quote }}}\n"
        "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: demo}\n")
    (chart / "values.yaml").write_text("mode: a\n")
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(cluster.kubeconfig_path)}

    def helm(*args: str) -> subprocess.CompletedProcess:
        result = subprocess.run([str(helm_bin), *args], capture_output=True, text=True, env=env, timeout=120)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result

    helm("install", "demo", str(chart), "-n", "default")
    assert cluster.store.get("v1", "ConfigMap", "default", "demo-settings")["data"] == {"mode": "a"}
    helm("upgrade", "demo", str(chart), "-n", "default", "--set", "mode=b", "--server-side=true",
         "--force-conflicts")
    settings = cluster.store.get("v1", "ConfigMap", "default", "demo-settings")
    assert settings["data"] == {"mode": "b"}
    assert settings["metadata"]["managedFields"][0]["operation"] == "Apply"
    releases = [s["metadata"]["name"] for s in cluster.store.list("v1", "Secret", "default")]
    assert "sh.helm.release.v1.demo.v2" in releases
    helm("uninstall", "demo", "-n", "default")
    assert cluster.store.get("v1", "ConfigMap", "default", "demo-settings") is None
    assert cluster.store.get("v1", "ServiceAccount", "default", "demo") is None


def test_get_prints_server_side_table_columns(kubectl, cluster):
    cluster.store.create(pod("worker"))
    running = cluster.store.get("v1", "Pod", "default", "worker")
    cluster.store.update_status({**running, "status": {"phase": "Running", "containerStatuses": [
        {"name": "main", "ready": True, "restartCount": 2, "state": {"running": {}}}]}})
    cluster.advance(90)
    lines = kubectl("get", "pods").stdout.splitlines()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert lines[1].split() == ["worker", "1/1", "Running", "2", "90s"]
    cluster.store.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                          "metadata": {"name": "lq", "namespace": "default"}, "spec": {"clusterQueue": "cq"}})
    header = kubectl("get", "localqueues").stdout.splitlines()[0].split()
    assert header[:2] == ["NAME", "CLUSTERQUEUE"]
    row = kubectl("get", "localqueues").stdout.splitlines()[1].split()
    assert row[:2] == ["lq", "cq"]


def test_impersonation_needs_the_impersonate_verb(kubectl):
    assert kubectl("auth", "can-i", "list", "pods", "--as", "alice", check=False).stdout.strip() == "no"
    assert kubectl("auth", "can-i", "list", "pods", "--as", "ops", "--as-group", "system:masters").stdout.strip() \
        == "yes"
    denied = kubectl("get", "pods", "--as", "admin", user="alice", check=False)
    assert denied.returncode == 1
    assert 'User "alice" cannot impersonate resource "users"' in denied.stderr


def test_apply_rejects_unknown_fields_of_builtin_kinds(kubectl, tmp_path):
    manifest = tmp_path / "typo.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typo}\ndata: {a: b}\ndatas: {c: d}\n")
    result = kubectl("apply", "-f", str(manifest), check=False)
    assert result.returncode == 1
    assert 'unknown field "datas"' in result.stderr


def test_get_watch_prints_table_rows(kubectl, cluster):
    cluster.store.create(pod("first"))
    proc = kubectl.popen("get", "pods", "--watch")
    try:
        lines = _lines(proc)
        assert lines.get(timeout=20).split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        assert lines.get(timeout=20).split()[:3] == ["first", "0/1", "Pending"]
        cluster.store.create(pod("second"))
        assert lines.get(timeout=20).split()[:3] == ["second", "0/1", "Pending"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_cordon_and_drain_evict_pods(kubectl, cluster):
    cluster.store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
                          "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    cluster.store.create(pod("bound", nodeName="node-1"))
    kubectl("cordon", "node-1")
    assert cluster.store.get("v1", "Node", None, "node-1")["spec"]["unschedulable"] is True
    result = kubectl("drain", "node-1", "--force", "--timeout=30s")
    assert "pod/bound evicted" in result.stdout + result.stderr
    assert cluster.store.get("v1", "Pod", "default", "bound") is None
