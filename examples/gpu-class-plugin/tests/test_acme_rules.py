"""The plugin, installed with only tau-core: discovered through its entry point, used by the CLI's normaliser."""

from __future__ import annotations

from tau_core.config.loader import parse_yaml
from tau_core.config.validate import validate_document
from tau_core.gpu_catalog import builtin_rules, find_conflicts, gpu_class_for, plugin_rules
from tau_core.plugins import Host


def _host() -> Host:
    return Host.create(env={})


def test_entry_point_registers_the_table_next_to_the_builtin_catalog():
    sources = {rule.source for rule in plugin_rules(_host())}
    assert sources == {"acme-gpu-classes", "builtin"}
    assert gpu_class_for("acme_hgx_h100x8_ib", _host()) == "h100-80gb"
    assert gpu_class_for("Standard_ND96isr_H200_v5", _host()) == "h200-141gb"


def test_table_does_not_conflict_with_the_builtin_catalog():
    assert find_conflicts(plugin_rules(_host())) == []
    assert len(plugin_rules(_host())) == len(builtin_rules()) + 2


def test_cli_normalises_a_plugin_vm_size():
    doc = parse_yaml("name: t\nengine: job\nentrypoint: train.py\ncompute: {gpus: 1}\n"
                     "runtime: {image: python:3.12}\npolicy: {gpu_class: Acme_L40S_x4}\n", "tau.yaml")
    assert validate_document(doc, check_files=False).normalized["policy"]["gpu_class"] == "a10-24gb"
