"""Read YAML files safely, keeping the line and column of every key.

A round-trip ruamel.yaml load keeps positions; the document is then converted to plain
Python values (dict, list, str, int, float, bool, None) for validation.  Every problem a
file can have (missing, a directory, too large, binary, not UTF-8, tabs, broken YAML,
duplicate keys, several documents, a non-mapping top level, non-string keys, alias bombs)
becomes a :class:`ConfigValidationError` that names the file, the line and the column.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tau_core.config.issues import ConfigIssue, ConfigValidationError, PathKey

MAX_FILE_BYTES = 1024 * 1024
MAX_NODES = 200_000
MAX_DEPTH = 64
#: Integers in a config are Kubernetes int64 values at most; longer ones are refused, not converted.
MAX_INT_DIGITS = 19


def display_path(path: Path, cwd: Path | None = None) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    cwd = cwd or Path.cwd()
    try:
        return str(path.resolve().relative_to(cwd.resolve()))
    except (ValueError, OSError):
        return str(path)


@dataclass
class Document:
    """A loaded YAML document: plain data plus the round-trip tree that knows positions.

    Documents loaded by the fast path have no round-trip tree until a position is asked
    for (an error or a warning to report); :meth:`round_trip` then parses ``text`` once.
    """

    display: str
    data: Any
    raw: Any = None
    path: Path | None = None
    text: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: ``raw`` is still to be parsed from ``text`` (fast-path documents)
    lazy: bool = field(default=False, repr=False, compare=False)

    def round_trip(self) -> Any:
        """The round-trip tree (parsed on first use for fast-path documents)."""
        if self.lazy:
            self.lazy = False
            try:
                self.raw = _round_trip_load(self.text)
            except Exception:  # the fast path accepted it; positions then fall back to 1:1
                self.raw = None
        return self.raw

    def position(self, path: Sequence[PathKey]) -> tuple[int, int]:
        """1-based (line, column) of the key at ``path``, or of its closest existing ancestor."""
        node = self.round_trip()
        best = (1, 1)
        lc_root = getattr(node, "lc", None)
        if isinstance(node, dict) and node and lc_root is not None:
            try:  # the document's first key: comments above it are not the problem
                line, col = lc_root.key(next(iter(node)))
                best = (line + 1, col + 1)
            except Exception:
                pass
        for part in path:
            lc = getattr(node, "lc", None)
            try:
                if isinstance(part, int) and isinstance(node, list):
                    if lc is not None:
                        line, col = lc.item(part)
                        best = (line + 1, col + 1)
                    node = node[part]
                elif isinstance(node, dict) and part in node:
                    if lc is not None:
                        line, col = lc.key(part)
                        best = (line + 1, col + 1)
                    node = node[part]
                else:
                    break
            except (KeyError, IndexError, TypeError, AttributeError):
                break
        return best

    def issue(self, path: Sequence[PathKey], dotted_path: str, message: str, hint: str | None = None,
              severity: str = "error") -> ConfigIssue:
        line, col = self.position(path)
        return ConfigIssue(self.display, line, col, dotted_path, message, hint, severity)


def _fail(display: str, message: str, hint: str | None = None, line: int = 0, col: int = 0) -> ConfigValidationError:
    return ConfigValidationError([ConfigIssue(display, line, col, "", message, hint)])


def read_text(path: Path, display: str, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The file's text, or a clean error for missing, special, huge, binary or non-UTF-8 files."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise _fail(display, "file not found", "check the path, or run tau run validate --config <file>") from None
    except OSError as exc:
        raise _fail(display, f"cannot read file: {exc.strerror or exc}") from None
    if path.is_dir():
        raise _fail(display, "is a directory, not a config file", "pass the YAML file inside it with --config")
    if not path.is_file():
        raise _fail(display, "is not a regular file")
    if st.st_size > max_bytes:
        raise _fail(display, f"file is {st.st_size} bytes; config files are limited to {max_bytes} bytes",
                    "keep large content out of the config (use run.source or storage.image_assets)")
    try:
        with open(path, "rb") as fh:
            blob = fh.read(max_bytes + 1)
    except OSError as exc:
        raise _fail(display, f"cannot read file: {exc.strerror or exc}") from None
    if len(blob) > max_bytes:
        raise _fail(display, f"file is larger than {max_bytes} bytes")
    if b"\x00" in blob:
        raise _fail(display, "file contains binary data (NUL bytes), not YAML text")
    try:
        text = blob.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = blob[: exc.start].count(b"\n") + 1
        raise _fail(display, f"file is not valid UTF-8 (byte {exc.start})", "save the file as UTF-8", line, 1) \
            from None
    return text


def _tab_issue(text: str, display: str) -> ConfigValidationError | None:
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip(" ")
        if stripped.startswith("\t"):
            return _fail(display, "tab character in indentation; YAML indentation must use spaces",
                         "replace the tabs with spaces", lineno, len(line) - len(stripped) + 1)
    return None


def _round_trip_load(text: str) -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt", pure=True)
    yaml.allow_duplicate_keys = False
    return yaml.load(text)


def parse_yaml(text: str, display: str, *, path: Path | None = None) -> Document:
    """Parse one YAML document; positions are available through :meth:`Document.position`.

    Plain documents take the libyaml fast path (:mod:`tau_core.config._fastyaml`); anything
    else, and every error, goes through the round-trip loader, which names line and column.
    """
    from tau_core.config._fastyaml import TooManyValues, check_value_count, fast_load

    try:
        ok, data = fast_load(text, max_nodes=MAX_NODES, max_depth=MAX_DEPTH)
        if not ok:
            check_value_count(text, MAX_NODES)
    except TooManyValues:
        raise _fail(display, f"the document holds more than {MAX_NODES} values",
                    "keep long lists out of the config (read them from a file the run opens)") from None
    if ok:
        return Document(display=display, data=data, path=path, text=text, lazy=True)
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        raw = _round_trip_load(text)
    except MarkedYAMLError as exc:
        tab = _tab_issue(text, display)
        if tab is not None:
            raise tab from None
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        hint = None
        if "duplicate key" in problem or type(exc).__name__ == "DuplicateKeyError":
            problem = "duplicate key " + _dup_key(exc)
            hint = "each key may appear only once in a mapping; remove or merge the repeated key"
        elif "expected a single document" in problem or "but found another document" in problem:
            problem = "the file holds more than one YAML document; a config is a single document"
            hint = "remove the extra '---' separators"
        else:
            problem = f"invalid YAML: {problem}"
            hint = "check quoting and indentation near this position"
        raise _fail(display, problem, hint, line, col) from None
    except YAMLError as exc:
        raise _fail(display, f"invalid YAML: {' '.join(str(exc).split())[:200]}") from None
    except RecursionError:
        raise _fail(display, f"YAML nesting is deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # int() of a number past the interpreter's digit limit, and the like
        line = _long_number_line(text)
        raise _fail(display, "a number in the file is too long" if line else f"invalid value: {exc}",
                    f"numbers are limited to {MAX_INT_DIGITS} digits", line, 1 if line else 0) from None
    doc = Document(display=display, data=None, raw=raw, path=path, text=text)
    doc.data = _plain(raw, doc, (), [0], set(), 0)
    return doc


def _long_number_line(text: str) -> int:
    """The line of the first run of more than ``MAX_INT_DIGITS`` digits (0 when there is none)."""
    import re

    m = re.search(r"[0-9_]{" + str(MAX_INT_DIGITS + 1) + ",}", text)
    return text.count("\n", 0, m.start()) + 1 if m else 0


def _dup_key(exc: Any) -> str:
    text = str(getattr(exc, "problem", "") or "")
    # ruamel: 'found duplicate key "x" with value ...'
    if '"' in text:
        return '"' + text.split('"')[1] + '"'
    return ""


def _plain(node: Any, doc: Document, path: tuple[PathKey, ...], count: list[int], stack: set[int],
           depth: int) -> Any:
    """Convert a round-trip tree to plain values, bounding size, depth and alias cycles."""
    count[0] += 1
    if count[0] > MAX_NODES:
        raise _fail(doc.display, f"the document expands to more than {MAX_NODES} values (YAML aliases?)",
                    "remove the anchors/aliases that multiply the document")
    if depth > MAX_DEPTH:
        line, col = doc.position(path)
        raise _fail(doc.display, f"YAML nesting is deeper than {MAX_DEPTH} levels", None, line, col)
    if isinstance(node, dict):
        if id(node) in stack:
            line, col = doc.position(path)
            raise _fail(doc.display, "recursive YAML alias", "remove the self-referencing anchor", line, col)
        stack.add(id(node))
        out: dict[str, Any] = {}
        for key, value in node.items():
            if not isinstance(key, str):
                line, col = _key_position(node, key)
                raise _fail(doc.display, f"mapping key {key!r} is not a string",
                            "quote the key, for example \"1\": value", line, col)
            _check_text(key, doc, (*path, key))
            out[str(key)] = _plain(value, doc, (*path, key), count, stack, depth + 1)
        stack.discard(id(node))
        return out
    if isinstance(node, list):
        if id(node) in stack:
            line, col = doc.position(path)
            raise _fail(doc.display, "recursive YAML alias", "remove the self-referencing anchor", line, col)
        stack.add(id(node))
        items = [_plain(v, doc, (*path, i), count, stack, depth + 1) for i, v in enumerate(node)]
        stack.discard(id(node))
        return items
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        if len(str(abs(int(node)))) > MAX_INT_DIGITS:
            line, col = doc.position(path)
            raise _fail(doc.display, f"the number at {dotted_path(path)} has more than {MAX_INT_DIGITS} digits",
                        "use a value that fits in 64 bits", line, col)
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        _check_text(node, doc, path)
        return str(node)
    if isinstance(node, (_dt.date, _dt.datetime)):
        return node.isoformat()
    if isinstance(node, (bytes, bytearray)):
        line, col = doc.position(path)
        raise _fail(doc.display, "binary YAML values are not supported", None, line, col)
    return str(node)


def dotted_path(path: Sequence[PathKey]) -> str:
    from tau_core.config.issues import dotted

    return dotted(path) or "the top level"


def _check_text(text: str, doc: Document, path: tuple[PathKey, ...]) -> None:
    """Reject strings that cannot be encoded (lone UTF-16 surrogates from escapes such as "\\ud800")."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        line, col = doc.position(path)
        raise _fail(doc.display, "text contains an invalid Unicode escape (a lone surrogate)",
                    "write the character itself, or a \\U escape for characters beyond U+FFFF", line, col) from None


def _key_position(node: Any, key: Any) -> tuple[int, int]:
    try:
        line, col = node.lc.key(key)
        return line + 1, col + 1
    except Exception:
        return 0, 0


def load_yaml_file(path: Path, *, display: str | None = None, max_bytes: int = MAX_FILE_BYTES) -> Document:
    """Read and parse ``path`` (one YAML document) with positions."""
    shown = display or display_path(path)
    text = read_text(path, shown, max_bytes=max_bytes)
    return parse_yaml(text, shown, path=path)


def require_mapping(doc: Document, what: str = "config") -> dict[str, Any]:
    """The document's top level as a mapping (an empty file is an empty mapping)."""
    if doc.data is None:
        return {}
    if not isinstance(doc.data, dict):
        kind = type(doc.data).__name__
        kind = {"list": "a list", "str": "a string", "int": "a number", "float": "a number",
                "bool": "a boolean"}.get(kind, kind)
        raise _fail(doc.display, f"the top level of a {what} must be a mapping of keys, not {kind}",
                    "start the file with keys such as 'name:'", 1, 1)
    return doc.data
