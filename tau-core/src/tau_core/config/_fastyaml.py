"""A fast path for loading plain YAML documents, without positions.

The round-trip ruamel.yaml loader keeps positions but is slow (pure Python) and costly to
import.  Most documents are plain block YAML without errors; for those the positions are
never needed.  :func:`fast_load` reads such documents and types the scalars the way
ruamel.yaml's YAML 1.2 resolver does, in two tiers:

* :func:`simple_load`, an import-free reader for ASCII block YAML (``key: value`` and
  ``- item`` lines, plain and simple quoted scalars, one-line flow sequences, comments);
* :func:`libyaml_load`, PyYAML's C parser, for the rest (imported only when needed).

It returns ``(False, None)`` (the caller then uses the round-trip loader, which produces
the data, the errors and the positions) for anything it is not certain to load identically:

* any parse or composition error, several documents, directives, tabs, CR, NEL or Unicode
  line separators, explicit or non-specific tags, merge keys;
* anchors shared between collections (aliases, alias bombs, recursion);
* duplicate, non-string or non-encodable keys and values, non-encodable text;
* scalars that YAML 1.2 types as anything other than a plain string, null, boolean,
  canonical decimal integer or plain decimal float (octal, hex, underscores, exponents,
  ``.inf``, timestamps, ``=``), and folded block scalars;
* more than ``max_nodes`` values or deeper than ``max_depth`` levels.

A differential test (``tau-core/tests/test_config_fastyaml.py``) checks that whenever either
tier returns data, it equals what the round-trip loader produces.
"""

from __future__ import annotations

import re
from typing import Any

_PLAIN = "tau:plain"
_QUOTED = "tau:quoted"
_SEQ = "tau:seq"
_MAP = "tau:map"

#: ruamel.yaml's YAML 1.2 implicit resolvers for int, float, merge, timestamp and value
#: (``ruamel/yaml/resolver.py``); a plain scalar matching one of them that is not a simple
#: decimal int or float is left to the round-trip loader.  Compiled on first use.
_TYPED_12_PATTERN = (
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
    )\Z"""
)
#: every character any of those patterns can match: a scalar with another character is a string
_TYPED_CHARS = frozenset("0123456789_+-.eEbBoOxXabcdefABCDEFinfINFnNaATtZ :<=")
_TYPED_FIRST = frozenset("-+0123456789.<=")
_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
#: a non-specific tag ``!`` (libyaml reports it like an untagged scalar) or a directive line
_RISKY_TEXT_PATTERN = r"(?:^|[\s,\[{\-?:])!(?:[\s,\]}]|\Z)|^%"
_REGEXES: dict[str, re.Pattern[str]] = {}


def _regex(pattern: str, flags: int = 0) -> re.Pattern[str]:
    found = _REGEXES.get(pattern)
    if found is None:
        found = _REGEXES[pattern] = re.compile(pattern, flags)
    return found


def _risky(text: str) -> bool:
    return ("!" in text or "%" in text) and _regex(_RISKY_TEXT_PATTERN, re.M).search(text) is not None


def _typed(value: str) -> bool:
    """Would YAML 1.2 (as ruamel.yaml resolves it) type this plain scalar as other than a string?"""
    return _TYPED_CHARS.issuperset(value) and _regex(_TYPED_12_PATTERN, re.X).match(value) is not None


def _simple_int(value: str) -> bool:
    digits = value[1:] if value[:1] == "-" else value
    return 0 < len(digits) <= 18 and digits.isascii() and digits.isdigit() and (digits == "0" or digits[0] != "0")


def _simple_float(value: str) -> bool:
    whole, dot, frac = (value[1:] if value[:1] == "-" else value).partition(".")
    return bool(dot) and _simple_int(whole) and len(whole) <= 16 and 0 < len(frac) <= 15 and frac.isascii() \
        and frac.isdigit()


class _Fallback(Exception):
    """The document needs the round-trip loader."""


class TooManyValues(Exception):
    """The document holds more than ``max_nodes`` values.

    Final, not a fallback: the round-trip loader would count at least as many (it also expands
    aliases), so handing it a 960 KB list would only spend a minute and half a gigabyte first.
    """


_LOADER: Any = None


def check_value_count(text: str, max_nodes: int) -> None:
    """Raise :class:`TooManyValues` when ``text`` holds more than ``max_nodes`` values, by a cheap scan.

    For documents the fast path declined (tabs, tags...), before the slow round-trip loader runs.
    libyaml's event stream (C) is counted: every node event that is not a mapping key is a value,
    an alias counts once (its expansion counts more), and the scan stops at the first syntax error
    (the round-trip loader then reports it).  A value takes at least two bytes (``1,``), so a text
    shorter than ``2 * max_nodes`` cannot hold too many values without aliases and is not scanned.
    """
    if len(text) <= 2 * max_nodes:
        return
    try:
        from yaml._yaml import CParser
    except ImportError:  # pragma: no cover - PyYAML without libyaml
        return
    parser = CParser(text)
    stack: list[list[int]] = []  # [is_mapping, nodes seen] per open collection
    values = 0
    try:
        while True:
            event = parser.peek_event() and parser.get_event()
            if event is None:
                break
            name = type(event).__name__
            if name in ("SequenceEndEvent", "MappingEndEvent"):
                stack.pop()
                continue
            if name not in ("ScalarEvent", "AliasEvent", "SequenceStartEvent", "MappingStartEvent"):
                continue
            is_key = bool(stack) and stack[-1][0] == 1 and stack[-1][1] % 2 == 0
            if stack:
                stack[-1][1] += 1
            if not is_key:
                values += 1
                if values > max_nodes:
                    raise TooManyValues
            if name == "SequenceStartEvent" or name == "MappingStartEvent":
                stack.append([1 if name == "MappingStartEvent" else 0, 0])
    except TooManyValues:
        raise
    except Exception:
        return
    finally:
        parser.dispose()


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
    else ``(False, None)``.  Block-style documents are read by :func:`simple_load` (no import
    at all); the rest by libyaml."""
    if "\t" in text or "\x85" in text or "\u2028" in text or "\u2029" in text:
        return False, None
    if _risky(text):
        return False, None
    ok, data = simple_load(text, max_nodes=max_nodes, max_depth=max_depth)
    if ok:
        return ok, data
    return libyaml_load(text, max_nodes=max_nodes, max_depth=max_depth)


