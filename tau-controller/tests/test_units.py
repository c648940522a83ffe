"""Pure pieces of the controller: the work queue, conditions, primary selection, profile normalization."""

from __future__ import annotations

import asyncio

import pytest

from tau_controller.cluster import desired_state_hash
from tau_controller.conditions import cond, merge_conditions, status_equal
from tau_controller.context import ReconcileError
from tau_controller.nodes import label_key_error, label_value_error
from tau_controller.profiles import normalize, validate
from tau_controller.serve import parse_address
from tau_controller.workqueue import WorkQueue
from tau_controller.workspace import phase, reserved_reason, select_primary
from tau_core import keys
from tau_core.errors import UsageError


def test_work_queue_dedupes_and_reprocesses_keys_added_while_processing():
    async def go() -> list[str]:
        q = WorkQueue()
        q.add("a")
        q.add("a")
        q.add("b")
        assert len(q) == 2
        first = await q.get()
        q.add(first)  # while processing: processed again after done()
        q.done(first)
        seen = [first, await q.get()]
        q.done(seen[-1])
        seen.append(await q.get())
        q.add_after("c", 0.01)
        q.add_after("c", 5)  # the earliest wake-up wins
        seen.append(await asyncio.wait_for(q.get(), 2))
        q.close()
        return seen

    assert asyncio.run(go()) == ["a", "b", "a", "c"]


def test_backoff_grows_and_resets():
    q = WorkQueue()
    assert [q.failed("k") for _ in range(4)] == [0.05, 0.1, 0.2, 0.4]
    q.succeeded("k")
    assert q.failed("k") == 0.05


def test_last_transition_time_is_kept_only_while_status_reason_and_message_are_unchanged() -> None:
    old = merge_conditions([], [cond("Ready", "True", "A", "m")])
    old[0]["lastTransitionTime"] = "2020-01-01T00:00:00Z"
    kept = merge_conditions(old, [cond("Ready", "True", "A", "m")])
    assert kept[0]["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    for changed in (cond("Ready", "True", "B", "m"), cond("Ready", "True", "A", "other message"),
                    cond("Ready", "False", "A", "m")):
        assert merge_conditions(old, [changed])[0]["lastTransitionTime"] != "2020-01-01T00:00:00Z", changed
    assert status_equal({"phase": "Ready", "conditions": old}, {"phase": "Ready", "conditions": kept})
    assert not status_equal({"phase": "Ready", "conditions": old},
                            {"phase": "Ready", "conditions": merge_conditions(old, [cond("Ready", "True", "B", "m")])})


def _ws(name: str, created: str, *, marked: bool = False, status: dict | None = None, deleting: bool = False):
    meta = {"name": name, "creationTimestamp": created,
            "annotations": {keys.V0_PRIMARY_WORKSPACE: "true"} if marked else {}}
    if deleting:
        meta["deletionTimestamp"] = created
    return {"metadata": meta, "status": status or {}}


def test_primary_selection_precedence():
    blocked = {"conditions": [{"type": "RBACReady", "reason": "AdditionalWorkspaceBlocked"}]}
    a, b = _ws("a", "2026-01-01T00:00:00Z"), _ws("b", "2026-01-02T00:00:00Z", status={"phase": "Ready"})
    assert select_primary([a, b])["metadata"]["name"] == "b"  # the incumbent beats an older newcomer
    assert select_primary([a, _ws("b", "2026-01-02T00:00:00Z", status=blocked)])["metadata"]["name"] == "a"
    assert select_primary([a, _ws("c", "2026-01-03T00:00:00Z", marked=True, deleting=True)])["metadata"]["name"] == "c"
    with pytest.raises(ReconcileError, match="multiple TauWorkspaces claim the v0 primary marker: 'x' and 'y'"):
        select_primary([_ws("y", "1", marked=True), _ws("x", "2", marked=True)])
    with pytest.raises(ReconcileError, match="no non-terminating TauWorkspace exists"):
        select_primary([_ws("d", "1", deleting=True)])


