"""The values reference of ``tau cluster explain-values``, generated from the umbrella chart's values schema.

    python -m tau_cluster.explain deploy/charts/taugrid/values.schema.json            # print
    python -m tau_cluster.explain deploy/charts/taugrid/values.schema.json --write    # refresh the packaged copy

The installed CLI has no chart checkout, so the Markdown ships as ``values_reference.md`` inside this
package. It is never edited by hand: a test regenerates it from the schema and fails when it is stale.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

PACKAGED = "values_reference.md"


def _default(node: dict[str, Any]) -> str:
    if "x-default-text" in node:
        return str(node["x-default-text"])
    if "default" not in node:
        return "-"
    value = node["default"]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value or '""'
    return json.dumps(value, separators=(", ", ": "))


def _type(node: dict[str, Any]) -> str:
    kind = node.get("type", "any")
    return "/".join(kind) if isinstance(kind, list) else str(kind)


def _rows(node: dict[str, Any], prefix: str) -> Iterator[tuple[str, str, str, str]]:
    for key, child in (node.get("properties") or {}).items():
        path = f"{prefix}.{key}" if prefix else key
        leaf = child.get("type") != "object" or "default" in child or not child.get("properties")
        if "description" in child and leaf:
            yield path, _type(child), _default(child), str(child["description"])
        if child.get("type") == "object" and child.get("properties") and "default" not in child:
            yield from _rows(child, path)


def render_markdown(schema: dict[str, Any]) -> str:
    lines = [f"# {schema.get('title', 'Values')}", "", str(schema.get("description", "")).strip(), ""]
    for key, section in (schema.get("properties") or {}).items():
        if key == "global":
            continue
        lines += [f"## `{key}`", ""]
        if section.get("description"):
            lines += [str(section["description"]), ""]
        rows = list(_rows(section, key))
        if rows:
            lines += ["| Key | Type | Default | Description |", "|---|---|---|---|"]
            lines += [f"| `{p}` | {t} | `{d}` | {text} |" for p, t, d, text in rows]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def packaged_reference() -> str:
    return resources.files("tau_cluster").joinpath(PACKAGED).read_text(encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("schema", type=Path)
    parser.add_argument("--write", action="store_true", help=f"rewrite the packaged {PACKAGED}")
    args = parser.parse_args(argv)
    text = render_markdown(json.loads(args.schema.read_text()))
    if args.write:
        Path(__file__).with_name(PACKAGED).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
