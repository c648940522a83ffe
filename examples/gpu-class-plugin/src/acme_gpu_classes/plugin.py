"""Registers ACME's on-premises GPU node sizes as a rule table (the TauCluster ``spec.nodes.labelRules`` shape).

Imported by every ``tau`` command, so it stays tiny: the table is plain data.
"""

from __future__ import annotations

from typing import Any

from tau_core.hookspecs import hookimpl

RULES: list[dict[str, Any]] = [
    {"match": {"vmSizes": ["Acme_HGX_H100x8", "Acme_HGX_H100x8_IB"]},
     "labels": {"kueue.azure.com/gpu-series": "acme-hgx-h100", "tau.azure.com/gpu-class": "h100-80gb"}},
    {"match": {"vmSizes": ["Acme_L40S_x4"]},
     "labels": {"kueue.azure.com/gpu-series": "acme-l40s", "tau.azure.com/gpu-class": "a10-24gb"}},
]


@hookimpl
def tau_register_gpu_class_rules(register: Any) -> None:
    register("acme-gpu-classes", RULES, priority=10)
