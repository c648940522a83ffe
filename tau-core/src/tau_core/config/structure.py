"""Structural checks generated from the catalog: the compiled JSON Schema as the fast gate,
and a walker that reports *every* structural problem with positions and suggestions."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from tau_core.config.catalog import (
    BY_PATH,
    DURATION_PATTERN,
    FIELDS,
    QUANTITY_PATTERN,
    REMOVED,
    REQUIRED,
    Field,
    children,
)
from tau_core.config.issues import ConfigIssue, PathKey, dotted
from tau_core.config.loader import Document

_VALIDATOR: Callable[[Any], Any] | None = None
_ERRORS: tuple[type[Exception], ...] = ()


def compiled_validator() -> Callable[[Any], Any]:
    """The fastjsonschema validator for the catalog's schema, compiled once per process."""
    global _VALIDATOR, _ERRORS
    if _VALIDATOR is None:
        import importlib

        from tau_core.config import codegen

        try:
            pre: Any = importlib.import_module("tau_core.config._schema_compiled")
        except ImportError:
            pre = None
        current = pre is not None and getattr(pre, "JsonSchemaException", None) is not None and (
            getattr(pre, "SOURCES_CRC32", None) == codegen.sources_crc32()  # cheap: the sources are unchanged
            or getattr(pre, "SCHEMA_SHA256", None) == codegen.schema_sha256())
        if current:
            _VALIDATOR, _ERRORS = pre.validate, (pre.JsonSchemaException,)
        else:
            import fastjsonschema

            from tau_core.config.schema import build_schema

            _VALIDATOR = fastjsonschema.compile(build_schema(), use_default=False)
            _ERRORS = (fastjsonschema.JsonSchemaException,)
    return _VALIDATOR


def schema_errors() -> tuple[type[Exception], ...]:
    """The exception classes :func:`compiled_validator`'s validator raises for invalid data."""
    compiled_validator()
    return _ERRORS


def schema_accepts(data: Any) -> bool:
    validator = compiled_validator()
    try:
        validator(data)
    except _ERRORS:
        return False
    return True


