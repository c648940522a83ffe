"""Workload-profile compatibility: the readers accept everything product profiles carry (the ``serving``
lane, the newer placement names, the per-profile queue bindings), round-trip them through the typed model,
and the multi-node RayService rules refuse an unfit profile with a one-line reason."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tau_core.config import ConfigValidationError
from tau_core.config.profiles import ProfileCatalog, load_snapshot, profile_set_hash
from tau_core.config.resolve import RunOptions, resolve_offline
from tau_core.errors import ConfigError
from tau_core.plugins import Host
from tau_core.workspace.profiles import MultiNodeVerdict, multinode_rayservice, read_profile

COND = {"type": "Ready", "status": "True", "reason": "WorkloadProfileReady", "message": "profile is resolved",
        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 23}
#: A resolved profile as the controller publishes it (the product's serve-h100-eight shape).
SERVING: dict[str, Any] = {
    "name": "h100-nvl-8node", "description": "Eight one-GPU serving workers",
    "applicability": {"teams": ["research"], "lanes": ["serving"], "namespaces": ["serving-ns"]},
    "gpusPerWorker": 1, "workerCount": 8, "mode": "fixed", "placement": "same-network-domain",
    "defaultLocalQueue": "jobqueue", "executionTarget": "singleCluster",
    "priorities": {"disableDefaultPriorities": False, "workloadPriorityClassName": "tau-default",
                   "podPriorityClassName": "tau-default"},
    "localQueues": [{"namespace": "serving-ns", "name": "jobqueue", "clusterQueue": "example-gpu-cq"}],
    "clusterQueues": ["example-gpu-cq"], "resourceFlavors": ["h100"], "topologies": ["taugrid-gpu-topology"],
    "workloadPriorityClasses": ["tau-default"], "podPriorityClasses": ["tau-default"],
    "conditions": [COND],
}


def snapshot(tmp_path: Path, profiles: list[dict[str, Any]], set_hash: str | None = None) -> Path:
    doc = {"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauWorkloadProfileSnapshot", "tauClusterGeneration": 23,
           "profileSetHash": set_hash or profile_set_hash(profiles), "profiles": profiles}
    path = tmp_path / "serve-h100-eight.snapshot.yaml"
    path.write_text(json.dumps(doc))
    return path


def test_typed_profile_round_trips_every_published_field() -> None:
    typed = read_profile(SERVING)
    assert typed.lanes == ["serving"] and typed.teams == ["research"]
    assert typed.local_queues is not None and typed.local_queues[0].cluster_queue == "example-gpu-cq"
    assert typed.cluster_queues == ["example-gpu-cq"]
    assert typed.workload_priority_classes == ["tau-default"] and typed.pod_priority_classes == ["tau-default"]
    assert typed.to_dict() == SERVING
    assert profile_set_hash([typed.to_dict()]) == profile_set_hash([SERVING])
    bare = {k: SERVING[k] for k in ("name", "gpusPerWorker", "workerCount", "placement", "defaultLocalQueue")}
    assert read_profile(bare).to_dict() == bare  # a declaration never resolved: nothing invented


@pytest.mark.parametrize(("change", "field"), [
    ({"workerCount": "8"}, "workerCount"),
    ({"localQueues": [{"namespace": "n", "name": "q"}]}, "clusterQueue"),
    ({"clusterQueues": "example-gpu-cq"}, "clusterQueues"),
    ({"surprise": 1}, "surprise"),
])
def test_typed_reader_refuses_malformed_fields_naming_them(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field) as exc:
        read_profile({**SERVING, **change})
    assert "h100-nvl-8node" in exc.value.message and "\n" not in exc.value.message


def test_snapshot_with_serving_lane_bindings_and_newer_placement_validates(tmp_path: Path) -> None:
    catalog = load_snapshot(snapshot(tmp_path, [SERVING]))
    assert catalog.generation == 23 and catalog.profiles == [SERVING]
    [typed] = catalog.typed()
    assert typed.to_dict() == SERVING and typed.placement == "same-network-domain"


@pytest.mark.parametrize(("change", "path", "message"), [
    ({"localQueues": [{"namespace": "serving-ns", "name": "jobqueue"}]}, "profiles.0.localQueues.0",
     "namespace, name and clusterQueue"),
    ({"workloadPriorityClasses": "tau-default"}, "profiles.0.workloadPriorityClasses", "list of object names"),
    ({"podPriorityClasses": [""]}, "profiles.0.podPriorityClasses", "list of object names"),
    ({"placement": "same-planet"}, "profiles.0.placement", "same-network-domain"),
    ({"conditions": [{**COND, "extra": "x"}]}, "profiles.0", "extra"),
])
def test_snapshot_with_malformed_bindings_is_refused_with_the_position(tmp_path: Path, change: dict[str, Any],
                                                                        path: str, message: str) -> None:
    bad = {**copy.deepcopy(SERVING), **change}
    with pytest.raises(ConfigValidationError) as exc:
        load_snapshot(snapshot(tmp_path, [bad]))
    [issue] = exc.value.issues
    assert issue.path == path and message in issue.message


def test_serving_lane_selects_the_serving_profile_offline(tmp_path: Path) -> None:
    """A config in the ``serving`` lane renders from a snapshot profile with the newer placement name."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "tau").mkdir()
    snapshot(tmp_path / "tau", [SERVING])
    (tmp_path / "tau" / "serve.yaml").write_text(
        "name: serve\nengine: rayjob\nimage: bash:5.2\npolicy:\n  team: research\n  lane: serving\n"
        "  namespace: serving-ns\n  workload_profile_snapshot: serve-h100-eight.snapshot.yaml\n")
    host = Host.create(entry_points=False, env={})
    res = resolve_offline(RunOptions(target="serve", cwd=tmp_path, env={}, dry_run="client"), host=host)
    req = res.request
    assert req.context["workload_profile"]["name"] == "h100-nvl-8node" and req.context["queue"] == "jobqueue"
    assert req.config.policy.lane == "serving" and req.config.policy.topology == "same-network-domain"
    assert req.config.compute.workers == 8 and req.config.compute.gpus_per_worker == 1


