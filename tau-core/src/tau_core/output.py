"""The one place where commands produce output.

* Tables for humans, ``-o json`` / ``-o yaml`` for machines (:func:`emit`).
* Progress, warnings and errors on stderr, so stdout stays parseable.
* Colour only on a TTY and never when ``NO_COLOR`` is set.
* Every string reaching a terminal passes :func:`sanitize` (installed at the CLI edge by
  :func:`terminal_guard`): control characters from input or from the cluster are shown in caret
  notation, never written raw, and echoed input is clipped (:func:`clip`).
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

FORMATS = ("table", "json", "yaml")


def output_option(*formats: str, default: str | None = None) -> Callable[[F], F]:
    """The shared ``-o/--output`` option."""
    choices = formats or FORMATS
    return click.option(
        "-o",
        "--output",
        "output",
        type=click.Choice(choices),
        default=default or choices[0],
        show_default=True,
        help="Output format: " + ", ".join(choices) + ".",
    )


#: C0 controls except tab and newline, DEL, and the C1 range (0x9b is a one-byte CSI).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: Colour (SGR) sequences: the only escape sequences passed through, and only to a colour TTY.
_SGR = re.compile(r"\x1b\[[0-9;]{0,32}m")
CLIP_DEFAULT = 200


def _caret(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if code < 0x20:
        return "^" + chr(code + 0x40)
    return "^?" if code == 0x7F else f"\\x{code:02x}"


def sanitize(text: str, *, keep_color: bool = False) -> str:
    """``text`` without raw control bytes: ESC, BEL, CR, C1... become visible caret notation.

    ``keep_color`` passes plain SGR colour sequences (``ESC [ 1;31 m``) through unchanged; they
    can change colours only, never the title, the screen, the clipboard or the cursor.
    """
    text = text.replace("\r\n", "\n")
    if not keep_color or "\x1b" not in text:
        return _CONTROL.sub(_caret, text)
    out, pos = [], 0
    for m in _SGR.finditer(text):
        out.append(_CONTROL.sub(_caret, text[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_CONTROL.sub(_caret, text[pos:]))
    return "".join(out)


def clip(text: Any, limit: int = CLIP_DEFAULT) -> str:
    """Echoed input shortened to ``limit`` characters (with the full length noted)."""
    s = str(text)
    return s if len(s) <= limit else f"{s[:limit]}... ({len(s)} characters)"


class TerminalGuard:
    """A text stream wrapper that sanitises everything written through it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._keep_color = use_color(stream)

    @property
    def unguarded(self) -> TextIO:
        return self._stream

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError("TerminalGuard writes text only")
        self._stream.write(sanitize(text, keep_color=self._keep_color))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def terminal_guard() -> Iterator[None]:
    """Route ``sys.stdout``/``sys.stderr`` through :class:`TerminalGuard` for one command.

    Binary output (``sys.stdout.buffer``, e.g. ``tau run get -o raw``) is not touched.
    """
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, TerminalGuard) and sys.stdout is not None:
        sys.stdout = TerminalGuard(sys.stdout)
    if not isinstance(sys.stderr, TerminalGuard) and sys.stderr is not None:
        sys.stderr = TerminalGuard(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def clear_screen() -> None:
    """Clear a TTY (``--watch``): the one escape sequence tau writes on purpose."""
    stream = sys.stdout
    raw = stream.unguarded if isinstance(stream, TerminalGuard) else stream
    if is_tty(raw):
        raw.write("\x1b[H\x1b[2J")
        raw.flush()


def is_tty(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def use_color(stream: TextIO | None = None) -> bool:
    """Colour is used only on a TTY, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR", "") != "":
        return False
    return is_tty(stream)


def style(text: str, stream: TextIO | None = None, **styles: Any) -> str:
    return click.style(text, **styles) if use_color(stream) else text


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False, default=_json_default)


def to_yaml(data: Any) -> str:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buf = io.StringIO()
    yaml.dump(json.loads(json.dumps(data, default=_json_default)), buf)
    return buf.getvalue()


def _json_default(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if hasattr(value, "__fspath__"):
        return os.fspath(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def render_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A plain, aligned table (kubectl style: upper-case headers, two-space gaps)."""
    cells = [[str(h).upper() for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in cells]
    return "\n".join(lines)


def emit(
    data: Any,
    output: str = "table",
    *,
    table: Callable[[Any], str] | None = None,
    stream: TextIO | None = None,
) -> None:
    """Write ``data`` to stdout as JSON, YAML, or the human form produced by ``table``."""
    stream = stream or sys.stdout
    if output == "json":
        text = to_json(data)
    elif output == "yaml":
        text = to_yaml(data).rstrip("\n")
    elif table is not None:
        text = table(data)
    else:
        text = str(data)
    stream.write(text + "\n")


def echo(text: str = "") -> None:
    click.echo(text)


def info(message: str) -> None:
    """Progress for humans, on stderr."""
    click.echo(message, err=True)


def warning(message: str) -> None:
    click.echo(style("warning:", sys.stderr, fg="yellow") + " " + message, err=True)


def error(message: str, hint: str | None = None) -> None:
    message = sanitize(clip(message, 2000))
    click.echo(style("error:", sys.stderr, fg="red", bold=True) + " " + message, err=True)
    if hint:
        click.echo(style("hint:", sys.stderr, fg="cyan") + " " + sanitize(clip(hint, 2000)), err=True)


def lines(items: Iterable[str]) -> str:
    return "\n".join(items)
