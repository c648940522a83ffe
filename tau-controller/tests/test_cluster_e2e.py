"""TauCluster reconciler end to end: node labels (Reconcile/Observe, validation, conflicts), workload profiles."""

from __future__ import annotations

from typing import Any

import pytest
from ctrl_platform import workspace

from tau_core import keys
from tau_core.gpu_catalog import node_label_rules

pytestmark = pytest.mark.realclock  # the controller runs in real time

TAU = keys.API_VERSION


def _cluster(c: Any) -> dict[str, Any]:
    return c.store.get(TAU, "TauCluster", None, "cluster")


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def _set_spec(c: Any, **spec: Any) -> None:
    obj = _cluster(c)
    obj["spec"].update(spec)
    c.store.update(obj)


def _reason(c: Any, ctype: str) -> str | None:
    return (_conditions(_cluster(c)).get(ctype) or {}).get("reason")


def _node_labels(c: Any, name: str) -> dict[str, str]:
    return c.store.get("v1", "Node", None, name)["metadata"]["labels"]


def test_reconcile_mode_labels_matching_nodes_with_the_catalog(platform, controller_factory):
    _set_spec(platform, nodes={"labelRules": node_label_rules()})
    controller_factory(platform)
    platform.wait_for(lambda: _reason(platform, "NodesReady") == "NodeLabelsReady", timeout=20)
    gpu = _node_labels(platform, "gpu-node-1")
    assert gpu[keys.GPU_CLASS] == "a100-40gb" and gpu[keys.KUEUE_GPU_SERIES] == "nd-a100-v4"
    assert gpu["agentpool"] == "gpu"  # undeclared keys untouched
    assert keys.GPU_CLASS not in _node_labels(platform, "cpu-node-1")
    status = _cluster(platform)["status"]
    assert status["nodes"] == {"observed": 1, "ready": 1, "drifted": 0}
    assert status["phase"] == "Ready" and len(status["desiredStateHash"]) == 64


def test_observe_mode_reports_drift_and_changes_nothing(platform, controller_factory):
    _set_spec(platform, managementMode="Observe", nodes={"labelRules": node_label_rules()})
    before = platform.store.get("v1", "Node", None, "gpu-node-1")["metadata"]["resourceVersion"]
    controller_factory(platform)
    platform.wait_for(lambda: _reason(platform, "NodesReady") == "NodeLabelDrift", timeout=20)
    status = _cluster(platform)["status"]
    assert status["nodes"] == {"observed": 1, "ready": 0, "drifted": 1}
    assert _conditions(_cluster(platform))["NodesReady"]["message"] == \
        "1 of 1 matching nodes need topology label reconciliation"
    assert (status["phase"], _reason(platform, "ObserveOnly")) == ("Pending", "ObserveMode")
    assert platform.store.get("v1", "Node", None, "gpu-node-1")["metadata"]["resourceVersion"] == before


def test_invalid_and_conflicting_rules_become_conditions(platform, controller):
    _set_spec(platform, nodes={"labelRules": [{"labels": {"node.kubernetes.io/gpu": "x"}}]})
    platform.wait_for(lambda: _reason(platform, "NodesReady") == "InvalidNodeLabelRules", timeout=20)
    assert "reserved Kubernetes label prefixes cannot be managed by TauCluster" in \
        _conditions(_cluster(platform))["NodesReady"]["message"]
    assert _cluster(platform)["status"]["phase"] == "Degraded"
    extra = {"match": {"vmSizes": ["Standard_ND96asr_v4"]}, "labels": {keys.GPU_CLASS: "a100-80gb"}}
    _set_spec(platform, nodes={"labelRules": [*node_label_rules(), extra]})
    platform.wait_for(lambda: _reason(platform, "NodesReady") == "ConflictingNodeLabelRules", timeout=20)
    assert _reason(platform, "OwnershipConflict") == "ConflictingNodeLabelRules"
    assert _reason(platform, "DriftDetected") == "NodeLabelRuleConflict"
    assert keys.GPU_CLASS not in _node_labels(platform, "gpu-node-1")  # nothing applied while conflicting


