"""The schema, the Markdown reference and the validator come from one catalog and agree."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tau_core.config.catalog import FIELDS, REQUIRED, Field
from tau_core.config.explain import explain_markdown
from tau_core.config.loader import parse_yaml
from tau_core.config.schema import build_schema
from tau_core.config.structure import Walker, schema_accepts

LEAVES = [f for f in FIELDS if not f.is_container]


def sample(f: Field) -> Any:
    if f.type == "string":
        if f.values:
            return f.values[0]
        return "1g.10gb" if f.pattern else "x"
    return {
        "integer": f.minimum if f.minimum is not None else 1, "boolean": True, "quantity": "1",
        "duration": "1s", "string_list": [f.item_values[0]] if f.item_values else ["x"],
        "string_map": {"A": "b"}, "scalar_map": {"A": "b"}, "map": {}, "string_or_integer": "0", "any": 1,
    }[f.type]


def document_with(f: Field, value: Any) -> dict[str, Any]:
    """A config that sets ``f`` (and the required siblings of its object)."""
    doc: dict[str, Any] = {}
    parts = f.path.split(".")
    node = doc
    prefix = ""
    for part in parts[:-1]:
        is_list = part.endswith("[]")
        key = part.removesuffix("[]")
        prefix = f"{prefix}.{key}" if prefix else key
        if is_list:
            item: dict[str, Any] = {}
            node[key] = [item]
            node = item
            prefix += "[]"
        else:
            node = node.setdefault(key, {})
        for req in REQUIRED.get(prefix, ()):
            sibling = next(x for x in FIELDS if x.path == f"{prefix}.{req}")
            node.setdefault(req, sample(sibling))
    node[parts[-1]] = value
    return doc


def _structural_issues(data: dict[str, Any]) -> list[Any]:
    doc = parse_yaml(json.dumps(data), "agreement.yaml")
    return Walker(doc).walk(doc.data)


def _schema_paths(node: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, sub in node.get("properties", {}).items():
        path = f"{prefix}.{key}" if prefix else key
        out.add(path)
        out |= _schema_paths(sub, path)
        if sub.get("type") == "array" and isinstance(sub.get("items"), dict):
            out |= _schema_paths(sub["items"], path + "[]")
    return out


def test_every_field_is_in_the_schema_and_the_reference() -> None:
    schema_paths = _schema_paths(build_schema())
    markdown = explain_markdown()
    for f in FIELDS:
        assert f.path in schema_paths, f.path
        assert f"`{f.path}`" in markdown, f.path
    assert len(schema_paths) == len(FIELDS)


def test_schema_is_closed_everywhere() -> None:
    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                assert node.get("additionalProperties") is False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    schema = build_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    walk(schema)


@pytest.mark.parametrize("field", LEAVES, ids=[f.path for f in LEAVES])
def test_every_documented_field_is_accepted(field: Field) -> None:
    data = document_with(field, sample(field))
    assert schema_accepts(data), data
    assert _structural_issues(data) == []


@pytest.mark.parametrize("field", [f for f in FIELDS if f.type in ("object",)], ids=lambda f: f.path)
def test_unknown_fields_are_rejected_everywhere(field: Field) -> None:
    data = document_with(Field(field.path + ".definitely_unknown", "string", ""), "x")
    assert not schema_accepts(data)
    issues = _structural_issues(data)
    assert issues and issues[0].path.endswith("definitely_unknown")
    assert "unknown key" in issues[0].message


def test_unknown_top_level_field_gets_a_suggestion() -> None:
    issues = _structural_issues({"enginee": "job"})
    assert issues[0].hint == "did you mean 'engine'?"


def test_documented_values_are_the_schema_enums() -> None:
    schema = build_schema()
    gpu = schema["properties"]["policy"]["properties"]["gpu_class"]
    assert gpu["anyOf"][0]["enum"][0] == "any"
    assert gpu["anyOf"][1]["deprecated"] is True
    assert gpu["x-tau-status"] == "ga"
    topology = schema["properties"]["policy"]["properties"]["topology"]["enum"]
    assert topology == ["independent", "single-node-nvlink", "multi-node-nccl", "elastic-workers"]


def test_precompiled_validator_is_current() -> None:
    """The shipped validator module matches the catalog (regenerate: python -m tau_core.config.codegen)."""
    from tau_core.config import _schema_compiled
    from tau_core.config.codegen import schema_sha256

    assert _schema_compiled.SCHEMA_SHA256 == schema_sha256()


def test_precompiled_validator_sources_fingerprint_is_current() -> None:
    """The cheap staleness check (CRC of catalog.py and schema.py) matches, so no process rebuilds the
    schema to hash it; the shipped validator raises its own exception copies (no fastjsonschema import)."""
    import subprocess
    import sys

    from tau_core.config import _schema_compiled
    from tau_core.config.codegen import sources_crc32
    from tau_core.config.structure import compiled_validator, schema_errors

    assert _schema_compiled.SOURCES_CRC32 == sources_crc32()
    assert compiled_validator() is _schema_compiled.validate
    assert schema_errors() == (_schema_compiled.JsonSchemaException,)
    probe = ("import sys; from tau_core.config import validate_document; from tau_core.config.loader import "
             "parse_yaml; validate_document(parse_yaml('name: x\\nimage: bash:5.2\\ncompute:\\n  gpus: 0\\n', 'x.yaml'), check_files=False); "
             "print(sorted(m for m in ('fastjsonschema', 'difflib', 'ruamel.yaml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_precompiled_validator_agrees_with_fastjsonschema() -> None:
    """The shipped validator (local exception classes, lazy Decimal) decides like a fresh fastjsonschema compile."""
    from decimal import Decimal

    import fastjsonschema

    from tau_core.config import _schema_compiled
    from tau_core.config.schema import build_schema

    fresh = fastjsonschema.compile(build_schema(), use_default=False)
    samples: list[Any] = [{}, {"name": "x"}, {"nope": 1}, {"compute": {"gpus": Decimal(2)}},
                          {"compute": {"gpus": Decimal("1.5")}}, {"compute": {"cpu_request": Decimal(1)}},
                          {"run": {"ttl_seconds_after_finished": 0}}, {"policy": {"lane": "x"}}, [], "x"]
    for sample in samples:
        try:
            fresh(sample)
            expected = None
        except fastjsonschema.JsonSchemaException as exc:
            expected = str(exc)
        try:
            _schema_compiled.validate(sample)
            got = None
        except _schema_compiled.JsonSchemaException as exc:
            got = str(exc)
        assert got == expected, sample
