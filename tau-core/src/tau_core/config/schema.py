"""The JSON Schema (draft 2020-12) generated from the field catalog."""

from __future__ import annotations

from typing import Any

from tau_core.config.catalog import FIELDS, REQUIRED, Field, children

SCHEMA_ID = "https://taugrid.dev/schemas/tau-run-config.schema.json"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _leaf(f: Field) -> dict[str, Any]:
    s: dict[str, Any]
    if f.type == "string":
        s = {"type": "string"}
        if f.values:
            if f.deprecated_values:
                s["anyOf"] = [
                    {"enum": list(f.values)},
                    {"enum": sorted(f.deprecated_values), "deprecated": True,
                     "description": "Deprecated spellings: "
                     + ", ".join(f"{k} -> {v}" for k, v in sorted(f.deprecated_values.items()))},
                ]
            else:
                s["enum"] = list(f.values)
        if f.pattern:
            s["pattern"] = f.pattern
    elif f.type == "integer":
        s = {"type": "integer"}
    elif f.type == "boolean":
        s = {"type": "boolean"}
    elif f.type == "string_or_integer":
        s = {"type": ["string", "integer"]}
    elif f.type == "quantity":
        from tau_core.config.catalog import QUANTITY_PATTERN

        s = {"type": ["string", "number"], "pattern": QUANTITY_PATTERN, "minimum": 0}
    elif f.type == "duration":
        from tau_core.config.catalog import DURATION_PATTERN

        s = {"type": "string", "pattern": DURATION_PATTERN}
    elif f.type == "string_list":
        items: dict[str, Any] = {"type": "string"}
        if f.item_values:
            items["enum"] = list(f.item_values)
        s = {"type": "array", "items": items}
    elif f.type == "string_map":
        s = {"type": "object", "additionalProperties": {"type": "string"}}
    elif f.type == "scalar_map":
        s = {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}
    elif f.type == "map":
        s = {"type": "object"}
    else:  # any
        s = {}
    if f.minimum is not None:
        s["minimum"] = f.minimum
    if f.maximum is not None:
        s["maximum"] = f.maximum
    return s


def _annotate(s: dict[str, Any], f: Field) -> dict[str, Any]:
    s["description"] = f.description
    s["x-tau-status"] = f.status
    s["x-tau-engines"] = list(f.engines)
    if f.default is not None:
        s["default"] = f.default
    if f.default_note:
        s["x-tau-default"] = f.default_note
    if f.alias_of:
        s["x-tau-alias-of"] = f.alias_of
    if f.case_insensitive:
        s["x-tau-case-insensitive"] = True
    if f.status == "deprecated":
        s["deprecated"] = True
    return s


def _object(prefix: str) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for f in children(prefix):
        props[f.leaf] = _node(f)
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    required = REQUIRED.get(prefix)
    if required:
        out["required"] = list(required)
    return out


def _node(f: Field) -> dict[str, Any]:
    if f.type == "object":
        s = _object(f.path)
    elif f.type == "object_list":
        s = {"type": "array", "items": _object(f.path + "[]")}
    else:
        s = _leaf(f)
    return _annotate(s, f)


def build_schema() -> dict[str, Any]:
    """The complete JSON Schema for a direct run config."""
    root = _object("")
    return {
        "$schema": DRAFT,
        "$id": SCHEMA_ID,
        "title": "Tau direct run config",
        "description": "The hand-written tau.yaml read by tau run. Generated from the installed field catalog; "
        "the installed CLI is the schema authority.",
        **root,
        "x-tau-field-count": len(FIELDS),
    }