def test_multinode_rayservice_allows_a_fixed_same_network_domain_single_cluster_gpu_profile() -> None:
    verdict = multinode_rayservice(read_profile(SERVING), 8)
    assert verdict == MultiNodeVerdict(True, "") and verdict
    nccl = {**SERVING, "placement": "multi-node-nccl"}  # the documented name of the same placement
    assert multinode_rayservice(nccl, 8).allowed


@pytest.mark.parametrize(("change", "nodes", "reason"), [
    ({}, 4, "--nodes 4 does not match workload profile 'h100-nvl-8node' workerCount 8"),
    ({}, 1, "--nodes must be an integer from 2 to 2147483647"),
    ({"mode": "elastic"}, 8, "has mode elastic; a multi-node RayService needs a fixed profile"),
    ({"placement": "independent"}, 8, "needs same-network-domain placement"),
    ({"placement": "same-site"}, 8, "needs same-network-domain placement"),
    ({"executionTarget": "multiKueue"}, 8, "runs on a single cluster"),
    ({"gpusPerWorker": 0}, 8, "has 0 GPUs per worker; a multi-node RayService needs at least 1"),
])
def test_multinode_rayservice_refuses_with_a_one_line_reason(change: dict[str, Any], nodes: int,
                                                             reason: str) -> None:
    verdict = multinode_rayservice({**SERVING, **change}, nodes)
    assert not verdict and not verdict.allowed
    assert reason in verdict.reason and "\n" not in verdict.reason


def test_catalog_typed_view_names_the_source() -> None:
    catalog = ProfileCatalog(3, "sha256:x", [{**SERVING, "gpusPerWorker": -1.5}], "cluster", "TauCluster cluster")
    with pytest.raises(ConfigError, match="TauCluster cluster 'h100-nvl-8node' is malformed"):
        catalog.typed()


@pytest.mark.parametrize(("placement", "level"), [
    ("same-network-domain", "tau.azure.com/network-domain"),
    ("same-accelerator-domain", "tau.azure.com/accelerator-domain"),
    ("same-site", "tau.azure.com/site"),
])
def test_every_accepted_profile_placement_renders_a_topology_request(placement: str, level: str) -> None:
    from tau_core.config.catalog import ACCEPTED_PROFILE_PLACEMENTS
    from tau_core.rendering.placement import topology_annotations

    assert placement in ACCEPTED_PROFILE_PLACEMENTS
    assert list(topology_annotations(placement).values()) == [level]
    assert all(topology_annotations(p) for p in ACCEPTED_PROFILE_PLACEMENTS)
