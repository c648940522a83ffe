"""`tau cluster install` on the simulator with the REAL Tau controller (issue 12), not the TauCluster stand-in.

Helm installs the umbrella chart (local stand-ins for the upstream Kueue/KubeRay charts). Once the chart's
controller Deployment exists, the test starts `tau-controller run` with that Deployment's own container args
and its ServiceAccount's identity, so the chart's flags and RBAC are what the controller runs with. The
install's readiness wait and `tau cluster validate installation` then read the status the controller wrote.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import yaml

from tau_core.config.profiles import profile_set_hash
from tau_testing.charts import DaemonSetStatus, DeploymentProcess, build_test_umbrella
from tau_testing.sim.controllers.scheduler import add_node

pytestmark = pytest.mark.realclock  # the controller process runs in real time

TAU = "tau.azure.com/v1alpha1"


def _workspace(name: str) -> dict:
    return {"apiVersion": TAU, "kind": "TauWorkspace", "metadata": {"name": name, "namespace": "tau-system"},
            "spec": {"authorization": {"mode": "workspace-rbac"},
                     "principalRef": {"provider": "entra", "name": "researchers"},
                     "kubernetesSubject": {"kind": "Group", "name": "researchers"},
                     "role": "tau-researcher-v1", "queue": "jobqueue",
                     "target": {"namespace": name, "createNamespace": True},
                     "defaults": {"outputRoot": f"/data/projects/{name}/runs", "priority": "default"}}}


def _profiles_ready(cluster) -> bool:
    wp = ((cluster.store.get(TAU, "TauCluster", None, "cluster") or {}).get("status") or {}).get("workloadProfiles")
    return bool(wp) and wp.get("observed", 0) > 0 and wp.get("ready") == wp.get("observed")


@pytest.fixture
def controller_pod(sim_cluster_factory, tmp_path):
    cluster = sim_cluster_factory(tls=True)
    cluster.add_controller("daemonsets", DaemonSetStatus())
    add_node(cluster, "node-1", cpu="16", memory="64Gi")
    (tmp_path / "pod").mkdir()
    pod = DeploymentProcess(cluster, "tau-system", "tau-core-controller",
                            [sys.executable, "-m", "tau_controller", "run"], tmp_path / "pod",
                            bind_flags=("--health-probe-bind-address", "--metrics-bind-address"))
    yield cluster, pod
    pod.stop()


@pytest.mark.slow
def test_install_is_ready_from_the_real_controllers_status(tau_cli, tau_env, helm_bin, tmp_path, controller_pod):
    cluster, pod = controller_pod
    chart = build_test_umbrella(tmp_path / "umbrella", helm_bin)
    tau_env["KUBECONFIG"] = str(cluster.kubeconfig_path)
    tau_env["PATH"] = f"{helm_bin.parent}{os.pathsep}{os.environ.get('PATH', '')}"

    installed = tau_cli("cluster", "install", "--chart", str(chart), "--timeout", "3m")
    assert installed.exit_code == 0, f"{installed.stdout}\n{installed.stderr}\ncontroller:\n{pod.log()}"
    assert "READY: 8/8 checks passed" in installed.stdout
    assert pod.process is not None and pod.process.poll() is None, pod.log()
    assert "--leader-elect" in pod.args and "--system-namespace=tau-system" in pod.args

    # The profiles resolve once the default workspace's LocalQueue exists: the controller makes it from a TauWorkspace.
    cluster.store.create(_workspace("taugrid-default"))
    cluster.wait_for(lambda: _profiles_ready(cluster), timeout=120)

    validated = tau_cli("cluster", "validate", "installation", "-o", "json")
    assert validated.exit_code == 0, f"{validated.stdout}\n{validated.stderr}\ncontroller:\n{pod.log()}"
    report = json.loads(validated.stdout)
    [check] = [c for c in report["checks"] if c["name"] == "TauCluster"]
    assert check["status"] == "PASS", check
    tc = cluster.store.get(TAU, "TauCluster", None, "cluster")
    status = tc["status"]
    assert status["phase"] == "Ready" and status["observedGeneration"] == tc["metadata"]["generation"]
    profiles = status["workloadProfiles"]
    declared = tc["spec"]["workloadProfiles"]
    assert profiles["ready"] == profiles["observed"] == len(declared) > 0
    assert all(c["status"] == "True" for p in profiles["profiles"] for c in p["conditions"] if c["type"] == "Ready")
    hashable = [{k: v for k, v in p.items() if k != "conditions"} for p in profiles["profiles"]]
    assert profiles["profileSetHash"] == profile_set_hash(hashable)
    # The exported snapshot is accepted only when the recomputed profileSetHash equals the controller's.
    exported = tau_cli("cluster", "profiles", "export", "-o", str(tmp_path / "snapshot.yaml"))
    assert exported.exit_code == 0, exported.stderr
    snapshot = yaml.safe_load((tmp_path / "snapshot.yaml").read_text())
    assert snapshot["profileSetHash"] == profiles["profileSetHash"]
    assert len(snapshot["profiles"]) == len(declared)
    # The chart's RBAC covered everything the controller did under its ServiceAccount.
    assert "forbidden" not in pod.log().lower(), pod.log()