def test_a_failed_node_patch_is_drift_and_is_retried_with_backoff_until_it_lands(platform: Any,
                                                                                   controller_factory: Any) -> None:
    _set_spec(platform, nodes={"labelRules": node_label_rules()})
    refused = platform.faults.add(method="PATCH", path_regex="/nodes/gpu-node-1", status=422, message="refused")
    controller = controller_factory(platform)
    platform.wait_for(lambda: _reason(platform, "NodesReady") == "NodeLabelReconcileFailed", timeout=20)
    status = _cluster(platform)["status"]
    assert status["nodes"] == {"observed": 1, "ready": 0, "drifted": 1} and status["phase"] == "Degraded"
    assert _reason(platform, "DriftDetected") == "NodeLabelDrift"
    assert "node gpu-node-1" in _conditions(_cluster(platform))["NodesReady"]["message"]
    platform.wait_for(lambda: controller.metrics.errors.labels("cluster")._value.get() >= 2, timeout=20)
    refused.remove()  # no event and no 10-minute resync is needed: the backoff retry labels the node
    platform.wait_for(lambda: _reason(platform, "NodesReady") == "NodeLabelsReady", timeout=30)
    assert _node_labels(platform, "gpu-node-1")[keys.GPU_CLASS] == "a100-40gb"


def test_node_added_later_is_labelled(platform, controller_factory):
    from tau_testing.sim.controllers.scheduler import add_node

    _set_spec(platform, nodes={"labelRules": node_label_rules()})
    controller_factory(platform)
    platform.wait_for(lambda: _reason(platform, "NodesReady") == "NodeLabelsReady", timeout=20)
    add_node(platform, "h200-node", gpu=8, instance_type="Standard_ND96isr_H200_v5")
    platform.wait_for(lambda: _node_labels(platform, "h200-node").get(keys.GPU_CLASS) == "h200-141gb", timeout=20)


PRIORITIES = {"workloadPriorityClassName": "taugrid-default", "podPriorityClassName": "taugrid-default"}


def _profiles(description: str = "one CPU pod") -> list[dict[str, Any]]:
    return [{"name": "cpu-small", "description": description,
             "applicability": {"namespaces": ["aurora"], "teams": [], "lanes": []},
             "gpusPerWorker": 0, "workerCount": 1, "mode": "fixed", "placement": "independent",
             "defaultLocalQueue": "jobqueue", "priorities": dict(PRIORITIES)},
            {"name": "bad..name", "gpusPerWorker": 1, "workerCount": 1, "mode": "fixed",
             "placement": "independent", "defaultLocalQueue": "jobqueue", "priorities": dict(PRIORITIES)},
            {"name": "unknown-priority", "applicability": {"namespaces": ["aurora"]}, "gpusPerWorker": 1,
             "workerCount": 1, "mode": "fixed", "placement": "independent", "defaultLocalQueue": "jobqueue",
             "priorities": {"workloadPriorityClassName": "nope", "podPriorityClassName": "taugrid-default"}}]


def _published(c: Any) -> dict[str, Any]:
    return (_cluster(c).get("status") or {}).get("workloadProfiles") or {}


def _dry_run(tau_cli: Any, repo: Any) -> Any:
    (repo / "tau" / "train.yaml").write_text("name: train\nengine: job\nentrypoint: ../train.py\n"
                                             "runtime:\n  image: ghcr.io/acme/train:1.0\npolicy:\n  profile: cpu-small\n")
    return tau_cli("run", "train", "--dry-run=client", "-n", "aurora")


