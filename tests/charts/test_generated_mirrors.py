"""The generated parts stay in step with their sources: the kustomize mirror and the VM-size catalog block."""

from __future__ import annotations

import runpy
import subprocess

import pytest
import yaml

from .conftest import CHARTS, ROOT

TOOLS = ROOT / "deploy" / "tools"


def test_kustomize_mirror_matches_the_controller_chart(helm, controller_chart, kubectl_bin):
    tool = runpy.run_path(str(TOOLS / "sync_kustomize.py"))
    rendered = helm("template", "taugrid", str(controller_chart), "--namespace", "tau-system", "--include-crds").stdout
    from_helm = sorted((tool["normalize"](d) for d in yaml.safe_load_all(rendered) if d),
                       key=lambda o: (o["kind"], o["metadata"]["name"]))
    built = subprocess.run([str(kubectl_bin), "kustomize", str(ROOT / "deploy" / "kustomize" / "tau-core-controller")],
                           capture_output=True, text=True, check=True).stdout
    from_kustomize = sorted((d for d in yaml.safe_load_all(built) if d),
                            key=lambda o: (o["kind"], o["metadata"]["name"]))
    assert len(from_kustomize) == 16
    assert from_kustomize == from_helm, "run: python deploy/tools/sync_kustomize.py"


@pytest.fixture
def gen():
    return runpy.run_path(str(TOOLS / "gen_node_label_rules.py"))


def test_catalog_block_round_trips_through_the_generator(gen):
    """The values.yaml block is exactly what the generator writes for the rules it holds."""
    text = (CHARTS / "tau-core-controller" / "values.yaml").read_text()
    rules = yaml.safe_load(text)["tauCluster"]["nodeLabelRules"]
    assert len(rules) == 14
    assert gen["replace_block"](text, gen["render_block"](rules)) == text


def test_generator_rewrites_a_stale_block(gen, tmp_path):
    text = (CHARTS / "tau-core-controller" / "values.yaml").read_text()
    new = [{"match": {"vmSizes": ["Standard_X"]}, "labels": {"tau.azure.com/gpu-class": "a10-4gb"}}]
    rewritten = gen["replace_block"](text, gen["render_block"](new))
    assert yaml.safe_load(rewritten)["tauCluster"]["nodeLabelRules"] == new
    assert yaml.safe_load(rewritten)["tauCluster"]["workloadProfiles"] == yaml.safe_load(text)["tauCluster"][
        "workloadProfiles"]
    with pytest.raises(ValueError, match="no labels"):
        gen["render_block"]([{"match": {"vmSizes": ["x"]}, "labels": {}}])


def test_chart_catalog_is_the_tau_core_catalog(gen):
    """tau_core.gpu_catalog is the one catalog: the chart's default nodeLabelRules are generated from it."""
    from tau_core import gpu_catalog as catalog

    text = (CHARTS / "tau-core-controller" / "values.yaml").read_text()
    expected = gen["replace_block"](text, gen["render_block"](catalog.node_label_rules()))
    assert expected == text, "run: python deploy/tools/gen_node_label_rules.py && python deploy/tools/sync_kustomize.py"
