"""Contract: the CLI's profile readers (``tau_core.config.profiles`` and the typed model it checks with) accept
exactly what the controller writes into ``status.workloadProfiles``, on the same objects.

The controller resolves a varied catalog (normalised teams, lanes and descriptions; global applicability through
``sharedLocalQueues``; disabled default priorities; an elastic multi-node profile; a defaulted execution
target; an invalid profile; one that is not Ready); then every reader the CLI uses runs on the published
status: the set hash the fail-closed cluster reader recomputes, the typed model (round trip), the offline
snapshot reader with its key and shape checks, and profile selection.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ctrl_platform import workspace

from tau_core import keys
from tau_core.config.profiles import (
    PROFILE_KEYS,
    ProfileCatalog,
    SelectionRequest,
    load_snapshot,
    profile_set_hash,
    select_profile,
)
from tau_core.workspace.profiles import read_profile

pytestmark = pytest.mark.realclock  # the controller runs in real time

TAU = keys.API_VERSION
PRIORITIES = {"workloadPriorityClassName": "taugrid-default", "podPriorityClassName": "taugrid-default"}


def _profile(name: str, **fields: Any) -> dict[str, Any]:
    base = {"name": name, "gpusPerWorker": 1, "workerCount": 1, "mode": "fixed", "placement": "independent",
            "defaultLocalQueue": "jobqueue", "applicability": {"namespaces": ["aurora"]},
            "priorities": dict(PRIORITIES)}
    return {**base, **fields}


READY = [
    _profile("train-large", description="  one GPU, trimmed  ", gpusPerWorker=1,
             applicability={"teams": ["Vision_Lab"], "lanes": ["Training"], "namespaces": ["aurora"]}),
    _profile("global-eval", applicability={}, executionTarget="singleCluster"),
    _profile("no-priorities", priorities={"disableDefaultPriorities": True}),
    _profile("elastic-2node", gpusPerWorker=8, workerCount=2, mode="elastic", placement="multi-node-nccl"),
]
NOT_READY = [
    _profile("bad..name"),
    _profile("missing-queue", defaultLocalQueue="nope"),
]


def _published(cluster: Any) -> dict[str, Any]:
    obj = cluster.store.get(TAU, "TauCluster", None, "cluster")
    return dict(((obj.get("status") or {}).get("workloadProfiles") or {}), generation=obj["metadata"]["generation"])


def _declare(cluster: Any, profiles: list[dict[str, Any]]) -> None:
    obj = cluster.store.get(TAU, "TauCluster", None, "cluster")
    obj["spec"].update(workloadProfiles=profiles,
                       queues={"sharedLocalQueues": [{"namespace": "aurora", "name": "jobqueue"}]})
    cluster.store.update(obj)


def _current(cluster: Any, observed: int) -> bool:
    published = _published(cluster)
    return published.get("observedGeneration") == published["generation"] and published.get("observed") == observed


def test_every_reader_of_the_cli_accepts_what_the_controller_publishes(platform: Any, controller: Any,
                                                                       tmp_path: Path) -> None:
    platform.store.create(workspace())
    _declare(platform, READY + NOT_READY)
    platform.wait_for(lambda: _current(platform, 6) and _published(platform).get("ready") == 4, timeout=20)
    mixed = _published(platform)
    # every profile, ready or not, valid or not, reads as the typed model and round-trips exactly
    for profile in mixed["profiles"]:
        assert set(profile) <= set(PROFILE_KEYS), sorted(set(profile) - set(PROFILE_KEYS))
        assert read_profile(profile).to_dict() == profile
    assert mixed["profileSetHash"] == profile_set_hash(mixed["profiles"])

    _declare(platform, READY)  # a ready set: what the CLI renders with
    platform.wait_for(lambda: _current(platform, 4) and _published(platform).get("ready") == 4, timeout=20)
    published = _published(platform)
    names = [p["name"] for p in published["profiles"]]
    assert names == ["elastic-2node", "global-eval", "no-priorities", "train-large"]  # normalised, sorted
    # the fail-closed cluster reader: recomputed hash, then the typed check of every profile
    assert published["profileSetHash"] == profile_set_hash(published["profiles"])
    catalog = ProfileCatalog(published["generation"], published["profileSetHash"], published["profiles"], "cluster")
    assert [p.name for p in catalog.typed()] == names
    # the offline snapshot reader: known keys, shapes, readiness at the generation, the hash
    snapshot = {"apiVersion": TAU, "kind": "TauWorkloadProfileSnapshot", "tauClusterGeneration":
                published["generation"], "profileSetHash": published["profileSetHash"],
                "profiles": published["profiles"]}
    (tmp_path / "profiles.yaml").write_text(json.dumps(snapshot))
    offline = load_snapshot(tmp_path / "profiles.yaml")
    assert offline.set_hash == published["profileSetHash"] and offline.profiles == published["profiles"]
    # selection sees every profile Ready at this generation and applies the normalised scope
    chosen = select_profile(offline, SelectionRequest("train-large", "aurora", "vision-lab", "training"))
    assert chosen["applicability"] == {"teams": ["vision-lab"], "lanes": ["training"], "namespaces": ["aurora"]}
    assert chosen["description"] == "one GPU, trimmed"
    for name in names:
        assert select_profile(offline, SelectionRequest(name, "aurora", "vision-lab", "training"))["name"] == name
    by_name = {p["name"]: p for p in published["profiles"]}
    assert by_name["global-eval"]["localQueues"] == [{"namespace": "aurora", "name": "jobqueue",
                                                      "clusterQueue": "jobqueue"}]
    assert by_name["no-priorities"]["workloadPriorityClasses"] == []
    assert (by_name["elastic-2node"]["mode"], by_name["elastic-2node"]["placement"]) == ("elastic", "multi-node-nccl")
    assert by_name["elastic-2node"]["executionTarget"] == "singleCluster"  # defaulted