@pytest.mark.slow
def test_profiles_resolve_and_the_cli_renders_with_them(platform, controller_factory, tau_cli, tau_env, tmp_path,
                                                        monkeypatch, tau_commands):
    import subprocess

    from ruamel.yaml import YAML

    from tau_core.config.profiles import profile_set_hash

    repo = tmp_path / "repo"
    (repo / "tau").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "train.py").write_text("print('hi')\n")
    monkeypatch.chdir(repo)
    tau_env["KUBECONFIG"] = str(platform.write_kubeconfig(tmp_path / "kube" / "config", user="researcher"))

    first = controller_factory(platform)
    platform.store.create(workspace())
    _set_spec(platform, workloadProfiles=_profiles())
    platform.wait_for(lambda: _published(platform).get("observedGeneration") == _cluster(platform)["metadata"]
                      ["generation"] and _published(platform).get("ready") == 1, timeout=20)
    published = _published(platform)
    by_name = {p["name"]: p for p in published["profiles"]}
    assert sorted(by_name) == ["bad..name", "cpu-small", "unknown-priority"]
    small = by_name["cpu-small"]
    assert small["localQueues"] == [{"namespace": "aurora", "name": "jobqueue", "clusterQueue": "jobqueue"}]
    assert small["resourceFlavors"] == ["taugrid-default-cpu", "taugrid-default-gpu"]
    assert {c["type"]: c["status"] for c in small["conditions"]}["Ready"] == "True"
    broken = {c["type"]: c for c in by_name["bad..name"]["conditions"]}
    assert broken["Ready"]["reason"] == "InvalidWorkloadProfile"
    assert "name 'bad..name' is not a DNS-1123 subdomain" in broken["Ready"]["message"]
    assert broken["TopologiesReady"]["reason"] == "ValidationSkipped"
    unknown = {c["type"]: c for c in by_name["unknown-priority"]["conditions"]}
    assert unknown["PriorityClassesReady"]["reason"] == "PriorityClassesNotReady"
    assert "WorkloadPriorityClass 'nope'" in unknown["PriorityClassesReady"]["message"]
    assert _conditions(_cluster(platform))["WorkloadProfilesReady"]["message"] == \
        "2 of 3 workload profiles are not ready"
    assert published["profileSetHash"] == profile_set_hash(published["profiles"])  # the CLI's own check
    assert _reason(platform, "WorkloadProfilesReady") == "WorkloadProfilesNotReady"

    _set_spec(platform, workloadProfiles=_profiles()[:1])  # drop the invalid one
    platform.wait_for(lambda: _reason(platform, "WorkloadProfilesReady") == "WorkloadProfilesReady", timeout=20)
    result = _dry_run(tau_cli, repo)
    assert result.exit_code == 0, result
    job = next(d for d in YAML(typ="safe").load_all(result.stdout) if d)
    old_hash = _published(platform)["profileSetHash"]
    assert job["metadata"]["annotations"][keys.WORKLOAD_PROFILE_SET_HASH] == old_hash

    first.stop()  # a changed profile while no controller runs: the published revision is stale
    _set_spec(platform, workloadProfiles=_profiles("a different intent")[:1])
    result = _dry_run(tau_cli, repo)
    assert result.exit_code == 1 and "the profile set is stale" in result.stderr
    controller_factory(platform)
    platform.wait_for(lambda: _published(platform).get("observedGeneration") ==
                      _cluster(platform)["metadata"]["generation"], timeout=20)
    assert _published(platform)["profileSetHash"] != old_hash
    result = _dry_run(tau_cli, repo)
    assert result.exit_code == 0, result


