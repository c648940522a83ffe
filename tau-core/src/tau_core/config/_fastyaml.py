"""A fast path for loading plain YAML documents: libyaml (PyYAML's C parser) plus YAML 1.2 typing.

The round-trip ruamel.yaml loader keeps positions but is slow (pure Python) and costly to
import.  Most documents are plain block YAML without errors; for those the positions are
never needed.  :func:`fast_load` parses such documents with libyaml and types the scalars
the way ruamel.yaml's YAML 1.2 resolver does.  It returns ``None`` (the caller then uses
the round-trip loader, which produces the data, the errors and the positions) for anything
it is not certain to load identically:

* any parse or composition error, several documents, directives, tabs, NEL or Unicode
  line separators, explicit or non-specific tags, merge keys;
* anchors shared between collections (aliases, alias bombs, recursion);
* duplicate, non-string or non-encodable keys and values, non-encodable text;
* scalars that YAML 1.2 types as anything other than a plain string, null, boolean,
  canonical decimal integer or plain decimal float (octal, hex, underscores, exponents,
  ``.inf``, timestamps, ``=``), and folded block scalars;
* more than ``max_nodes`` values or deeper than ``max_depth`` levels.

A differential test (``tau-core/tests/test_config_fastyaml.py``) checks that whenever this
path returns data, it equals what the round-trip loader produces.
"""

from __future__ import annotations

import re
from typing import Any

_PLAIN = "tau:plain"
_QUOTED = "tau:quoted"
_SEQ = "tau:seq"
_MAP = "tau:map"

_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})\Z")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]{0,15})\.[0-9]{1,15}\Z")
#: ruamel.yaml's YAML 1.2 implicit resolvers for int, float, merge, timestamp and value
#: (``ruamel/yaml/resolver.py``); a plain scalar matching one of them that the simple
#: patterns above do not cover is left to the round-trip loader.
_TYPED_12 = re.compile(
    r"""(?:
      [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
     |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
     |[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?
     |[-+]?\.(?:inf|Inf|INF)
     |\.(?:nan|NaN|NAN)
     |[-+]?0b[0-1_]+
     |[-+]?0o?[0-7_]+
     |[-+]?[0-9_]+
     |[-+]?0x[0-9a-fA-F_]+
     |<<
     |[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
     |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
        (?:[Tt]|[ \t]+)[0-9][0-9]?
        :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
        (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?
     |=
    )\Z""",
    re.X,
)
_TYPED_FIRST = frozenset("-+0123456789.<=")
_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
#: a non-specific tag ``!`` (libyaml reports it like an untagged scalar) or a directive line
_RISKY_TEXT = re.compile(r"(?:^|[\s,\[{\-?:])!(?:[\s,\]}]|\Z)|^%", re.M)


class _Fallback(Exception):
    """The document needs the round-trip loader."""


_LOADER: Any = None


def _loader_class() -> Any:
    global _LOADER
    if _LOADER is None:
        try:
            from yaml._yaml import CParser
        except ImportError:  # PyYAML without libyaml: the round-trip loader does everything
            _LOADER = False
            return _LOADER

        class _Parser(CParser):  # type: ignore[misc]
            def descend_resolver(self, current_node: Any, current_index: Any) -> None:
                return None

            def ascend_resolver(self) -> None:
                return None

            def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
                name = kind.__name__
                if name == "ScalarNode":
                    return _PLAIN if implicit[0] else _QUOTED
                return _MAP if name == "MappingNode" else _SEQ

        _LOADER = _Parser
    return _LOADER


def fast_load(text: str, *, max_nodes: int, max_depth: int) -> tuple[bool, Any]:
    """``(True, data)`` when the fast path loads ``text`` exactly as the round-trip loader would,
    else ``(False, None)``."""
    if "\t" in text or "\x85" in text or "\u2028" in text or "\u2029" in text:
        return False, None
    if ("!" in text or "%" in text) and _RISKY_TEXT.search(text):
        return False, None
    cls = _loader_class()
    if not cls:
        return False, None
    parser = cls(text)
    try:
        node = parser.get_single_node()
    except Exception:
        return False, None
    finally:
        parser.dispose()
    if node is None:
        return True, None
    try:
        return True, _convert(node, [0], set(), 0, max_nodes, max_depth)
    except (_Fallback, RecursionError):
        return False, None


def _convert(node: Any, count: list[int], seen: set[int], depth: int, max_nodes: int, max_depth: int) -> Any:
    count[0] += 1
    if count[0] > max_nodes or depth > max_depth:
        raise _Fallback
    tag = node.tag
    if tag == _PLAIN:
        return _plain_scalar(node.value)
    if tag == _QUOTED:
        if node.style == ">":
            raise _Fallback
        value = node.value
        _encodable(value)
        return value
    if tag == _MAP:
        if id(node) in seen:
            raise _Fallback
        seen.add(id(node))
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag != _QUOTED and key_node.tag != _PLAIN:
                raise _Fallback
            key = key_node.value
            if key_node.tag == _PLAIN:
                first = key[:1]
                if key in _NULLS or key in _BOOLS or (first in _TYPED_FIRST and _TYPED_12.match(key)):
                    raise _Fallback
            elif key_node.style == ">":
                raise _Fallback
            if key in out:
                raise _Fallback
            _encodable(key)
            out[key] = _convert(value_node, count, seen, depth + 1, max_nodes, max_depth)
        return out
    if tag == _SEQ:
        if id(node) in seen:
            raise _Fallback
        seen.add(id(node))
        return [_convert(item, count, seen, depth + 1, max_nodes, max_depth) for item in node.value]
    raise _Fallback


def _plain_scalar(value: str) -> Any:
    if value in _NULLS:
        return None
    found = _BOOLS.get(value)
    if found is not None:
        return found
    if value[:1] in _TYPED_FIRST:
        if _INT.match(value):
            return int(value)
        if _FLOAT.match(value):
            return float(value)
        if _TYPED_12.match(value):
            raise _Fallback
    _encodable(value)
    return value


def _encodable(text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _Fallback from None
