"""Validation, pruning and defaulting of custom resources against a CRD's structural ``openAPIV3Schema``."""

from __future__ import annotations

import json
import re
from typing import Any

from tau_testing.sim.store import clone

_TYPE_NAMES = {"object": dict, "array": list, "string": str, "boolean": bool}


def _shown(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _type_ok(expected: str, value: Any) -> bool:
    if expected == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    kind = _TYPE_NAMES.get(expected)
    return kind is None or isinstance(value, kind)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _cause(reason: str, field: str, message: str) -> dict[str, Any]:
    return {"reason": reason, "message": message, "field": field}


_MISSING = object()


def _walk(schema: dict[str, Any], value: Any, path: str, causes: list[dict[str, Any]], unknown: list[str],
          root: bool = False, old: Any = _MISSING) -> None:
    if not isinstance(schema, dict):
        return
    _walk_value(schema, value, path, causes, unknown, root, old)
    rules = schema.get("x-kubernetes-validations")
    expected = schema.get("type")
    if rules and (not expected or _type_ok(expected, value)):
        from tau_testing.sim import cel

        for rule in rules:
            text = rule.get("rule") if isinstance(rule, dict) else None
            if not text:
                continue
            if cel.check(text, value, None if old is _MISSING else old, old is not _MISSING) is False:
                field = path + str(rule.get("fieldPath") or "")
                message = rule.get("message") or f"failed rule: {text}"
                kind = expected or ("integer or string" if schema.get("x-kubernetes-int-or-string") else "object")
                reason = rule.get("reason") or "FieldValueInvalid"
                causes.append(_cause(reason, field.lstrip("."), f"Invalid value: {_shown(kind)}: {message}"))


def _old_item(schema: dict[str, Any], item: Any, old: Any) -> Any:
    """The old list element matching ``item`` by its list-map keys (``_MISSING`` when not correlatable)."""
    keys = schema.get("x-kubernetes-list-map-keys") or []
    if schema.get("x-kubernetes-list-type") != "map" or not keys or not isinstance(old, list) or \
            not isinstance(item, dict):
        return _MISSING
    for candidate in old:
        if isinstance(candidate, dict) and all(candidate.get(k) == item.get(k) for k in keys):
            return candidate
    return _MISSING


def _walk_value(schema: dict[str, Any], value: Any, path: str, causes: list[dict[str, Any]], unknown: list[str],
                root: bool, old: Any) -> None:
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))):
            causes.append(_cause("FieldValueTypeInvalid", path,
                                 f"Invalid value: {_shown(value)}: {path} in body must be of type "
                                 f"integer or string: {_shown(_type_name(value))}"))
        elif isinstance(value, str) and "pattern" in schema:
            try:
                if re.search(schema["pattern"], value) is None:
                    causes.append(_cause("FieldValueInvalid", path, f"Invalid value: {_shown(value)}: {path} in "
                                         f"body should match '{schema['pattern']}'"))
            except re.error:
                pass
        return
    expected = schema.get("type")
    if expected and not _type_ok(expected, value):
        causes.append(_cause("FieldValueTypeInvalid", path,
                             f"Invalid value: {_shown(_type_name(value))}: {path} in body must be of type "
                             f"{expected}: {_shown(_type_name(value))}"))
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(_shown(v) for v in schema["enum"])
        causes.append(_cause("FieldValueNotSupported", path,
                             f"Unsupported value: {_shown(value)}: supported values: {allowed}"))
    _check_scalar(schema, value, path, causes)
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            causes.append(_cause("FieldValueTooMany", path,
                                 f"Too many: {len(value)}: must have at most {schema['maxItems']} items"))
        if "minItems" in schema and len(value) < schema["minItems"]:
            causes.append(_cause("FieldValueInvalid", path, f"Invalid value: {len(value)}: {path} in body should "
                                 f"have at least {schema['minItems']} items"))
        items = schema.get("items")
        if isinstance(items, dict):
            for i in range(len(value)):
                if value[i] is None and not items.get("nullable"):
                    continue
                _default(items, value, i)
                _walk(items, value[i], f"{path}[{i}]", causes, unknown, old=_old_item(schema, value[i], old))
        return
    if isinstance(value, dict):
        _walk_object(schema, value, path, causes, unknown, root, old)


