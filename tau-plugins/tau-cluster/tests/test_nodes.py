"""``tau cluster validate nodes``: probe pods on the simulated cluster, their output scripted per node."""

from __future__ import annotations

import pytest

from tau_cluster.nodes import parse_probe, verdict
from tau_testing.sim.controllers.scheduler import add_node
from tau_testing.sim.scripts import PodScript, scripts_of

HEALTHY = ["smi_rc=0", "gpu_count=8", "driver=570.86.15", "mig_mode=Disabled", "mig_instances=0", "nvlink_rc=0",
           "nvlink_inactive=0", "ecc_uncorrected=0", "ib_total=8", "ib_active=8"]


def cluster_with_gpus(sim_cluster_factory):
    cluster = sim_cluster_factory(tls=True)
    add_node(cluster, "cpu-1")
    add_node(cluster, "gpu-a", gpu=8, instance_type="Standard_ND96isr_H200_v5",
             labels={"tau.azure.com/gpu-class": "h200-141gb"})
    add_node(cluster, "gpu-b", gpu=8, instance_type="Standard_ND96isr_H200_v5",
             labels={"tau.azure.com/gpu-class": "h200-141gb"})
    add_node(cluster, "gpu-empty", instance_type="Standard_NC24ads_A100_v4")
    broken = [line.replace("nvlink_inactive=0", "nvlink_inactive=2") for line in HEALTHY]
    scripts_of(cluster).add("tau-validate-gpu-a-", PodScript(run_seconds=0, logs=HEALTHY))
    scripts_of(cluster).add("tau-validate-gpu-b-", PodScript(run_seconds=0, logs=broken))
    return cluster


def test_probe_table_and_verdicts(tau_cli, env_for, sim_cluster_factory):
    cluster = cluster_with_gpus(sim_cluster_factory)
    env_for(cluster)
    result = tau_cli("cluster", "validate", "nodes", "--timeout", "30s")
    assert result.exit_code == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NODE", "GPUS", "SOURCE", "NVLINK", "IB", "ECC", "DRIVER", "STATUS"]
    rows = {line.split()[0]: line for line in lines[1:-1]}
    assert set(rows) == {"gpu-a", "gpu-b", "gpu-empty"}
    assert rows["gpu-a"].split()[:4] == ["gpu-a", "8", "device-plugin", "0"] and rows["gpu-a"].endswith("HEALTHY")
    assert "UNHEALTHY (inactive NVLink links)" in rows["gpu-b"]
    assert "UNHEALTHY (exposes no schedulable GPUs)" in rows["gpu-empty"]
    assert lines[-1] == "1/3 nodes healthy"
    assert "error: node validation failed: 1/3 nodes healthy" in result.stderr
    assert cluster.store.list("v1", "Pod", "default") == []  # probes are deleted
    probes = [e for e in cluster.requests.entries if e.verb == "create" and e.resource == "pods"]
    assert len(probes) == 2


def test_gpu_class_selects_nodes_and_min_healthy(tau_cli, env_for, sim_cluster_factory):
    cluster = cluster_with_gpus(sim_cluster_factory)
    env_for(cluster)
    result = tau_cli("cluster", "validate", "nodes", "--gpu-class", "h200-nvlink-141gb", "--min-healthy", "1",
                     "--timeout", "30s")
    assert result.exit_code == 0, result.stderr
    assert "warning: gpu_class 'h200-nvlink-141gb' is deprecated; use 'h200-141gb'" in result.stderr
    assert result.stdout.splitlines()[-1] == "1/2 nodes healthy"
    too_many = tau_cli("cluster", "validate", "nodes", "--gpu-class", "h200-141gb", "--min-healthy", "2",
                       "--timeout", "30s")
    assert too_many.exit_code == 1 and "only 1 healthy nodes, need at least 2" in too_many.stderr
    conflict = tau_cli("cluster", "validate", "nodes", "--gpu-class", "any", "--selector",
                       "tau.azure.com/gpu-class=h200-141gb")
    assert conflict.exit_code == 2
    none = tau_cli("cluster", "validate", "nodes", "--selector", "pool=none", "--min-healthy", "1")
    assert none.exit_code == 1 and "no GPU nodes found" in none.stderr


@pytest.mark.parametrize(("change", "status"), [
    ({}, "HEALTHY"),
    ({"smi_rc": "9"}, "UNHEALTHY"),
    ({"gpu_count": "4"}, "UNHEALTHY"),
    ({"mig_mode": "Enabled"}, "UNHEALTHY"),
    ({"nvlink_rc": "1"}, "DEGRADED"),
    ({"ecc_uncorrected": "3"}, "DEGRADED"),
    ({"ib_active": "6"}, "DEGRADED"),
])
def test_health_rules(change, status):
    probe = {**parse_probe("\n".join(HEALTHY)), **change}
    assert verdict("n", 8, "device-plugin", probe).status == status
    assert verdict("n", 8, "device-plugin", {}).status == "UNKNOWN"


def test_dra_slices_count_gpus_per_node_with_mig_collapsed_to_the_parent():
    from tau_cluster.nodes import dra_gpus

    def device(name, parent=None):
        attributes = {"uuid": {"string": name}} | ({"parentUUID": {"string": parent}} if parent else {})
        return {"name": name, "attributes": attributes}

    slices = [
        {"spec": {"driver": "gpu.nvidia.com", "nodeName": "a", "devices": [device("g0"), device("g1")]}},
        {"spec": {"driver": "gpu.nvidia.com", "nodeName": "b",
                  "devices": [device("m0", parent="g0"), device("m1", parent="g0"), device("g1")]}},
        {"spec": {"driver": "net.example.com", "nodeName": "a", "devices": [device("nic0")]}},
    ]
    assert dra_gpus(slices) == {"a": 2, "b": 2}
