"""Each render-time validation of the umbrella, run by the real Helm with a bad value; and the values schema."""

from __future__ import annotations

import json

import pytest

from .conftest import CHARTS

CPU_GPU_LABEL = ["--set-string", "baselineQueue.flavor.nodeLabels.tau\\.azure\\.com/gpu-class=a100-80gb"]
GPU_FLAVOR = ("baselineQueue.gpu.flavors[0].name=g1", "baselineQueue.gpu.flavors[0].resources[0].name=nvidia.com/gpu",
              "baselineQueue.gpu.flavors[0].resources[0].nominalQuota=8")

CASES = {
    "gpu flavors empty": (["--set", "baselineQueue.gpu.flavors=null"],
                          "baselineQueue.gpu.enabled is true but baselineQueue.gpu.flavors is empty"),
    "gpu label on cpu flavor": (CPU_GPU_LABEL, "baselineQueue.flavor.nodeLabels sets tau.azure.com/gpu-class"),
    "series label on cpu flavor": (
        ["--set-string", "baselineQueue.flavor.nodeLabels.kueue\\.azure\\.com/gpu-series=nd-h200-v5"],
        "baselineQueue.flavor.nodeLabels sets kueue.azure.com/gpu-series"),
    "wildcard toleration on cpu flavor": (
        ["--set", "baselineQueue.flavor.tolerations[0].operator=Exists"],
        "baselineQueue.flavor.tolerations tolerates a GPU node taint (any key)"),
    "nvidia toleration on cpu flavor": (
        ["--set", "baselineQueue.flavor.tolerations[0].key=nvidia.com/gpu,baselineQueue.flavor.tolerations[0].operator=Exists"],
        "baselineQueue.flavor.tolerations tolerates a GPU node taint (nvidia.com/gpu)"),
    "sku toleration on cpu flavor": (
        ["--set", "baselineQueue.flavor.tolerations[0].key=sku,baselineQueue.flavor.tolerations[0].value=gpu"],
        "baselineQueue.flavor.tolerations tolerates a GPU node taint (sku)"),
    "cpu flavor tolerates a custom gpu taint": (
        ["--set", "baselineQueue.gpu.flavors[0].nodeTaints[0].key=pool,baselineQueue.gpu.flavors[0].nodeTaints[0].value=h200,"
                  "baselineQueue.gpu.flavors[0].nodeTaints[0].effect=NoSchedule,baselineQueue.gpu.flavors[0].name=h200,"
                  "baselineQueue.gpu.flavors[0].resources[0].name=nvidia.com/gpu,baselineQueue.gpu.flavors[0].resources[0].nominalQuota=8,"
                  "baselineQueue.flavor.tolerations[0].key=pool,baselineQueue.flavor.tolerations[0].value=h200"],
        "baselineQueue.flavor.tolerations tolerates a GPU node taint (pool)"),
    "gpu resource in cpu resources": (
        ["--set", "baselineQueue.resources[2].name=nvidia.com/gpu,baselineQueue.resources[2].nominalQuota=8,"
                  "baselineQueue.resources[0].name=cpu,baselineQueue.resources[0].nominalQuota=1,"
                  "baselineQueue.resources[1].name=memory,baselineQueue.resources[1].nominalQuota=1Gi"],
        "resource nvidia.com/gpu is listed in baselineQueue.resources and in baselineQueue.gpu.coveredResources"),
    "gpu flavor without taints": (
        ["--set", ",".join(GPU_FLAVOR)], "baselineQueue.gpu.flavors[g1].nodeTaints is empty"),
    "gpu flavor tolerates its own taint": (
        ["--set", ",".join(GPU_FLAVOR) + ",baselineQueue.gpu.flavors[0].nodeTaints[0].key=sku,"
                  "baselineQueue.gpu.flavors[0].nodeTaints[0].value=gpu,baselineQueue.gpu.flavors[0].nodeTaints[0].effect=NoSchedule,"
                  "baselineQueue.gpu.flavors[0].tolerations[0].key=sku,baselineQueue.gpu.flavors[0].tolerations[0].operator=Exists"],
        "baselineQueue.gpu.flavors[g1].tolerations tolerates its own nodeTaint sku=gpu"),
    "gpu flavor resources differ from covered": (
        ["--set", "baselineQueue.gpu.flavors[0].name=g1,baselineQueue.gpu.flavors[0].resources[0].name=amd.com/gpu,"
                  "baselineQueue.gpu.flavors[0].resources[0].nominalQuota=8,baselineQueue.gpu.flavors[0].nodeTaints[0].key=sku,"
                  "baselineQueue.gpu.flavors[0].nodeTaints[0].value=gpu,baselineQueue.gpu.flavors[0].nodeTaints[0].effect=NoSchedule"],
        "baselineQueue.gpu.flavors[g1].resources names (amd.com/gpu) differ from baselineQueue.gpu.coveredResources"),
    "gpu-monitoring namespace": (
        ["--set", "gpu-monitoring.namespace=monitoring"],
        "gpu-monitoring.namespace (monitoring) is not supported"),
    "lifecycle recorder without namespace": (
        ["--set", "taugrid-core.lifecycleRecorder.enabled=true"],
        "taugrid-core.lifecycleRecorder.targetNamespace is required"),
    "controller without image": (
        ["--set", "tau-core-controller.image.tag="], "set image.digest or image.tag"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_values_fail_rendering_with_our_message(helm, umbrella, case):
    args, message = CASES[case]
    result = helm("template", "taugrid", str(umbrella), "-n", "tau-system", *args, check=False)
    assert result.returncode == 1, result.stdout[-500:]
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize(("args", "field"), [
    (["--set-string", "baselineQueue.enabled=yes"], "/baselineQueue/enabled"),
    (["--set", "baselineQueue.name=Job_Queue"], "/baselineQueue/name"),
    (["--set", "components.kueue.enabeld=true"], "enabeld"),
    (["--set", "baselineQueue.gpu.flavors[0].nodeTaints[0].effect=Sometimes"], "effect"),
    (["--set-string", "taugrid-core.portal.enabled=on"], "/portal/enabled"),
    (["--set", "tau-core-controller.tauCluster.managementMode=Auto"], "managementMode"),
])
def test_values_schema_rejects_mistyped_values(helm, umbrella, args, field):
    result = helm("template", "taugrid", str(umbrella), "-n", "tau-system", *args, check=False)
    assert result.returncode == 1
    assert "values don't meet the specifications of the schema" in result.stderr
    assert field in result.stderr


@pytest.mark.parametrize("chart", ["taugrid", "tau-core-controller", "taugrid-core", "gpu-monitoring"])
def test_every_chart_has_a_values_schema(chart):
    schema = json.loads((CHARTS / chart / "values.schema.json").read_text())
    assert schema["type"] == "object" and schema["properties"]


def test_notes_name_the_next_steps(helm, umbrella):
    result = helm("install", "taugrid", str(umbrella), "-n", "research-system", "--dry-run=client")
    assert "tau workspace create research --system-namespace research-system" in result.stdout
    assert "--queue jobqueue" in result.stdout
    assert "tau workspace init-repo" in result.stdout and "tau run smoke" in result.stdout
