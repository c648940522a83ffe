"""`tau run schema` is a valid JSON Schema draft 2020-12 document, and an independent implementation
(jsonschema) agrees with the compiled validator on every example config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples").glob("*/tau/*.yaml"))


def _schema(tau_cli) -> dict:  # type: ignore[no-untyped-def,type-arg]
    r = tau_cli("run", "schema", "-o", "json")
    assert r.exit_code == 0, r
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def test_schema_is_valid_draft_2020_12(tau_cli) -> None:  # type: ignore[no-untyped-def]
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(_schema(tau_cli))


@pytest.mark.parametrize("path", [p for p in EXAMPLES if p.name != "workspace.connection.yaml"],
                         ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_independent_validator_agrees_on_examples(tau_cli, path: Path) -> None:  # type: ignore[no-untyped-def]
    from jsonschema import Draft202012Validator

    from tau_core.config.loader import load_yaml_file
    from tau_core.config.structure import schema_accepts
    from tau_core.config.validate import _prenormalize

    doc = load_yaml_file(path)
    from tau_core.config.validate import is_managed_manifest

    if is_managed_manifest(doc.data):  # SDK manifests have their own schema (tau run schema --managed)
        managed = json.loads(tau_cli("run", "schema", "--managed").stdout)
        assert list(Draft202012Validator(managed).iter_errors(doc.data)) == []
        return
    pre = _prenormalize(doc.data, doc, [])
    errors = list(Draft202012Validator(_schema(tau_cli)).iter_errors(pre))
    assert errors == [] and schema_accepts(pre)


def test_independent_validator_rejects_unknown_fields(tau_cli) -> None:  # type: ignore[no-untyped-def]
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(_schema(tau_cli))
    assert not validator.is_valid({"name": "x", "compute": {"gpu": 1}})
    assert not validator.is_valid({"name": "x", "unknown": 1})
    assert validator.is_valid({"name": "x", "compute": {"gpus": 1}})
