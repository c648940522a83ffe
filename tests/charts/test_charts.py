"""The TauGrid charts rendered by the real Helm 4: lint, schemas of every object, baseline queue shape."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml

from tau_testing.k8s_schema import object_errors

from .conftest import CHARTS, ROOT

EXAMPLES = [*sorted((CHARTS / "taugrid" / "examples").glob("*.yaml")),
            ROOT / "examples" / "kind-smoke" / "cluster-values.yaml"]
TAU_CRDS = ROOT / "deploy" / "crds"


def schema_problems(objects):
    problems = []
    for obj in objects:
        crds = TAU_CRDS if obj["apiVersion"].startswith("tau.azure.com/") else None
        problems += object_errors(obj, crds=crds)
    return problems


def by_kind(objects, kind):
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


@pytest.mark.parametrize("name", ["tau-core-controller", "taugrid-core", "gpu-monitoring"])
def test_each_local_chart_lints_strictly(helm, controller_chart, name):
    helm("lint", "--strict", str(CHARTS / name))


def test_umbrella_lints_with_every_example(helm, umbrella):
    helm("lint", "--strict", str(umbrella))
    for example in EXAMPLES:
        helm("lint", "--strict", str(umbrella), "-f", str(example))


@pytest.mark.parametrize("example", [None, *EXAMPLES], ids=["defaults", *[e.stem for e in EXAMPLES]])
def test_every_rendered_object_matches_kubernetes_1_30_and_the_crds(render, example):
    objects = render(*(["-f", str(example)] if example else []))
    assert objects
    assert schema_problems(objects) == []


def test_default_render_has_the_documented_objects(render):
    objects = render()
    kinds = Counter(o["kind"] for o in objects)
    assert kinds["CustomResourceDefinition"] == 3
    assert set(by_kind(objects, "Deployment")) == {
        "kueue-controller-manager", "kuberay-operator", "tau-core-controller", "tau-portal"}
    assert set(by_kind(objects, "PriorityClass")) == {"taugrid-default", "taugrid-priority"}
    assert set(by_kind(objects, "WorkloadPriorityClass")) == {"taugrid-default", "taugrid-priority"}
    assert {"tau-researcher-v1", "tau-clusterqueue-reader-v1", "tau-core-controller"} <= set(
        by_kind(objects, "ClusterRole"))
    assert "tau-quota-approval-guard" in by_kind(objects, "ValidatingAdmissionPolicy")
    assert "LocalQueue" not in kinds  # the controller creates one per workspace
    for obj in objects:
        if obj["kind"] != "CustomResourceDefinition":
            namespace = obj["metadata"].get("namespace")
            assert namespace in (None, "tau-system"), obj["metadata"]


def test_baseline_queue_shape(render):
    objects = render()
    cq = by_kind(objects, "ClusterQueue")["jobqueue"]
    assert cq["metadata"]["labels"]["app.kubernetes.io/part-of"] == "taugrid"
    assert cq["metadata"]["labels"]["app.kubernetes.io/instance"] == "taugrid"
    spec = cq["spec"]
    assert spec["queueingStrategy"] == "BestEffortFIFO"
    assert spec["preemption"] == {"withinClusterQueue": "LowerPriority"}
    assert spec["namespaceSelector"] == {"matchExpressions": [{"key": "tau.azure.com/workspace", "operator": "Exists"}]}
    [group] = spec["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    cpu, gpu = group["flavors"]
    assert cpu == {"name": "taugrid-default-cpu", "resources": [
        {"name": "cpu", "nominalQuota": "100000"}, {"name": "memory", "nominalQuota": "100Ti"},
        {"name": "nvidia.com/gpu", "nominalQuota": "0"}]}
    assert gpu["name"] == "taugrid-default-gpu"
    assert gpu["resources"][-1] == {"name": "nvidia.com/gpu", "nominalQuota": "1000"}
    flavors = by_kind(objects, "ResourceFlavor")
    assert "topologyName" not in flavors["taugrid-default-cpu"]["spec"]
    gpu_flavor = flavors["taugrid-default-gpu"]
    assert gpu_flavor["spec"]["topologyName"] == "default-node-topology"
    assert gpu_flavor["spec"]["nodeTaints"] == [{"key": "sku", "value": "gpu", "effect": "NoSchedule"}]
    assert gpu_flavor["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"}
    assert by_kind(objects, "Topology")["default-node-topology"]["spec"]["levels"] == [
        {"nodeLabel": "kubernetes.io/hostname"}]
    pcs = by_kind(objects, "PriorityClass")
    assert (pcs["taugrid-default"]["value"], pcs["taugrid-priority"]["value"]) == (1000, 1200)
    assert all(p["globalDefault"] is False and p["preemptionPolicy"] == "PreemptLowerPriority" for p in pcs.values())


def test_custom_required_level_sits_above_the_hostname_leaf(render):
    objects = render("--set", "baselineQueue.topology.requiredLevel=topology.kubernetes.io/zone")
    assert by_kind(objects, "Topology")["default-node-topology"]["spec"]["levels"] == [
        {"nodeLabel": "topology.kubernetes.io/zone"}, {"nodeLabel": "kubernetes.io/hostname"}]


def test_cpu_only_example_renders_no_gpu_parts(render):
    objects = render("-f", str(CHARTS / "taugrid" / "examples" / "cpu-only.yaml"))
    assert set(by_kind(objects, "ResourceFlavor")) == {"taugrid-default-cpu"}
    assert by_kind(objects, "ClusterQueue")["jobqueue"]["spec"]["resourceGroups"][0]["coveredResources"] == [
        "cpu", "memory"]
    assert "Topology" not in Counter(o["kind"] for o in objects)
    assert not [o for o in objects if o["kind"] == "DaemonSet"]


def test_gpu_monitoring_follows_the_controller_toggle_until_set(render):
    def daemonsets(*args):
        return [o for o in render(*args) if o["kind"] == "DaemonSet" and "gpu-monitoring" in o["metadata"]["name"]]
    assert daemonsets()
    assert not daemonsets("--set", "components.tauCoreController.enabled=false")
    assert daemonsets("--set", "components.tauCoreController.enabled=false", "--set",
                      "components.gpuMonitoring.enabled=true")


def test_disabling_the_baseline_queue_removes_only_queue_policy(render):
    objects = render("--set", "baselineQueue.enabled=false")
    kinds = Counter(o["kind"] for o in objects)
    for kind in ("ClusterQueue", "ResourceFlavor", "Topology", "PriorityClass", "WorkloadPriorityClass"):
        assert kinds[kind] == 0
    assert kinds["TauCluster"] == 1 and kinds["ValidatingAdmissionPolicy"] == 1


def test_controller_deployment_follows_the_security_contract(render):
    deployment = by_kind(render(), "Deployment")["tau-core-controller"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "tau-core-controller"
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    [container] = pod["containers"]
    version = (ROOT / "VERSION").read_text().strip()
    assert container["image"] == f"mcr.microsoft.com/aks/ai-runtime/tau-core-controller:{version}"
    assert "--health-probe-bind-address=:8081" in container["args"]
    assert "--metrics-bind-address=:8080" in container["args"]
    assert "--system-namespace=tau-system" in container["args"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"] == {"requests": {"cpu": "50m", "memory": "64Mi"},
                                      "limits": {"cpu": "250m", "memory": "256Mi"}}
    digest = "sha256:" + "a" * 64
    pinned = by_kind(render("--set", f"tau-core-controller.image.digest={digest}"), "Deployment")
    assert pinned["tau-core-controller"]["spec"]["template"]["spec"]["containers"][0]["image"].endswith("@" + digest)


def test_taucluster_singleton_carries_catalog_and_profiles(render):
    example = CHARTS / "taugrid" / "examples" / "gpu-h200.yaml"
    [tc] = [o for o in render("-f", str(example)) if o["kind"] == "TauCluster"]
    assert tc["metadata"]["name"] == "cluster"
    spec = tc["spec"]
    assert spec["managementMode"] == "Reconcile" and spec["deletionPolicy"] == "Retain"
    values = yaml.safe_load((CHARTS / "tau-core-controller" / "values.yaml").read_text())
    catalog = values["tauCluster"]["nodeLabelRules"]
    assert spec["nodes"]["labelRules"][:len(catalog)] == catalog
    assert spec["nodes"]["labelRules"][-1]["match"]["vmSizes"] == ["Standard_ND96isr_H200_v5_test"]
    names = [p["name"] for p in spec["workloadProfiles"]]
    assert "azure.research.training.l" in names and "azure.research.large-memory.2node" in names
    assert "azure.research.serving.gpu" in names and "azure.research.serving.2node" in names
    assert len(names) == len(set(names)) == 17


def test_portal_is_on_in_the_umbrella_and_off_standalone(render, helm):
    portal = by_kind(render(), "Deployment")["tau-portal"]
    assert portal["metadata"]["labels"]["app.kubernetes.io/component"] == "portal"
    assert by_kind(render(), "Service")["tau-portal"]["spec"]["type"] == "ClusterIP"
    standalone = helm("template", "x", str(CHARTS / "taugrid-core")).stdout
    assert "tau-portal" not in standalone


def test_quota_guard_is_fail_closed(render):
    objects = render()
    vap = by_kind(objects, "ValidatingAdmissionPolicy")["tau-quota-approval-guard"]
    assert vap["spec"]["failurePolicy"] == "Fail"
    assert vap["spec"]["matchConstraints"]["resourceRules"] == [{
        "apiGroups": ["tau.azure.com"], "apiVersions": ["v1alpha1"], "operations": ["CREATE", "UPDATE"],
        "resources": ["quotarequests"]}]
    binding = by_kind(objects, "ValidatingAdmissionPolicyBinding")["tau-quota-approval-guard"]
    assert binding["spec"]["validationActions"] == ["Deny"]


def test_chart_crds_are_the_deploy_crds(render, controller_chart):
    """deploy/crds is the one source; the chart's crds/ is a build copy, byte for byte."""
    sources = sorted(TAU_CRDS.glob("tau.azure.com_*.yaml"))
    copies = sorted((controller_chart / "crds").glob("*.yaml"))
    assert [p.name for p in copies] == [p.name for p in sources]
    assert all(c.read_bytes() == s.read_bytes() for c, s in zip(copies, sources, strict=True))
    rendered = {o["metadata"]["name"]: o for o in render() if o["kind"] == "CustomResourceDefinition"}
    expected = {d["metadata"]["name"]: d for p in sources for d in yaml.safe_load_all(p.read_text()) if d}
    assert rendered == expected


