"""Decoding checks for built-in kinds, from the Kubernetes OpenAPI schemas shipped by ``kubernetes-validate``.

A real API server decodes a built-in object into its Go type: a field of the wrong type is a 400 error, and a
field the type does not have is dropped (reported as a warning, or rejected with ``fieldValidation=Strict``).
The simulator reproduces both for requests that come through its HTTP API.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from typing import Any

_LOCK = threading.Lock()


def _schema_dir(version: str) -> str | None:
    try:
        from importlib import resources

        root = resources.files("kubernetes_validate").joinpath("kubernetes-json-schema")
        available = sorted(
            (tuple(int(p) for p in entry.name[1:].split("-")[0].split(".")[:2]), entry.name)
            for entry in root.iterdir() if entry.name.endswith("-local-strict"))
    except (ImportError, OSError, ValueError):
        return None
    wanted = tuple(int(p) for p in version.lstrip("v").split(".")[:2])
    fitting = [name for key, name in available if key <= wanted]
    return (fitting[-1] if fitting else available[0][1]) if available else None


@functools.lru_cache(maxsize=8)
def _registry(version: str) -> tuple[Any, Any] | None:
    from importlib import resources

    from referencing import Registry, Resource

    directory = _schema_dir(version)
    if directory is None:
        return None
    root = resources.files("kubernetes_validate").joinpath("kubernetes-json-schema").joinpath(directory)
    try:
        definitions = json.loads(root.joinpath("_definitions.json").read_text())
    except (OSError, ValueError):
        return None
    return root, Resource.from_contents(definitions) @ Registry()


@functools.lru_cache(maxsize=256)
def _validator(version: str, api_version: str, kind: str) -> Any:
    import jsonschema
    from referencing import Resource

    found = _registry(version)
    if found is None:
        return None
    root, registry = found
    short = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = json.loads(root.joinpath(f"{kind.lower()}-{short}.json").read_text())
    except (OSError, ValueError):
        return None
    return jsonschema.validators.Draft202012Validator(schema, registry=Resource.from_contents(schema) @ registry)


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _locate(obj: Any, parts: Any) -> Any:
    for part in parts:
        obj = obj[part]
    return obj


_TYPE_NAMES = {"integer": "int", "number": "number", "string": "string", "boolean": "bool", "object": "object",
               "array": "array"}


def check(obj: dict[str, Any], version: str) -> tuple[list[str], list[str]]:
    """Drop unknown fields from ``obj`` in place. Returns (unknown field paths, type errors)."""
    with _LOCK:
        validator = _validator(version, str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if validator is None:
        return [], []
    unknown: list[str] = []
    type_errors: list[str] = []
    removals: list[tuple[Any, str]] = []
    for error in validator.iter_errors(obj):
        _collect(error, obj, unknown, type_errors, removals)
    for parent, key in removals:
        if isinstance(parent, dict):
            parent.pop(key, None)
    return sorted(set(unknown)), type_errors


def _collect(error: Any, obj: dict[str, Any], unknown: list[str], type_errors: list[str],
             removals: list[tuple[Any, str]]) -> None:
    if error.validator in ("oneOf", "anyOf") and error.context:
        # take the branch that got furthest (the shape the client meant)
        best = max(error.context, key=lambda e: len(e.absolute_path))
        _collect(best, obj, unknown, type_errors, removals)
        return
    if error.validator == "additionalProperties" and error.validator_value is False:
        try:
            parent = _locate(obj, error.absolute_path)
        except (KeyError, IndexError, TypeError):
            return
        allowed = set((error.schema or {}).get("properties") or {})
        for key in list(parent) if isinstance(parent, dict) else []:
            if key not in allowed:
                unknown.append(_path([*error.absolute_path, key]))
                removals.append((parent, key))
    elif error.validator == "type":
        expected = error.validator_value
        names = [expected] if isinstance(expected, str) else list(expected)
        wanted = " or ".join(_TYPE_NAMES.get(n, n) for n in names if n != "null")
        type_errors.append(f"{_path(error.absolute_path)}: cannot unmarshal {type(error.instance).__name__} "
                           f"{json.dumps(error.instance)[:60]} into a field of type {wanted}")
