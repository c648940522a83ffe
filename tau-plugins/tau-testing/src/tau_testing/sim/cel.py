"""A small CEL interpreter for CRD ``x-kubernetes-validations`` rules.

It covers what the Kueue and KubeRay CRDs use: ``self``/``oldSelf`` field access, ``has()``, ``size()``,
the ``all``/``exists``/``exists_one``/``filter``/``map`` macros, ``in``, comparisons, arithmetic, ``&&``,
``||``, ``!``, the ternary operator, list and map literals, and the string methods ``startsWith``,
``endsWith``, ``contains`` and ``matches``. A rule that does not parse, or whose evaluation hits something
outside this subset (or a missing field), is skipped rather than failed: the simulator never rejects an object
because of its own limits.
"""

from __future__ import annotations

import re
from typing import Any


class CelError(Exception):
    """The evaluation failed (a missing field, a type mismatch, ...)."""


class CelUnsupported(CelError):
    """The expression is outside the subset this interpreter understands."""


_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>\d+\.\d+|\d+)
  | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>&&|\|\||==|!=|<=|>=|[-+*/%!<>?:.,()\[\]{}])
""", re.VERBOSE)


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise CelUnsupported(f"unexpected character {text[pos]!r}")
        pos = m.end()
        kind = m.lastgroup
        value = m.group()
        if kind == "ws":
            continue
        if kind == "num":
            out.append(("lit", float(value) if "." in value else int(value)))
        elif kind == "str":
            out.append(("lit", bytes(value[1:-1], "utf-8").decode("unicode_escape")))
        elif kind == "id" and value in ("true", "false", "null"):
            out.append(("lit", {"true": True, "false": False, "null": None}[value]))
        elif kind == "id" and value == "in":
            out.append(("op", "in"))
        else:
            out.append((kind or "op", value))
    out.append(("end", None))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self) -> tuple[str, Any]:
        return self.tokens[self.pos]

    def take(self, value: str | None = None) -> tuple[str, Any]:
        token = self.tokens[self.pos]
        if value is not None and token[1] != value:
            raise CelUnsupported(f"expected {value!r}, found {token[1]!r}")
        self.pos += 1
        return token

    def parse(self) -> Any:
        node = self.ternary()
        if self.peek()[0] != "end":
            raise CelUnsupported(f"unexpected {self.peek()[1]!r}")
        return node

    def ternary(self) -> Any:
        cond = self.binary(0)
        if self.peek() == ("op", "?"):
            self.take()
            yes = self.ternary()
            self.take(":")
            no = self.ternary()
            return ("?", cond, yes, no)
        return cond

    LEVELS = (("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> Any:
        if level == len(self.LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek()[0] == "op" and self.peek()[1] in self.LEVELS[level]:
            op = self.take()[1]
            left = ("bin", op, left, self.binary(level + 1))
        return left

    def unary(self) -> Any:
        if self.peek() in (("op", "!"), ("op", "-")):
            op = self.take()[1]
            return ("un", op, self.unary())
        return self.member()

    def args(self) -> list[Any]:
        self.take("(")
        out: list[Any] = []
        if self.peek() != ("op", ")"):
            out.append(self.ternary())
            while self.peek() == ("op", ","):
                self.take()
                out.append(self.ternary())
        self.take(")")
        return out

    def member(self) -> Any:
        node = self.primary()
        while True:
            if self.peek() == ("op", "."):
                self.take()
                kind, name = self.take()
                if kind != "id":
                    raise CelUnsupported("expected a field name")
                if self.peek() == ("op", "("):
                    node = ("call", name, node, self.args())
                else:
                    node = ("field", node, name)
            elif self.peek() == ("op", "["):
                self.take()
                index = self.ternary()
                self.take("]")
                node = ("index", node, index)
            else:
                return node

    def primary(self) -> Any:
        kind, value = self.take()
        if kind == "lit":
            return ("lit", value)
        if kind == "id":
            if self.peek() == ("op", "("):
                return ("call", value, None, self.args())
            return ("var", value)
        if value == "(":
            node = self.ternary()
            self.take(")")
            return node
        if value == "[":
            items: list[Any] = []
            if self.peek() != ("op", "]"):
                items.append(self.ternary())
                while self.peek() == ("op", ","):
                    self.take()
                    items.append(self.ternary())
            self.take("]")
            return ("list", items)
        if value == "{":
            pairs: list[tuple[Any, Any]] = []
            while self.peek() != ("op", "}"):
                key = self.ternary()
                self.take(":")
                pairs.append((key, self.ternary()))
                if self.peek() == ("op", ","):
                    self.take()
            self.take("}")
            return ("map", pairs)
        raise CelUnsupported(f"unexpected {value!r}")


_CACHE: dict[str, Any] = {}


def compile_rule(rule: str) -> Any:
    if rule not in _CACHE:
        try:
            _CACHE[rule] = _Parser(rule).parse()
        except CelError as exc:
            _CACHE[rule] = CelUnsupported(str(exc))
    node = _CACHE[rule]
    if isinstance(node, CelError):
        raise node
    return node


def uses_old_self(rule: str) -> bool:
    return re.search(r"\boldSelf\b", rule) is not None


_MACROS = {"all", "exists", "exists_one", "filter", "map"}


def evaluate(node: Any, env: dict[str, Any]) -> Any:
    tag = node[0]
    if tag == "lit":
        return node[1]
    if tag == "var":
        if node[1] not in env:
            raise CelUnsupported(f"undeclared reference to {node[1]!r}")
        return env[node[1]]
    if tag == "list":
        return [evaluate(n, env) for n in node[1]]
    if tag == "map":
        return {evaluate(k, env): evaluate(v, env) for k, v in node[1]}
    if tag == "field":
        target = evaluate(node[1], env)
        if isinstance(target, dict) and node[2] in target:
            value = target[node[2]]
            if isinstance(value, CelError):  # a variable whose evaluation failed
                raise value
            return value
        raise CelError(f"no such key: {node[2]}")
    if tag == "index":
        target = evaluate(node[1], env)
        index = evaluate(node[2], env)
        try:
            return target[index]
        except (KeyError, IndexError, TypeError) as exc:
            raise CelError(f"no such key: {index}") from exc
    if tag == "un":
        value = evaluate(node[2], env)
        if node[1] == "!":
            if not isinstance(value, bool):
                raise CelError("! needs a bool")
            return not value
        return -value
    if tag == "?":
        cond = evaluate(node[1], env)
        if not isinstance(cond, bool):
            raise CelError("?: needs a bool condition")
        return evaluate(node[2] if cond else node[3], env)
    if tag == "bin":
        return _binary(node[1], node[2], node[3], env)
    if tag == "call":
        return _call(node[1], node[2], node[3], env)
    raise CelUnsupported(f"unsupported node {tag}")


def _binary(op: str, left_node: Any, right_node: Any, env: dict[str, Any]) -> Any:
    if op in ("&&", "||"):
        # CEL's commutative logic: an error on one side is absorbed when the other side decides
        try:
            left: Any = evaluate(left_node, env)
        except CelError as exc:
            left = exc
        if op == "&&" and left is False:
            return False
        if op == "||" and left is True:
            return True
        right = evaluate(right_node, env)
        if op == "&&" and right is False:
            return False
        if op == "||" and right is True:
            return True
        if isinstance(left, CelError):
            raise left
        return right
    left = evaluate(left_node, env)
    right = evaluate(right_node, env)
    try:
        if op == "==":
            return left == right
        if op == "!=":
            return left != right
        if op == "in":
            return left in right
        if op == "<":
            return left < right
        if op == "<=":
            return left <= right
        if op == ">":
            return left > right
        if op == ">=":
            return left >= right
        if op == "+":
            return left + right
        if op == "-":
            return left - right
        if op == "*":
            return left * right
        if op == "/":
            return left // right if isinstance(left, int) and isinstance(right, int) else left / right
        if op == "%":
            return left % right
    except (TypeError, ZeroDivisionError) as exc:
        raise CelError(str(exc)) from exc
    raise CelUnsupported(f"unsupported operator {op}")


def _has(arg: Any, env: dict[str, Any]) -> bool:
    if arg[0] != "field":
        raise CelUnsupported("has() needs a field selection")
    target = evaluate(arg[1], env)
    return isinstance(target, dict) and arg[2] in target


def _call(name: str, target_node: Any, args: list[Any], env: dict[str, Any]) -> Any:
    if target_node is None:
        if name == "has" and len(args) == 1:
            return _has(args[0], env)
        values = [evaluate(a, env) for a in args]
        if name == "size" and len(values) == 1:
            return _size(values[0])
        if name == "int" and len(values) == 1:
            return int(values[0])
        if name == "string" and len(values) == 1:
            return str(values[0])
        raise CelUnsupported(f"unsupported function {name}")
    if name in _MACROS:
        target = evaluate(target_node, env)
        if len(args) != 2 or args[0][0] != "var":
            raise CelUnsupported(f"{name}() needs a variable and an expression")
        var = args[0][1]
        items = list(target.keys()) if isinstance(target, dict) else target
        if not isinstance(items, list):
            raise CelError(f"{name}() needs a list or map")

        def test(item: Any) -> Any:
            return evaluate(args[1], {**env, var: item})

        if name == "all":
            return all(_bool(test(i)) for i in items)
        if name == "exists":
            return any(_bool(test(i)) for i in items)
        if name == "exists_one":
            return sum(1 for i in items if _bool(test(i))) == 1
        if name == "filter":
            return [i for i in items if _bool(test(i))]
        return [test(i) for i in items]
    target = evaluate(target_node, env)
    values = [evaluate(a, env) for a in args]
    if name == "size" and not values:
        return _size(target)
    if isinstance(target, str) and len(values) == 1 and isinstance(values[0], str):
        if name == "startsWith":
            return target.startswith(values[0])
        if name == "endsWith":
            return target.endswith(values[0])
        if name == "contains":
            return values[0] in target
        if name == "matches":
            return re.search(values[0], target) is not None
    raise CelUnsupported(f"unsupported method {name}")


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise CelError("a macro predicate must be a bool")
    return value


def _size(value: Any) -> int:
    if isinstance(value, (str, list, dict)):
        return len(value)
    raise CelError("size() needs a string, list or map")


def check(rule: str, value: Any, old: Any = None, has_old: bool = False) -> bool | None:
    """True/False for a rule that evaluates; None when it is skipped (transition rule without an old value,
    or outside the supported subset)."""
    if uses_old_self(rule) and not has_old:
        return None
    try:
        node = compile_rule(rule)
        env = {"self": value}
        if has_old:
            env["oldSelf"] = old
        result = evaluate(node, env)
    except (CelError, RecursionError, ValueError, TypeError):
        return None
    return result if isinstance(result, bool) else None