def test_the_chart_crd_copy_is_not_committed():
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "deploy/charts/tau-core-controller/crds/" in ignored




def test_gpu_monitoring_covers_the_documented_conditions_and_skus(helm):
    def objects(*args):
        out = helm("template", "taugrid", str(CHARTS / "gpu-monitoring"), "-n", "tau-system", *args).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    rendered = objects()
    assert schema_problems(rendered) == []
    config = json.loads(by_kind(rendered, "ConfigMap")["gpu-monitoring-collector"]["data"]["collector.json"])
    assert len(config["conditions"]) == 20 and "XIDError79" in config["conditions"]
    assert config["taint"] == "tau.azure.com/gpu-unhealthy"
    daemonsets = by_kind(rendered, "DaemonSet")
    assert {"gpu-monitoring-h200", "gpu-monitoring-node-exporter", "gpu-monitoring-collector"} <= set(daemonsets)
    assert all(d["metadata"]["namespace"] == "tau-system" for d in daemonsets.values())
    only = by_kind(objects("--set", "enabledGpuSkus={h200}"), "DaemonSet")
    assert set(only) == {"gpu-monitoring-h200", "gpu-monitoring-node-exporter", "gpu-monitoring-collector"}
    affinity = only["gpu-monitoring-collector"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["Standard_ND96isr_H200_v5"]