def libyaml_load(text: str, *, max_nodes: int, max_depth: int) -> tuple[bool, Any]:
    """The libyaml tier of :func:`fast_load` (callers have screened ``text`` as it does)."""
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
    if count[0] > max_nodes:
        raise TooManyValues
    if depth > max_depth:
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
                if key in _NULLS or key in _BOOLS or (first in _TYPED_FIRST and _typed(key)):
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
        if _simple_int(value):
            return int(value)
        if _simple_float(value):
            return float(value)
        if _typed(value):
            raise _Fallback
    _encodable(value)
    return value


def _encodable(text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _Fallback from None


# -- the block-subset tier ------------------------------------------------------------------
#
# Plain block YAML as people write configs: ``key: value`` and ``- item`` lines, nested by
# indentation, with plain, single-line quoted (no escapes) and one-line flow-sequence scalars
# and comments.  Anything else (multi-line scalars, flow mappings, anchors, tags, quoted or
# complex keys, document markers, ...) raises _Fallback.

#: ASCII control characters YAML does not allow (tab and CR are screened out before)
_CONTROL = frozenset(chr(c) for c in [*range(0x00, 0x0A), *range(0x0B, 0x20), 0x7F])
_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_./-]*):(?: +(.*))?\Z")
_PLAIN_BAD_FIRST = frozenset("[]{}#&*!|>'\"%@`,?:")
_FLOW_ITEM_BAD = frozenset("[]{}#&*!|>'\"%@`,?:")

_DASH, _KEY, _SCALAR = 0, 1, 2


def simple_load(text: str, *, max_nodes: int, max_depth: int) -> tuple[bool, Any]:
    """The import-free tier of :func:`fast_load` (callers have screened ``text`` as it does)."""
    if "\r" in text or not text.isascii() or not _CONTROL.isdisjoint(text):
        return False, None  # non-ASCII text goes to libyaml, which checks the printable set
    try:
        tokens = _tokens(text)
        if not tokens:
            return True, None
        state = [0, 0]  # next token, node count
        data = _block(tokens, state, tokens[0][1], 0, max_nodes, max_depth)
        if state[0] != len(tokens):
            raise _Fallback
        return True, data
    except (_Fallback, RecursionError):
        return False, None


def _tokens(text: str) -> list[tuple[int, int, Any, Any]]:
    """(kind, column, key, value text) per dash, key or scalar, in document order."""
    out: list[tuple[int, int, Any, Any]] = []
    for line in text.split("\n"):
        rest = line.lstrip(" ")
        if not rest or rest[0] == "#":
            continue
        rest = rest.rstrip(" ")
        col = len(line) - len(line.lstrip(" "))
        if col == 0 and (rest.startswith("---") or rest.startswith("...")):
            raise _Fallback
        while rest[0] == "-" and (len(rest) == 1 or rest[1] == " "):
            out.append((_DASH, col, None, None))
            stripped = rest[1:].lstrip(" ")
            if not stripped or stripped[0] == "#":
                rest = ""
                break
            col += len(rest) - len(stripped)
            rest = stripped
        if not rest:
            continue
        match = _KEY_LINE.match(rest)
        if match is not None:
            key = match.group(1)
            if key in _NULLS or key in _BOOLS:
                raise _Fallback
            value = match.group(2)
            if value is not None and (not value or value[0] == "#"):
                value = None
            out.append((_KEY, col, key, value))
        else:
            out.append((_SCALAR, col, None, rest))
    return out


