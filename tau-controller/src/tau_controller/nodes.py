"""TauCluster step 1: node-label rules (validation, cross-rule conflicts, Observe and Reconcile)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tau_controller.api import NODE, transient
from tau_controller.conditions import FALSE, TRUE, UNKNOWN, cond
from tau_controller.context import Ctx, log
from tau_core import keys
from tau_core.gpu_catalog import BUILTIN_TABLE, NodeLabelRule, find_conflicts, plugin_rules
from tau_core.kube import KubeApiError

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
RESERVED_PREFIXES = ("kubernetes.io", "node.kubernetes.io")


@dataclass
class NodeOutcome:
    conditions: list[dict[str, Any]]
    observed: int = 0
    ready: int = 0
    drifted: int = 0
    failed: bool = False
    drift: list[str] = field(default_factory=list)
    #: node listing or patching failed: after the status is written, the reconcile is retried with backoff
    error: str | None = None


def label_key_error(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if not name or len(name) > 63 or not _NAME.match(name) or (prefix and (len(prefix) > 253
                                                                            or not _PREFIX.match(prefix))):
        return f"label key {key!r} is not a qualified name"
    if prefix in RESERVED_PREFIXES:  # exactly these two (e.g. topology.kubernetes.io/zone may be managed)
        return f"label key {key!r}: reserved Kubernetes label prefixes cannot be managed by TauCluster"
    return None


def label_value_error(key: str, value: str) -> str | None:
    if value and (len(value) > 63 or not _NAME.match(value)):
        return f"label {key}={value!r}: not a valid label value"
    return None


def declared_rules(spec: Mapping[str, Any], host: Any = None) -> tuple[list[NodeLabelRule], list[str]]:
    """``spec.nodes.labelRules`` plus operator plugin tables (not the built-in one: the chart renders it into
    the spec), and the validation errors."""
    rules: list[NodeLabelRule] = []
    errors: list[str] = []
    for i, item in enumerate((spec.get("nodes") or {}).get("labelRules") or []):
        where = f"spec.nodes.labelRules[{i}]"
        labels = item.get("labels") if isinstance(item, Mapping) else None
        if not labels:
            errors.append(f"{where}: labels must declare at least one key")
            continue
        for key, value in labels.items():
            problem = label_key_error(str(key)) or label_value_error(str(key), str(value))
            if problem:
                errors.append(f"{where}: {problem}")
        rules.append(NodeLabelRule.from_spec(item, where))
    try:
        rules += [r for r in plugin_rules(host) if r.source != BUILTIN_TABLE]
    except Exception as exc:  # a broken plugin must not stop node labelling of the declared rules
        log.warning("GPU-class rule plugins could not be loaded: %s", exc)
    return rules, errors


def _no_rules() -> NodeOutcome:
    return NodeOutcome([cond("NodesReady", TRUE, "NoNodeLabelRules", "no node label rules are configured"),
                        cond("DriftDetected", FALSE, "NoNodeLabelDrift", "no node label rules are configured"),
                        cond("OwnershipConflict", FALSE, "NoConflictObserved", "no ownership conflict observed")])


async def reconcile_nodes(ctx: Ctx, spec: Mapping[str, Any], reconcile: bool) -> NodeOutcome:
    rules, errors = declared_rules(spec)
    if errors:
        message = "; ".join(errors)
        return NodeOutcome([cond("NodesReady", FALSE, "InvalidNodeLabelRules", message),
                            cond("DriftDetected", UNKNOWN, "InvalidNodeLabelRules", message),
                            cond("OwnershipConflict", FALSE, "NoConflictObserved", "no ownership conflict observed")],
                           failed=True)
    if not rules:
        return _no_rules()
    conflicts = find_conflicts(rules)
    if conflicts:
        message = "; ".join(c.message() for c in conflicts)
        return NodeOutcome([cond("NodesReady", FALSE, "ConflictingNodeLabelRules", message),
                            cond("DriftDetected", TRUE, "NodeLabelRuleConflict", message),
                            cond("OwnershipConflict", TRUE, "ConflictingNodeLabelRules", message)], failed=True)
    selector = (spec.get("nodes") or {}).get("selector") or {}
    try:
        nodes = await ctx.client.list(NODE, labels=selector, live=True)
    except KubeApiError as exc:
        if transient(exc):
            raise
        return NodeOutcome([cond("NodesReady", FALSE, "NodeDiscoveryFailed", str(exc)),
                            cond("DriftDetected", UNKNOWN, "NodeDiscoveryFailed", str(exc)),
                            cond("OwnershipConflict", FALSE, "NoConflictObserved", "no ownership conflict observed")],
                           failed=True, error=f"cannot list nodes: {exc}")
    out = NodeOutcome([])
    errors = []
    for node in nodes:
        meta = node["metadata"]
        have = meta.get("labels") or {}
        matching = [r for r in rules if r.matches(str(have.get(keys.INSTANCE_TYPE, "")))]
        if not matching:
            continue  # unmatched nodes are ignored
        out.observed += 1
        desired: dict[str, str] = {}
        for rule in matching:
            desired.update(rule.labels)
        missing = {k: v for k, v in desired.items() if have.get(k) != v}
        if not missing:
            out.ready += 1
        elif reconcile:
            try:
                await ctx.client.merge_patch(NODE, None, meta["name"], {"metadata": {"labels": missing}})
                out.ready += 1
            except KubeApiError as exc:
                if transient(exc):
                    raise
                out.drifted += 1  # a node whose patch failed still lacks its labels
                errors.append(f"node {meta['name']}: {exc}")
        else:
            out.drifted += 1
            out.drift.append(meta["name"])
    out.conditions = _node_conditions(out, errors)
    return out


def _node_conditions(out: NodeOutcome, errors: list[str]) -> list[dict[str, Any]]:
    ok = cond("OwnershipConflict", FALSE, "NoConflictObserved", "no ownership conflict observed")
    if errors:
        out.failed = True
        msg = out.error = "; ".join(errors)
        return [cond("NodesReady", FALSE, "NodeLabelReconcileFailed", msg),
                cond("DriftDetected", TRUE, "NodeLabelDrift", msg), ok]
    if out.observed == 0:
        msg = ("no nodes currently match the configured VM-size rules; CPU-only clusters and scaled-to-zero GPU "
               "pools stay ready")
        return [cond("NodesReady", TRUE, "NoMatchingNodes", msg), cond("DriftDetected", FALSE, "NoNodeLabelDrift",
                                                                       msg), ok]
    if out.drifted:
        msg = f"{out.drifted} of {out.observed} matching nodes need topology label reconciliation"
        return [cond("NodesReady", FALSE, "NodeLabelDrift", msg), cond("DriftDetected", TRUE, "NodeLabelDrift", msg),
                ok]
    msg = f"{out.ready} matching nodes carry their declared labels"
    return [cond("NodesReady", TRUE, "NodeLabelsReady", msg), cond("DriftDetected", FALSE, "NoNodeLabelDrift", msg),
            ok]