def test_multikueue_capability_follows_its_prerequisites(platform, controller):
    kueue = "kueue.x-k8s.io/v1beta2"
    platform.wait_for(lambda: _reason(platform, "MultiKueueReady") == "PrerequisitesNotReady", timeout=20)
    assert _conditions(_cluster(platform))["MultiKueueReady"]["message"] == \
        "no AdmissionCheck uses controller kueue.x-k8s.io/multikueue"
    platform.store.create({"apiVersion": kueue, "kind": "MultiKueueCluster", "metadata": {"name": "worker-1"},
                           "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                                     "location": "worker-1"}}}})
    platform.store.create({"apiVersion": kueue, "kind": "MultiKueueConfig", "metadata": {"name": "mk"},
                           "spec": {"clusters": ["worker-1"]}})
    check = platform.store.create({"apiVersion": kueue, "kind": "AdmissionCheck", "metadata": {"name": "mk-check"},
                                   "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                                            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                                           "name": "mk"}}})
    platform.wait_for(lambda: "AdmissionCheck 'mk-check' is not Active" in
                      (_conditions(_cluster(platform)).get("MultiKueueReady") or {}).get("message", ""), timeout=20)
    active = [{"type": "Active", "status": "True", "reason": "Active", "message": "",
               "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    check["status"] = {"conditions": active}
    platform.store.update_status(check)
    platform.wait_for(lambda: "has no Active worker clusters" in
                      (_conditions(_cluster(platform)).get("MultiKueueReady") or {}).get("message", ""), timeout=20)
    worker = platform.store.get(kueue, "MultiKueueCluster", None, "worker-1")
    worker["status"] = {"conditions": active}
    platform.store.update_status(worker)
    platform.wait_for(lambda: _reason(platform, "MultiKueueReady") == "Ready", timeout=20)


def test_a_tau_cluster_not_named_cluster_is_refused(platform, controller):
    platform.store.create({"apiVersion": TAU, "kind": "TauCluster", "metadata": {"name": "other"}, "spec": {}})
    platform.wait_for(lambda: (platform.store.get(TAU, "TauCluster", None, "other").get("status") or {})
                      .get("phase") == "Degraded", timeout=20)
    other = platform.store.get(TAU, "TauCluster", None, "other")
    ready = _conditions(other)["Ready"]
    assert (ready["reason"], ready["message"]) == ("InvalidSingletonName", "TauCluster must be named cluster")
    assert len(other["status"]["desiredStateHash"]) == 64 and other["status"]["managedResources"] == []
    assert {c["observedGeneration"] for c in other["status"]["conditions"]} == {other["metadata"]["generation"]}


def test_status_is_not_rewritten_when_nothing_changed(platform, controller):
    platform.wait_for(lambda: _reason(platform, "Ready") is not None, timeout=20)
    version = _cluster(platform)["metadata"]["resourceVersion"]
    stamps = {c["type"]: c["lastTransitionTime"] for c in _cluster(platform)["status"]["conditions"]}
    loop, before = controller._loop, controller.metrics.reconciles.labels("cluster", "success")._value.get()
    loop.call_soon_threadsafe(controller.enqueue, "cluster", "cluster")
    platform.wait_for(lambda: controller.metrics.reconciles.labels("cluster", "success")._value.get() > before,
                      timeout=20)
    assert _cluster(platform)["metadata"]["resourceVersion"] == version
    assert {c["type"]: c["lastTransitionTime"] for c in _cluster(platform)["status"]["conditions"]} == stamps


def test_priority_class_event_triggers_the_singleton(platform, controller):
    platform.store.create(workspace())
    profile = {"name": "late", "applicability": {"namespaces": ["aurora"]}, "gpusPerWorker": 0, "workerCount": 1,
               "mode": "fixed", "placement": "independent", "defaultLocalQueue": "jobqueue",
               "priorities": {"workloadPriorityClassName": "late-wpc", "podPriorityClassName": "taugrid-default"}}
    _set_spec(platform, workloadProfiles=[profile])
    platform.wait_for(lambda: _reason(platform, "WorkloadProfilesReady") == "WorkloadProfilesNotReady", timeout=20)
    # no periodic resync is due (10 min): only the WorkloadPriorityClass event can make the profile Ready
    platform.store.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                           "metadata": {"name": "late-wpc"}, "value": 10})
    platform.wait_for(lambda: _reason(platform, "WorkloadProfilesReady") == "WorkloadProfilesReady", timeout=20)


SERVING = {"name": "h100-nvl-8node", "description": "Eight one-GPU serving workers",
           "applicability": {"teams": ["research"], "lanes": ["serving"], "namespaces": ["aurora"]},
           "gpusPerWorker": 1, "workerCount": 8, "mode": "fixed", "placement": "same-network-domain",
           "defaultLocalQueue": "jobqueue", "executionTarget": "singleCluster", "priorities": dict(PRIORITIES)}


def test_serving_profile_publishes_its_queue_bindings(platform, controller):
    """A multi-node serving profile in the newer placement vocabulary is accepted by the CRD, resolved, and
    published with its LocalQueue, ClusterQueue and priority-class bindings, which the typed reader round-trips."""
    from tau_core.workspace.profiles import multinode_rayservice, read_profile

    platform.store.create(workspace())
    _set_spec(platform, workloadProfiles=[SERVING])
    platform.wait_for(lambda: _reason(platform, "WorkloadProfilesReady") == "WorkloadProfilesReady", timeout=20)
    [resolved] = _published(platform)["profiles"]
    assert resolved["applicability"]["lanes"] == ["serving"] and resolved["placement"] == "same-network-domain"
    assert resolved["localQueues"] == [{"namespace": "aurora", "name": "jobqueue", "clusterQueue": "jobqueue"}]
    assert resolved["clusterQueues"] == ["jobqueue"]
    assert resolved["workloadPriorityClasses"] == ["taugrid-default"]
    assert resolved["podPriorityClasses"] == ["taugrid-default"]
    typed = read_profile(resolved)
    assert typed.to_dict() == resolved and typed.lanes == ["serving"]
    assert multinode_rayservice(typed, 8).allowed
    assert multinode_rayservice(typed, 2).reason == \
        "--nodes 2 does not match workload profile 'h100-nvl-8node' workerCount 8"


def test_crd_refuses_several_workers_on_a_single_node_placement(platform):
    single = {**SERVING, "placement": "single-node-nvlink"}
    with pytest.raises(Exception, match="workerCount greater than one requires placement=multi-node-nccl"):
        _set_spec(platform, workloadProfiles=[single])
    assert not _cluster(platform)["spec"].get("workloadProfiles")


def _queue(cluster: Any, name: str, flavors: list[str], checks: list[str] | None = None) -> None:
    """LocalQueue ``lq-<name>`` in aurora backed by ClusterQueue ``cq-<name>``."""
    kueue = "kueue.x-k8s.io/v1beta2"
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": f, "resources": [{"name": "cpu", "nominalQuota": "4"}]} for f in flavors]}]}
    if checks:  # v1beta2 has only the strategy form (the legacy string list is v1beta1)
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    cluster.store.create({"apiVersion": kueue, "kind": "ClusterQueue", "metadata": {"name": f"cq-{name}"},
                          "spec": spec})
    cluster.store.create({"apiVersion": kueue, "kind": "LocalQueue",
                          "metadata": {"name": f"lq-{name}", "namespace": "aurora"},
                          "spec": {"clusterQueue": f"cq-{name}"}})


def test_each_unresolvable_profile_names_what_is_missing(platform: Any, controller: Any) -> None:
    platform.wait_for(lambda: _reason(platform, "WorkloadProfilesReady") == "NoWorkloadProfiles", timeout=20)
    assert _reason(platform, "NodesReady") == "NoNodeLabelRules"
    platform.store.create(workspace())
    platform.wait_for(lambda: platform.store.get("v1", "Namespace", None, "aurora") is not None, timeout=20)
    _queue(platform, "flavor", ["no-such-flavor"])
    _queue(platform, "mk", ["taugrid-default-cpu"], checks=["mk-check"])
    active = [{"type": "Active", "status": "True", "reason": "Active", "message": "",
               "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    check = platform.store.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
                                   "metadata": {"name": "mk-check"},
                                   "spec": {"controllerName": "kueue.x-k8s.io/multikueue"}})
    check["status"] = {"conditions": active}
    platform.store.update_status(check)

    def profile(name: str, queue: str, **fields: Any) -> dict[str, Any]:
        return {"name": name, "applicability": {"namespaces": ["aurora"]}, "gpusPerWorker": 0, "workerCount": 1,
                "mode": "fixed", "placement": "independent", "defaultLocalQueue": queue,
                "priorities": dict(PRIORITIES), **fields}

    _set_spec(platform, workloadProfiles=[
        profile("global", "jobqueue", applicability={}),
        profile("missing-queue", "nope"),
        profile("unknown-flavor", "lq-flavor"),
        profile("multikueue-check", "lq-mk"),
        profile("multikueue-target", "jobqueue", executionTarget="multiKueue"),
    ])
    platform.wait_for(lambda: _published(platform).get("observed") == 5, timeout=20)
    conditions = {p["name"]: {c["type"]: c for c in p["conditions"]} for p in _published(platform)["profiles"]}
    expected = {
        ("global", "LocalQueuesResolved"): ("LocalQueuesNotResolved", "profile has global namespace applicability "
                                            "but spec.queues.sharedLocalQueues declares no 'jobqueue' LocalQueue"),
        ("missing-queue", "LocalQueuesResolved"): ("LocalQueuesNotResolved", "aurora/nope"),
        ("unknown-flavor", "ClusterQueuesReady"): ("ClusterQueuesNotReady", "ClusterQueue 'cq-flavor' is not Active "
                                                   "(FlavorNotFound: Can't admit new workloads: references missing "
                                                   "ResourceFlavor(s): ['no-such-flavor'])"),
        ("multikueue-check", "ExecutionReady"): ("UnexpectedMultiKueueAdmissionCheck", "MultiKueue"),
        ("multikueue-target", "ExecutionReady"): ("PrerequisitesNotReady", "MultiKueueReady"),
    }
    for (name, ctype), (reason, text) in expected.items():
        got = conditions[name][ctype]
        assert (got["status"], got["reason"]) == ("False", reason), (name, got)
        assert text in got["message"], (name, got)
        assert conditions[name]["Ready"]["reason"] == "WorkloadProfileNotReady"
    assert _conditions(_cluster(platform))["WorkloadProfilesReady"]["message"] == \
        "5 of 5 workload profiles are not ready"