def _check_scalar(schema: dict[str, Any], value: Any, path: str, causes: list[dict[str, Any]]) -> None:
    """The bounds of a number and the length and pattern of a string."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema:
            low = schema["minimum"]
            if value < low or (schema.get("exclusiveMinimum") is True and value == low):
                causes.append(_cause("FieldValueInvalid", path, f"Invalid value: {_shown(value)}: {path} in body "
                                     f"should be greater than or equal to {low}"))
        if "maximum" in schema:
            high = schema["maximum"]
            if value > high or (schema.get("exclusiveMaximum") is True and value == high):
                causes.append(_cause("FieldValueInvalid", path, f"Invalid value: {_shown(value)}: {path} in body "
                                     f"should be less than or equal to {high}"))
    if not isinstance(value, str):
        return
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        causes.append(_cause("FieldValueTooLong", path,
                             f"Too long: may not be more than {schema['maxLength']} bytes"))
    if "minLength" in schema and len(value) < schema["minLength"]:
        causes.append(_cause("FieldValueInvalid", path, f"Invalid value: {_shown(value)}: {path} in body "
                             f"should be at least {schema['minLength']} chars long"))
    if "pattern" in schema:
        try:
            if re.search(schema["pattern"], value) is None:
                causes.append(_cause("FieldValueInvalid", path, f"Invalid value: {_shown(value)}: {path} in "
                                     f"body should match '{schema['pattern']}'"))
        except re.error:
            pass


def _walk_object(schema: dict[str, Any], value: dict[str, Any], path: str, causes: list[dict[str, Any]],
                 unknown: list[str], root: bool, old: Any) -> None:
    """An object: its required fields, defaults, known, unknown and map-valued members, and its size."""
    expected = schema.get("type")
    props = schema.get("properties")
    additional = schema.get("additionalProperties")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-embedded-resource")
    for field in schema.get("required") or []:
        if field not in value:
            causes.append(_cause("FieldValueRequired", _join(path, field), "Required value"))
    if props is not None:
        for key, sub in props.items():
            _default(sub, value, key)
    for key in list(value):
        if root and key in ("apiVersion", "kind", "metadata"):
            continue
        if schema.get("x-kubernetes-embedded-resource") and key in ("apiVersion", "kind", "metadata"):
            continue
        child = value[key]
        sub = (props or {}).get(key)
        if sub is None and isinstance(additional, dict):
            sub = additional
        if sub is None:
            if preserve or additional is True:
                continue
            if props is None and additional is None and not expected:
                continue
            unknown.append(_join(path, key))
            del value[key]
            continue
        if child is None:
            if sub.get("nullable"):
                continue
            del value[key]
            _default(sub, value, key)
            if key not in value:
                continue
            child = value[key]
        child_old = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
        _walk(sub, child, _join(path, key, map_key=sub is additional), causes, unknown, old=child_old)
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        causes.append(_cause("FieldValueTooMany", path,
                             f"Too many: {len(value)}: must have at most {schema['maxProperties']} items"))


def _join(path: str, key: str, map_key: bool = False) -> str:
    if map_key:
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _default(schema: dict[str, Any], container: Any, key: Any) -> None:
    if not isinstance(schema, dict) or "default" not in schema:
        return
    if isinstance(container, dict) and key not in container:
        container[key] = clone(schema["default"])


def validate_custom(schema: dict[str, Any], obj: dict[str, Any], unknown: list[str],
                    old: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Prune unknown fields (recorded in ``unknown``), apply defaults, evaluate the CEL rules (transition rules
    against ``old`` on updates), and return the validation causes."""
    causes: list[dict[str, Any]] = []
    _walk(schema, obj, "", causes, unknown, root=True, old=_MISSING if old is None else old)
    return causes
