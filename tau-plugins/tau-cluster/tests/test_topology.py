"""``tau cluster validate topology`` against simulator state (profiles published by the controller stand-in)."""

from __future__ import annotations

import re

from tau_testing.sim.controllers.scheduler import add_node

PROFILE = "azure.research.training.2x"


def prepared(tau_cli, env_for, live, umbrella):
    env_for(live)
    assert tau_cli("cluster", "install", "--chart", str(umbrella), "--timeout", "2m").exit_code == 0
    # What the controller creates per workspace: the namespace and its LocalQueue on the baseline queue.
    live.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "taugrid-default"}})
    live.store.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                       "metadata": {"name": "jobqueue", "namespace": "taugrid-default"},
                       "spec": {"clusterQueue": "jobqueue"}})


def test_a_gpu_profile_passes_with_a_matching_gpu_node(tau_cli, env_for, live, umbrella):
    prepared(tau_cli, env_for, live, umbrella)
    add_node(live, "gpu-1", gpu=8, instance_type="Standard_ND96isr_H200_v5",
             labels={"topology.kubernetes.io/zone": "eastus2-1"},
             taints=[{"key": "sku", "value": "gpu", "effect": "NoSchedule"}])
    result = tau_cli("cluster", "validate", "topology", "--profile", PROFILE)
    assert result.exit_code == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == ["cluster: tau-sim", "taucluster generation: 1", lines[2]] and re.fullmatch(
        r"profile set hash: [0-9a-f]{64}", lines[2])
    assert f"profile: {PROFILE}" in lines
    for expected in ("  ok localqueue taugrid-default/jobqueue: exists", "  ok clusterqueue jobqueue: exists",
                     "  ok workloadpriorityclass taugrid-default: exists", "  ok priorityclass taugrid-default: exists",
                     "  ok node-match taugrid-default-gpu: 1 GPU node(s)",
                     "  ok gpu-allocatable taugrid-default-gpu: largest node offers 8 GPU(s); the profile needs 2 "
                     "per worker",
                     "  ok ib-capable taugrid-default-gpu: 1 InfiniBand-capable node(s) Ready"):
        assert expected in lines
    assert lines[-1].startswith("summary: ") and lines[-1].endswith(" 0 errors")


def test_missing_objects_fail_closed(tau_cli, env_for, live, umbrella):
    prepared(tau_cli, env_for, live, umbrella)
    live.store.delete("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass", None, "taugrid-default")
    result = tau_cli("cluster", "validate", "topology", "--profile", PROFILE)
    assert result.exit_code == 1
    assert "  error workloadpriorityclass taugrid-default: not found" in result.stdout
    assert "  warn node-match taugrid-default-gpu: no GPU node matches the flavor now" in result.stdout
    assert "error: topology validation failed: 1 error(s)" in result.stderr
    unknown = tau_cli("cluster", "validate", "topology", "--profile", "nope")
    assert unknown.exit_code == 1 and "workload profile 'nope' is not in the ready profile set" in unknown.stderr
    live.stand_in.enabled = False
    tc = live.store.get("tau.azure.com/v1alpha1", "TauCluster", None, "cluster")
    tc["spec"]["managementMode"] = "Observe"  # a spec change: generation 2, not yet observed
    live.store.update(tc)
    result = tau_cli("cluster", "validate", "topology")
    assert result.exit_code == 1
    assert "workload profiles are stale: observed at generation 1, the object is at generation 2" in result.stderr
