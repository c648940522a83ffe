"""A tiny, explicit KQL subset, translated to SQLite: only the shapes Tau's queries use.

A query is ``Table | op | op ...``; each operator wraps the previous step in a SQL subquery:

* ``where C OP LIT`` (``==`` ``!=`` ``<`` ``<=`` ``>`` ``>=``), ``where C in (LIT, ...)``, ``where C > ago(7d)``,
  ``where C startswith LIT`` (case-insensitive, as in Kusto), ``where C matches regex LIT`` (Python ``re``);
  several predicates joined by ``and``.  LIT is a double- or single-quoted string or a number.
* ``extend N = tostring(C.key)`` (a key of a dynamic column).
* ``summarize arg_max(C, *) by K1, K2`` (the query-time dedup), ``summarize count() by K...``, ``count``, and
  named aggregates ``summarize N=sum(C), N=avg(C), N=min(C), N=max(C), N=count(), N=countif(isnotnull(C)) by K...``.
* ``project C1, C2``, ``order by C [asc|desc], ...`` (``sort by`` too), ``take N`` / ``limit N``.

The source is a table, or ``F()``: a function created with ``.create-or-alter function F() { BODY }`` whose
BODY is itself a query of this subset over a table; the call is expanded in place (no parameters, one level).

Anything else raises :class:`~tau_testing.kusto.store.KustoFakeError` (a ``BadRequest_SyntaxError``), so a
query outside the subset fails loudly instead of answering something plausible.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from .store import KustoFakeError, Store, from_cell, norm_time

_STRING = r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\''
_PIPE = re.compile(rf"({_STRING})|\|")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_LIT = rf"(?:{_STRING}|-?\d+(?:\.\d+)?)"
_CMP = re.compile(rf"^({_IDENT})\s*(==|!=|<=|>=|<|>)\s*({_LIT}|ago\(\s*\d+(?:\.\d+)?[dhms]\s*\))$")
_MATCHES = re.compile(rf"^({_IDENT})\s+matches\s+regex\s+({_STRING})$")
_STARTS = re.compile(rf"^({_IDENT})\s+startswith\s+({_STRING})$")
_IN = re.compile(rf"^({_IDENT})\s+in\s*\(\s*({_LIT}(?:\s*,\s*{_LIT})*)\s*\)$")
_EXTEND = re.compile(rf"^extend\s+({_IDENT})\s*=\s*tostring\(\s*({_IDENT})\.({_IDENT})\s*\)$")
_ARGMAX = re.compile(rf"^summarize\s+arg_max\(\s*({_IDENT})\s*,\s*\*\s*\)\s+by\s+(.+)$")
_COUNT_BY = re.compile(r"^summarize\s+count\(\)(?:\s+by\s+(.+))?$")
_AGG = re.compile(rf"^({_IDENT})\s*=\s*(sum|avg|min|max|count|countif)\(\s*(?:isnotnull\(\s*)?({_IDENT})?\s*\)?\s*\)$")
_AGG_SQL = {"sum": "SUM", "avg": "AVG", "min": "MIN", "max": "MAX"}
_CALL = re.compile(rf"^({_IDENT})\(\s*\)$")
_ORDER = re.compile(r"^(?:order|sort)\s+by\s+(.+)$")
_TAKE = re.compile(r"^(?:take|limit)\s+(\d+)$")
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def split_pipes(query: str) -> list[str]:
    parts, start = [], 0
    for m in _PIPE.finditer(query):
        if m.group(1) is None:
            parts.append(query[start:m.start()])
            start = m.end()
    parts.append(query[start:])
    return [" ".join(p.split()) for p in parts]


def _literal(text: str) -> Any:
    if text[0] == '"':
        return json.loads(text)
    if text[0] == "'":
        return re.sub(r"\\(.)", r"\1", text[1:-1])
    return float(text) if "." in text else int(text)


@attrs.define
class Step:
    """The SQL of the pipeline so far, its parameters and its output columns (name -> Kusto type)."""

    sql: str
    params: list[Any]
    columns: dict[str, str]

    def select(self, extra: str = "") -> str:
        return ", ".join([f'"{c}"' for c in self.columns] + ([extra] if extra else []))

    def need(self, name: str) -> str:
        if name not in self.columns:
            raise KustoFakeError(f"Failed to resolve scalar expression named '{name}'", "SEM0100")
        return name


def _names(text: str, step: Step) -> list[str]:
    return [step.need(n.strip()) for n in text.split(",")]


def _where(body: str, step: Step) -> Step:
    clauses, params = [], list(step.params)
    for pred in re.split(r"\s+and\s+", body):
        m, mi, ms, mr = _CMP.match(pred), _IN.match(pred), _STARTS.match(pred), _MATCHES.match(pred)
        if mr:
            clauses.append(f'kql_matches_regex(?, "{step.need(mr.group(1))}")')
            params.append(str(_literal(mr.group(2))))
        elif ms:  # case-insensitive, as Kusto's startswith
            prefix = str(_literal(ms.group(2)))
            clauses.append(f'lower("{step.need(ms.group(1))}") LIKE ? ESCAPE \'\\\'')
            params.append(re.sub(r"([%_\\])", r"\\\1", prefix.lower()) + "%")
        elif m:
            col, op, raw = step.need(m.group(1)), m.group(2), m.group(3)
            value: Any
            if raw.startswith("ago("):
                amount = raw[4:-1].strip()
                value = norm_time(datetime.now(UTC) - timedelta(seconds=float(amount[:-1]) * _UNITS[amount[-1]]))
            else:
                value = _literal(raw)
                if step.columns[col] == "datetime":
                    value = norm_time(value)
            clauses.append(f'"{col}" {"=" if op == "==" else op} ?')
            params.append(value)
        elif mi:
            col = step.need(mi.group(1))
            values = [_literal(v.strip()) for v in re.findall(_LIT, mi.group(2))]
            clauses.append(f'"{col}" IN ({", ".join("?" * len(values))})')
            params += values
        else:
            raise KustoFakeError(f"unsupported predicate in the loopback KQL subset: {pred!r}")
    return Step(f"SELECT {step.select()} FROM ({step.sql}) WHERE {' AND '.join(clauses)}", params, step.columns)


def _operator(op: str, step: Step) -> Step:
    if op.startswith("where "):
        return _where(op[6:], step)
    if m := _EXTEND.match(op):
        name, col, key = m.group(1), step.need(m.group(2)), m.group(3)
        cols = {k: v for k, v in step.columns.items() if k != name}
        expr = f"coalesce(json_extract(\"{col}\", '$.{key}'), '') AS \"{name}\""
        sql = f"SELECT {Step('', [], cols).select(expr)} FROM ({step.sql})"
        return Step(sql, step.params, {**cols, name: "string"})
    if m := _ARGMAX.match(op):
        by = ", ".join(f'"{k}"' for k in _names(m.group(2), step))
        inner = f"SELECT *, ROW_NUMBER() OVER (PARTITION BY {by} ORDER BY \"{step.need(m.group(1))}\" DESC) AS __rn " \
                f"FROM ({step.sql})"
        return Step(f"SELECT {step.select()} FROM ({inner}) WHERE __rn = 1", step.params, step.columns)
    if op.startswith("summarize ") and "=" in op.split(" by ", 1)[0]:
        return _aggregate(op[len("summarize "):], step)
    if op == "count" or (m := _COUNT_BY.match(op)):
        keys: list[str] = _names(m.group(1), step) if op != "count" and m and m.group(1) else []
        cols = {k: step.columns[k] for k in keys}
        group = f" GROUP BY {', '.join(chr(34) + k + chr(34) for k in keys)}" if keys else ""
        sel = Step("", [], cols).select('COUNT(*) AS "Count"' if op == "count" else 'COUNT(*) AS "count_"')
        return Step(f"SELECT {sel} FROM ({step.sql}){group}", step.params,
                    {**cols, ("Count" if op == "count" else "count_"): "long"})
    if op.startswith("project "):
        keep = _names(op[8:], step)
        cols = {k: step.columns[k] for k in keep}
        return Step(f"SELECT {Step('', [], cols).select()} FROM ({step.sql})", step.params, cols)
    if m := _ORDER.match(op):
        terms = []
        for term in m.group(1).split(","):
            name, _, direction = term.strip().partition(" ")
            terms.append(f'"{step.need(name)}" {"ASC" if direction.strip() == "asc" else "DESC"}')
        return Step(f"SELECT {step.select()} FROM ({step.sql}) ORDER BY {', '.join(terms)}", step.params, step.columns)
    if m := _TAKE.match(op):
        return Step(f"SELECT {step.select()} FROM ({step.sql}) LIMIT {int(m.group(1))}", step.params, step.columns)
    raise KustoFakeError(f"unsupported operator in the loopback KQL subset: {op!r}")


def _aggregate(body: str, step: Step) -> Step:
    """``N=agg(C), ... [by K, ...]``: one SQL ``GROUP BY``; ``countif(isnotnull(C))`` counts non-null values."""
    aggs, _, by = body.partition(" by ")
    keys = _names(by, step) if by.strip() else []
    cols = {k: step.columns[k] for k in keys}
    exprs = []
    for term in re.split(r",\s*(?![^()]*\))", aggs):
        m = _AGG.match(term.strip())
        if m is None or (m.group(2) != "count" and m.group(3) is None) or \
                (m.group(2) == "countif" and "isnotnull" not in term):
            raise KustoFakeError(f"unsupported aggregate in the loopback KQL subset: {term.strip()!r}")
        name, func, col = m.group(1), m.group(2), m.group(3)
        if func == "count":
            exprs.append(f'COUNT(*) AS "{name}"')
            cols[name] = "long"
        elif func == "countif":
            exprs.append(f'COUNT("{step.need(col)}") AS "{name}"')
            cols[name] = "long"
        else:
            exprs.append(f'{_AGG_SQL[func]}("{step.need(col)}") AS "{name}"')
            cols[name] = "real" if func == "avg" else step.columns[col]
    group = f" GROUP BY {', '.join(chr(34) + k + chr(34) for k in keys)}" if keys else ""
    select = ", ".join([f'"{k}"' for k in keys] + exprs)
    return Step(f"SELECT {select} FROM ({step.sql}){group}", step.params, cols)


def _function_body(command: str) -> str:
    """The body of a recorded ``.create-or-alter function F() { BODY }`` command."""
    start, end = command.find("{"), command.rfind("}")
    if start < 0 or end < start:
        raise KustoFakeError("a recorded function has no body", "SEM0100")
    return command[start + 1:end]


def _expand(parts: list[str], functions: dict[str, str]) -> list[str]:
    m = _CALL.match(parts[0].strip())
    if m is None:
        return parts
    if m.group(1) not in functions:
        raise KustoFakeError(f"'{m.group(1)}' could not be resolved to a function", "SEM0100")
    body = [ln for ln in _function_body(functions[m.group(1)]).splitlines() if not ln.strip().startswith("//")]
    inner = split_pipes("\n".join(body))
    if _CALL.match(inner[0].strip()):
        raise KustoFakeError("the loopback endpoint expands one level of function calls only")
    return inner + parts[1:]


def run_query(store: Store, query: str,
              functions: dict[str, str] | None = None) -> tuple[list[tuple[str, str]], list[list[Any]]]:
    """(columns, rows) of a query in the subset; ``functions`` maps a function name to its creating command."""
    lines = [ln for ln in query.splitlines() if not ln.strip().startswith("//")]
    parts = _expand(split_pipes("\n".join(lines)), functions or {})
    source = parts[0].strip()
    if not re.fullmatch(_IDENT, source):
        raise KustoFakeError(f"the loopback endpoint queries one table by name, got {source!r}")
    table = store.table(source)
    cols = dict(table.columns)
    step = Step(f'SELECT {Step("", [], cols).select()} FROM "{source}"', [], cols)
    for op in parts[1:]:
        step = _operator(op, step)
    rows = store.sql(step.sql, step.params)
    kinds = list(step.columns.items())
    return kinds, [[from_cell(k, v) for (_, k), v in zip(kinds, row, strict=True)] for row in rows]
