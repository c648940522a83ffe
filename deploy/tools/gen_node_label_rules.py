"""Write the controller chart's default ``tauCluster.nodeLabelRules`` from the catalog in tau_core.

    python deploy/tools/gen_node_label_rules.py            # rewrite the generated block in values.yaml
    python deploy/tools/gen_node_label_rules.py --check    # exit 1 when values.yaml is stale

The VM-size catalog has one source: ``tau_core.gpu_catalog.node_label_rules()`` (a list of
``{"match": {"vmSizes": [...]}, "labels": {...}}``). The block between the two marker lines in
``deploy/charts/tau-core-controller/values.yaml`` is this script's output and is never edited by hand.
The kustomize mirror is refreshed afterwards with ``deploy/tools/sync_kustomize.py``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

VALUES = Path(__file__).resolve().parents[1] / "charts" / "tau-core-controller" / "values.yaml"
BEGIN = "  # BEGIN generated: nodeLabelRules (deploy/tools/gen_node_label_rules.py; do not edit)"
END = "  # END generated: nodeLabelRules"
SOURCE = "tau_core.gpu_catalog:node_label_rules"


def render_block(rules: list[dict[str, Any]]) -> str:
    """The YAML lines for ``nodeLabelRules`` (flow-style JSON per rule, which is valid YAML), markers included."""
    lines = [BEGIN, "  nodeLabelRules:"]
    for rule in rules:
        vm_sizes = list((rule.get("match") or {}).get("vmSizes") or [])
        labels = dict(sorted((rule.get("labels") or {}).items()))
        if not labels:
            raise ValueError(f"node label rule {rule!r} has no labels")
        entry = {"match": {"vmSizes": vm_sizes}, "labels": labels}
        lines.append("    - " + json.dumps(entry, separators=(", ", ": ")))
    lines.append(END)
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{VALUES}: the generated nodeLabelRules markers are missing")
    return text[:start] + block + text[end + len(END):]


def load_rules(source: str = SOURCE) -> list[dict[str, Any]]:
    module_name, _, attr = source.partition(":")
    return list(getattr(importlib.import_module(module_name), attr)())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when values.yaml differs from the catalog")
    parser.add_argument("--source", default=SOURCE, help="module:function returning the rules")
    args = parser.parse_args(argv)
    current = VALUES.read_text()
    wanted = replace_block(current, render_block(load_rules(args.source)))
    if args.check:
        if wanted != current:
            print(f"{VALUES} is stale: run python deploy/tools/gen_node_label_rules.py", file=sys.stderr)
            return 1
        return 0
    VALUES.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