def test_reserved_namespaces_and_phase():
    assert reserved_reason("tau-platform", "tau-system") == "the Tau system namespace is owned by the platform installer"
    assert reserved_reason("default", "tau-system") == "the default namespace is shared cluster-wide"
    assert reserved_reason("aurora", "tau-system") is None
    assert phase({"RBACReady": {"status": "True"}, "QueueReady": {"status": "True"}}) == "Ready"
    assert phase({"RBACReady": {"status": "True"}}) == "Pending"
    assert phase({"RBACReady": {"status": "True"}, "QueueReady": {"status": "True"},
                  "DriftDetected": {"status": "True"}}) == "Degraded"


def test_label_rule_validation():
    assert label_key_error("tau.azure.com/gpu-class") is None
    assert "reserved" in label_key_error("node.kubernetes.io/x")
    assert "reserved" in label_key_error("kubernetes.io/arch")
    assert label_key_error("topology.kubernetes.io/zone") is None  # only the two prefixes of §2.2 are reserved
    assert "not a qualified name" in label_key_error("bad key")
    assert "not a valid label value" in label_value_error("k", "-bad-")


def test_profile_normalization_and_validation():
    p = normalize({"name": " GPU_Large ", "applicability": {"teams": ["Vision", "AI_Lab"]}, "gpusPerWorker": 8,
                   "workerCount": 2, "mode": "Fixed", "placement": "multi_node_nccl", "defaultLocalQueue": "jobqueue",
                   "priorities": {"disableDefaultPriorities": True}})
    assert (p["name"], p["applicability"]["teams"], p["placement"]) == ("gpu-large", ["ai-lab", "vision"],
                                                                        "multi-node-nccl")
    assert p["executionTarget"] == "singleCluster"
    assert validate(p) == []
    p["placement"] = "independent"
    assert validate(p) == ["workerCount > 1 (got 2) requires placement=multi-node-nccl"]
    p["placement"] = "same-network-domain"  # the newer catalog vocabulary
    assert validate(p) == []
    p["placement"] = "same-planet"
    assert validate(p) == ["placement 'same-planet' is not one of independent, single-node-nvlink, multi-node-nccl, "
                           "unconstrained, same-host, same-accelerator-domain, same-network-domain, same-site"]


def test_desired_state_hash_defaults_the_queue():
    assert desired_state_hash({}) == desired_state_hash({"workspaceDefaults": {"defaultQueue": "jobqueue"}})
    assert desired_state_hash({}) != desired_state_hash({"workspaceDefaults": {"defaultQueue": "other"}})


def test_bind_addresses():
    assert parse_address("127.0.0.1:8081", "--x") == ("127.0.0.1", 8081)
    assert parse_address(":8080", "--x") == ("0.0.0.0", 8080)
    assert parse_address("0", "--x") is None
    with pytest.raises(UsageError):
        parse_address("8080", "--x")


def test_a_plugin_rule_that_disagrees_with_a_values_rule_is_a_conflict():
    from tau_controller.nodes import declared_rules
    from tau_core.gpu_catalog import find_conflicts, node_label_rules
    from tau_core.hookspecs import hookimpl
    from tau_core.plugins import Host

    class Operator:
        @hookimpl
        def tau_register_gpu_class_rules(self, register):
            register("acme", [{"match": {"vmSizes": ["Standard_ND96asr_v4"]},
                               "labels": {keys.GPU_CLASS: "a100-80gb"}}])

    host = Host.create(entry_points=False, extra_plugins=[("acme", Operator())], env={})
    rules, errors = declared_rules({"nodes": {"labelRules": node_label_rules()}}, host)
    assert errors == []
    conflicts = find_conflicts(rules)
    assert [(c.first.source, c.second.source) for c in conflicts] == [("spec.nodes.labelRules[6]", "acme")]