def _count(state: list[int], depth: int, max_nodes: int, max_depth: int) -> None:
    state[1] += 1
    if state[1] > max_nodes:
        raise TooManyValues
    if depth > max_depth:
        raise _Fallback


def _block(tokens: list[tuple[int, int, Any, Any]], state: list[int], col: int, depth: int, max_nodes: int,
           max_depth: int, compact: bool = False) -> Any:
    """The node whose first token is ``tokens[state[0]]`` at column ``col``; ``compact``: a sequence
    that is a mapping value at the mapping's own indentation (the mapping's next key may follow)."""
    kind = tokens[state[0]][0]
    n = len(tokens)
    if kind == _SCALAR:
        _count(state, depth, max_nodes, max_depth)
        value = _inline(tokens[state[0]][3], state, depth, max_nodes, max_depth)
        state[0] += 1
        if state[0] < n and tokens[state[0]][1] >= col:  # a continuation line or a stray token
            raise _Fallback
        return value
    _count(state, depth, max_nodes, max_depth)
    if kind == _DASH:
        items: list[Any] = []
        while state[0] < n and tokens[state[0]][0] == _DASH and tokens[state[0]][1] == col:
            state[0] += 1
            if state[0] < n and tokens[state[0]][1] > col:
                items.append(_block(tokens, state, tokens[state[0]][1], depth + 1, max_nodes, max_depth))
            else:
                _count(state, depth + 1, max_nodes, max_depth)
                items.append(None)
        if state[0] < n and tokens[state[0]][1] >= col and not (
                compact and tokens[state[0]][1] == col and tokens[state[0]][0] == _KEY):
            raise _Fallback
        return items
    out: dict[str, Any] = {}
    while state[0] < n and tokens[state[0]][0] == _KEY and tokens[state[0]][1] == col:
        _, _, key, value = tokens[state[0]]
        if key in out:
            raise _Fallback
        state[0] += 1
        nxt = tokens[state[0]] if state[0] < n else None
        if value is not None:
            _count(state, depth + 1, max_nodes, max_depth)
            out[key] = _inline(value, state, depth + 1, max_nodes, max_depth)
            if nxt is not None and nxt[1] > col:  # a continuation line
                raise _Fallback
        elif nxt is not None and nxt[1] > col:
            out[key] = _block(tokens, state, nxt[1], depth + 1, max_nodes, max_depth)
        elif nxt is not None and nxt[1] == col and nxt[0] == _DASH:
            out[key] = _block(tokens, state, col, depth + 1, max_nodes, max_depth, compact=True)
        else:
            _count(state, depth + 1, max_nodes, max_depth)
            out[key] = None
    if state[0] < n and tokens[state[0]][1] >= col:
        raise _Fallback
    return out


def _inline(text: str, state: list[int], depth: int, max_nodes: int, max_depth: int) -> Any:
    """A scalar (or a one-line flow sequence) written on the rest of a line; the caller counted it."""
    first = text[0]
    if first == '"' or first == "'":
        end = text.find(first, 1)
        if end < 0 or ("\\" in text[:end] and first == '"'):
            raise _Fallback
        after = text[end + 1:]
        if after and not (after[0] == " " and after.lstrip(" ").startswith("#")):
            raise _Fallback  # '' escapes, text after the closing quote
        value = text[1:end]
        _encodable(value)
        return value
    if first == "[":
        if state[1] + text.count(",") > max_nodes:  # items >= commas: refuse before splitting 480,000 of them
            raise TooManyValues
        items = _flow_sequence(text)
        for _ in items:
            _count(state, depth + 1, max_nodes, max_depth)
        return items
    cut = text.find(" #")
    if cut >= 0:
        text = text[:cut].rstrip(" ")
    if first in _PLAIN_BAD_FIRST or (first == "-" and text[1:2] in ("", " ")) or ": " in text or text[-1] == ":":
        raise _Fallback
    return _plain_scalar(text)


def _flow_sequence(text: str) -> list[Any]:
    end = text.find("]")
    if end < 0:
        raise _Fallback
    after = text[end + 1:]
    if after and not (after[0] == " " and after.lstrip(" ").startswith("#")):
        raise _Fallback
    inner = text[1:end].strip(" ")
    if not inner:
        return []
    items = []
    for raw in inner.split(","):
        item = raw.strip(" ")
        if not item or item[0] in _FLOW_ITEM_BAD or ":" in item or "#" in item or (item[0] == "-" and \
                item[1:2] in ("", " ")):
            raise _Fallback
        items.append(_plain_scalar(item))
    return items
