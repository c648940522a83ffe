"""The one place where commands produce output.

* Tables for humans, ``-o json`` / ``-o yaml`` for machines (:func:`emit`).
* Progress, warnings and errors on stderr, so stdout stays parseable.
* Colour only on a TTY and never when ``NO_COLOR`` is set.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
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
    click.echo(style("error:", sys.stderr, fg="red", bold=True) + " " + message, err=True)
    if hint:
        click.echo(style("hint:", sys.stderr, fg="cyan") + " " + hint, err=True)


def lines(items: Iterable[str]) -> str:
    return "\n".join(items)
