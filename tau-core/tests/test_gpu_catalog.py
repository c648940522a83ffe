"""The one GPU-class catalog: data, the TauCluster rule shape, conflicts and the CLI's gpu_class normalisation."""

from __future__ import annotations

from pathlib import Path

import fastjsonschema
import yaml

from tau_core import keys
from tau_core.gpu_catalog import NodeLabelRule, builtin_rules, find_conflicts, gpu_class_for, node_label_rules

REPO = Path(__file__).resolve().parents[2]


def _label_rules_schema() -> dict:
    crd = yaml.safe_load((REPO / "deploy" / "crds" / "tau.azure.com_clusters.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec["properties"]["nodes"]["properties"]["labelRules"]


def test_node_label_rules_is_valid_taucluster_spec_and_covers_the_reference_catalog():
    rules = node_label_rules()
    fastjsonschema.compile(_label_rules_schema())(rules)
    by_size = {size: rule["labels"] for rule in rules for size in rule["match"]["vmSizes"]}
    assert len(by_size) == 20
    assert by_size["Standard_ND96asr_v4"] == {keys.KUEUE_GPU_SERIES: "nd-a100-v4", keys.GPU_CLASS: "a100-40gb"}
    assert by_size["Standard_NV72ads_A10_v5"][keys.GPU_CLASS] == "a10-24gb"
    assert by_size["Standard_ND128isrG5_GB300_v6"] == {keys.KUEUE_GPU_SERIES: "nd-gb300-v6",
                                                        keys.GPU_CLASS: "gb300-288gb"}
    assert node_label_rules() is not rules and node_label_rules() == rules  # fresh copies each call


def test_builtin_catalog_has_no_conflicts_and_classes_are_canonical():
    from tau_core.config.catalog import GPU_CLASSES

    assert find_conflicts(builtin_rules()) == []
    assert {r.labels[keys.GPU_CLASS] for r in builtin_rules()} <= set(GPU_CLASSES)


def test_conflicts_need_overlap_and_a_different_value():
    a = NodeLabelRule(("X",), {"k": "1"}, "a")
    assert find_conflicts([a, NodeLabelRule(("Y",), {"k": "2"}, "b")]) == []
    assert find_conflicts([a, NodeLabelRule(("X",), {"k": "1"}, "b")]) == []
    wildcard = find_conflicts([a, NodeLabelRule((), {"k": "2"}, "values")])
    assert len(wildcard) == 1 and wildcard[0].key == "k" and "'1' vs '2'" in wildcard[0].message()


def test_gpu_class_for_uses_the_builtin_table_case_insensitively():
    assert gpu_class_for("standard_nd96isr_h100_v5") == "h100-80gb"
    assert gpu_class_for("Standard_D16s_v5") is None


def test_cli_normalises_a_vm_size_typed_as_gpu_class():
    from tau_core.config.loader import parse_yaml
    from tau_core.config.validate import validate_document

    doc = parse_yaml("name: smoke\nengine: job\nentrypoint: train.py\ncompute: {gpus: 1}\n"
                     "runtime: {image: python:3.12}\npolicy: {gpu_class: Standard_ND96isr_H200_v5, lane: large-memory}\n", "tau.yaml")
    cfg = validate_document(doc, check_files=False)
    assert cfg.normalized["policy"]["gpu_class"] == "h200-141gb"
