"""Shared, import-light helpers for ``taugrid-portal`` commands (also used by ``stellar.cli``).

* :func:`store_option` adds ``--store DIR`` to a command;
* :func:`open_store` resolves it (``--store`` / ``TAU_EXP_STORE`` / ``TAU_EXP_STORE_ROOT``) and opens it;
* :func:`emit_rows` prints rows as ``table``, ``json``, ``jsonl`` or ``csv``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from tau_core.output import emit, render_table, to_json

F = TypeVar("F", bound=Callable[..., Any])
PROG = "taugrid-portal"


def store_option(func: F) -> F:
    return click.option(
        "--store", "store", metavar="DIR", default=None,
        help="Experiment store directory (default: $TAU_EXP_STORE, or $TAU_EXP_STORE_ROOT/"
        "$TAU_CONTEXT/$TAU_TEAM/$TAU_PROJECT).",
    )(func)


def json_flag(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Shorthand for -o json.")(func)


def open_store(store: str | None) -> Any:
    """Open the resolved store (``NotFoundError`` with an ``init`` hint when it does not exist)."""
    from taugrid_portal.store import ExperimentStore, resolve_store

    s = ExperimentStore.open(resolve_store(store))
    for w in s.warnings:
        from tau_core.output import warning

        warning(w)
    s.warnings.clear()
    return s


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(_cell(v) for v in value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def emit_rows(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str],
    output: str,
    *,
    document: Any = None,
    empty: str = "(none)",
) -> None:
    """``table``/``csv`` use ``columns``; ``json`` prints ``document`` (or the rows); ``jsonl`` one row a line."""
    out = _Echo()
    if output == "json":
        out.write(to_json(rows if document is None else document) + "\n")
    elif output == "jsonl":
        for row in rows:
            out.write(json.dumps(row, default=str, sort_keys=False) + "\n")
    elif output == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for row in rows:
            w.writerow([_cell(row.get(c)) for c in columns])
        out.write(buf.getvalue())
    else:
        if not rows:
            out.write(empty + "\n")
            return
        out.write(render_table([[_cell(r.get(c)) for c in columns] for r in rows], columns) + "\n")


class _Echo:
    """Writes through click.echo so output is flushed to whatever stdout is current."""

    def write(self, text: str) -> None:
        click.echo(text, nl=False)


def field_table(pairs: Sequence[tuple[str, Any]]) -> str:
    return render_table([[k, _cell(v)] for k, v in pairs], ["FIELD", "VALUE"])


def emit_doc(data: Any, output: str, table: Callable[[Any], str]) -> None:
    emit(data, "json" if output == "json" else "table", table=table)