def _close_matches(word: str, possibilities: Any, n: int, cutoff: float = 0.6) -> list[str]:
    import difflib  # only when there is a problem to explain

    return difflib.get_close_matches(word, possibilities, n=n, cutoff=cutoff)


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _catalog_key(path: tuple[PathKey, ...]) -> str:
    """Catalog path for a document path: list indices of object lists become ``[]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += "[]"
        else:
            out += ("." if out else "") + part
    return out


class Walker:
    """Collects every structural issue in a (pre-normalized) config mapping."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.issues: list[ConfigIssue] = []
        #: document paths to drop so the rest of the config can still be checked
        self.prune: list[tuple[PathKey, ...]] = []
        self._field_path: tuple[PathKey, ...] | None = None

    def error(self, path: tuple[PathKey, ...], message: str, hint: str | None = None) -> None:
        from tau_core.config.catalog import hint_for

        shown = dotted(path)
        self.issues.append(self.doc.issue(path, shown, message, hint or hint_for(shown)))
        self.prune.append(self._field_path if self._field_path is not None else path)

    def walk(self, data: dict[str, Any]) -> list[ConfigIssue]:
        self._object("", data, ())
        return self.issues

    def _object(self, prefix: str, value: Any, path: tuple[PathKey, ...]) -> None:
        if not isinstance(value, dict):
            self.error(path, f"expected a mapping, got {_kind(value)}",
                       f"write {dotted(path) or 'the config'} as indented 'key: value' lines")
            return
        known = {f.leaf: f for f in children(prefix)}
        for key, item in value.items():
            kpath = (*path, key)
            full = f"{prefix}.{key}" if prefix else key
            removed = REMOVED.get(full.replace("[]", ""))
            if removed is not None:
                self.error(kpath, removed[0], removed[1])
                continue
            f = known.get(key)
            if f is None:
                self.error(kpath, f"unknown key {key!r}", _suggest(prefix, key))
                continue
            if f.is_container:
                self._field(f, item, kpath)
            else:
                self._field_path = kpath
                self._field(f, item, kpath)
                self._field_path = None
        for req in REQUIRED.get(prefix, ()):
            if req not in value:
                self.error(path, f"missing required key {req!r}",
                           f"{dotted(path)} needs {', '.join(REQUIRED[prefix])}")

    def _field(self, f: Field, value: Any, path: tuple[PathKey, ...]) -> None:
        t = f.type
        if t == "object":
            self._object(f.path, value, path)
        elif t == "object_list":
            if not isinstance(value, list):
                self.error(path, f"expected a list of mappings, got {_kind(value)}")
                return
            for i, item in enumerate(value):
                self._object(f.path + "[]", item, (*path, i))
        elif t == "string":
            self._string(f, value, path)
        elif t == "integer":
            if isinstance(value, bool) or not (isinstance(value, int) or
                                              (isinstance(value, float) and value.is_integer())):
                self.error(path, f"expected an integer, got {_kind(value)} {_show(value)}")
                return
            self._range(f, value, path)
        elif t == "boolean":
            if not isinstance(value, bool):
                self.error(path, f"expected true or false, got {_kind(value)} {_show(value)}")
        elif t == "string_or_integer":
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                self.error(path, f"expected a string or an integer, got {_kind(value)} {_show(value)}")
        elif t in ("quantity", "duration"):
            self._quantity_or_duration(t, value, path)
        elif t == "string_list":
            self._string_list(f, value, path)
        elif t in ("string_map", "scalar_map", "map"):
            self._map(t, value, path)
        # "any": nothing to check

    def _string(self, f: Field, value: Any, path: tuple[PathKey, ...]) -> None:
        if not isinstance(value, str):
            self.error(path, f"expected a string, got {_kind(value)} {_show(value)}", _quote_hint(value))
            return
        allowed = tuple(f.values) + tuple(f.deprecated_values)
        if f.values and value not in allowed:
            close = _close_matches(value, allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            self.error(path, f"{value!r} is not allowed", hint + "allowed: " + ", ".join(f.values))
            return
        if f.pattern and not _regex(f.pattern).search(value):
            self.error(path, f"{value!r} does not match the pattern {f.pattern}")

    def _quantity_or_duration(self, t: str, value: Any, path: tuple[PathKey, ...]) -> None:
        if t == "duration":
            if not isinstance(value, str):
                self.error(path, f"expected a duration string such as 30s or 5m, got {_kind(value)}")
            elif not _regex(DURATION_PATTERN).search(value):
                self.error(path, f"invalid duration {value!r}", "use a number with a unit: 30s, 5m, 1h30m")
            return
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.error(path, f"expected a Kubernetes quantity such as 500m or 4Gi, got {_kind(value)}")
        elif isinstance(value, str):
            if not _regex(QUANTITY_PATTERN).search(value):
                self.error(path, f"{value!r} is not a Kubernetes quantity", "use values such as 2, 500m, 8Gi")
        elif value < 0:
            self.error(path, f"must not be negative, got {value}")

    def _string_list(self, f: Field, value: Any, path: tuple[PathKey, ...]) -> None:
        if not isinstance(value, list):
            self.error(path, f"expected a list of strings, got {_kind(value)}", "write one '- item' per line")
            return
        for i, item in enumerate(value):
            if not isinstance(item, str):
                self.error((*path, i), f"expected a string, got {_kind(item)} {_show(item)}", _quote_hint(item))
            elif f.item_values and item not in f.item_values:
                self.error((*path, i), f"{item!r} is not allowed", "allowed: " + ", ".join(f.item_values))

    def _map(self, t: str, value: Any, path: tuple[PathKey, ...]) -> None:
        if not isinstance(value, dict):
            self.error(path, f"expected a mapping, got {_kind(value)}", "write 'KEY: value' lines")
            return
        if t == "map":
            return
        for key, item in value.items():
            ok = isinstance(item, str) or (t == "scalar_map" and isinstance(item, (int, float, bool)))
            if not ok:
                self.error((*path, key), f"expected a string value, got {_kind(item)}", _quote_hint(item))

    def _range(self, f: Field, value: float, path: tuple[PathKey, ...]) -> None:
        if f.minimum is not None and value < f.minimum:
            self.error(path, f"must be at least {f.minimum}, got {value:g}")
        elif f.maximum is not None and value > f.maximum:
            self.error(path, f"must be at most {f.maximum}, got {value:g}")


def pruned(data: dict[str, Any], paths: list[tuple[PathKey, ...]]) -> dict[str, Any]:
    """A copy of ``data`` without the values at ``paths`` (list items drop their whole list)."""
    import copy

    out = copy.deepcopy(data)
    for path in paths:
        cut: list[PathKey] = []
        for part in path:
            if isinstance(part, int):
                break
            cut.append(part)
        if not cut:
            continue
        node: Any = out
        for part in cut[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                break
        if isinstance(node, dict):
            node.pop(cut[-1], None)
    return out


def _quote_hint(value: Any) -> str | None:
    if isinstance(value, (int, float, bool)) or value is None:
        return "quote the value to make it a string"
    return None


def _suggest(prefix: str, key: str) -> str:
    known = [f.leaf for f in children(prefix)]
    close = _close_matches(key, known, n=1, cutoff=0.6)
    if close:
        full = f"{prefix}.{close[0]}" if prefix else close[0]
        return f"did you mean {full!r}?"
    elsewhere = [f.path for f in FIELDS if f.leaf == key and "[]" not in f.path]
    if elsewhere:
        return f"did you mean {elsewhere[0]!r}? ({key} belongs under {elsewhere[0].rsplit('.', 1)[0] or 'top level'})"
    where = f"under {prefix}" if prefix else "at the top level"
    return f"valid keys {where}: " + ", ".join(sorted(known)) + " (see tau run explain-config)"


def field_for(path: tuple[PathKey, ...]) -> Field | None:
    return BY_PATH.get(_catalog_key(path))
