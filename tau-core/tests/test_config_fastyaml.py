"""The libyaml fast path loads exactly what the round-trip loader loads, or defers to it."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tau_core.config import _fastyaml
from tau_core.config.loader import MAX_DEPTH, MAX_NODES, _plain, _round_trip_load, parse_yaml

CORPUS = Path(__file__).parent / "corpus"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _slow(text: str) -> tuple[bool, Any]:
    """What the round-trip loader makes of ``text``: (True, plain data) or (False, None) on any error."""
    from tau_core.config.loader import Document

    try:
        raw = _round_trip_load(text)
        doc = Document(display="x.yaml", data=None, raw=raw, text=text)
        return True, _plain(raw, doc, (), [0], set(), 0)
    except Exception:
        return False, None


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _agree(text: str) -> bool:
    """Assert both fast tiers agree with the round-trip loader; True when the fast path took it."""
    ok, data = _fastyaml.fast_load(text, max_nodes=MAX_NODES, max_depth=MAX_DEPTH)
    screened = _screened(text)
    results = [(ok, data, "fast_load")]
    if screened:
        results.append((*_fastyaml.simple_load(text, max_nodes=MAX_NODES, max_depth=MAX_DEPTH), "simple"))
        results.append((*_fastyaml.libyaml_load(text, max_nodes=MAX_NODES, max_depth=MAX_DEPTH), "libyaml"))
    if not any(r[0] for r in results):
        return False
    slow_ok, slow = _slow(text)
    for tier_ok, tier_data, tier in results:
        if tier_ok:
            assert slow_ok, f"{tier} accepted what the round-trip loader rejects: {text!r}"
            assert _same(tier_data, slow), f"{text!r}: {tier} {tier_data!r} != round-trip {slow!r}"
    return ok


def _screened(text: str) -> bool:
    """The screening fast_load does before either tier."""
    if "\t" in text or "\x85" in text or "\u2028" in text or "\u2029" in text:
        return False
    return not _fastyaml._risky(text)


def test_libyaml_is_available() -> None:
    assert _fastyaml._loader_class(), "PyYAML with libyaml is a tau-core dependency"


@pytest.mark.parametrize("path", sorted(CORPUS.rglob("*.y*ml")) + sorted(EXAMPLES.rglob("*.y*ml")),
                         ids=lambda p: p.name)
def test_corpus_and_examples_agree(path: Path) -> None:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        return
    _agree(text)


def test_plain_examples_take_the_fast_path() -> None:
    taken = [p for p in sorted(EXAMPLES.rglob("tau/*.yaml")) if _agree(p.read_text())]
    assert taken, "the examples are plain YAML and should not need the round-trip loader"
    simple = [p for p in taken if _fastyaml.simple_load(p.read_text(), max_nodes=MAX_NODES, max_depth=MAX_DEPTH)[0]]
    assert simple, "block-style examples should not even need libyaml"


SCALARS = ["", "~", "null", "Null", "NULL", "nUll", "true", "True", "TRUE", "tRue", "yes", "no", "on", "off",
           "y", "n", "0", "-0", "+0", "1", "-1", "+1", "007", "0o17", "0x1F", "0b101", "1_000", "1e3", "1E3",
           "1.5e3", "-1.5", "1.", ".5", "-.5", "1.50", "0.0", "-0.0", ".inf", "-.inf", ".nan", ".NaN", "1:30",
           "190:20:30", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5", "=", "<<",
           "12345678901234567890", "1.2.3", "100m", "64Mi", "v1.2", "3.12", "-", "--x", "a: b", "é", "日本",
           "\\ud800", "\"\\ud800\"", "'x'", "\"a\\tb\"", "'it''s'", "\"\\u00e9\"", "\"\\/\"", "'#x'", "a #b",
           "a#b", "! 5", "!!str 5", "!!int '5'", "!t x", "&a x", "*a", "[1, 2]", "{a: 1}", "[]", "{}", "|\n  x\n",
           ">\n  a\n  b\n", "|-\n  x\n\n", "|+\n  x\n\n", ">-\n  a\n\n  b\n", "\"a\n  b\"", "'a\n\n  b'",
           "plain\n  continued", "x{y}", "x]y", "a, b", "x,y", "x:y", "http://a.b/c?d=e#f", "'a'b", "\"a\"b", "a  b",
           "-x", "--flag=1", "a -b", "[x, -y]", "[a b, c]", "[1.5, -2, 0x1]", "[x]]", "[[x]]", "[x, {y: z}]", "[x,]"]


@pytest.mark.parametrize("scalar", SCALARS)
def test_scalars_agree(scalar: str) -> None:
    for text in (f"k: {scalar}\n", f"- {scalar}\n", f"{scalar}: v\n" if "\n" not in scalar else "k: v\n",
                 f"a:\n  b: {scalar}\n  c: [x]\n"):
        _agree(text)


@pytest.mark.parametrize("text", [
    "a: 1\na: 2\n", "a: 1\n'a': 2\n", "a: &x [1]\nb: *x\n", "a: &x {k: 1}\nb: *x\n", "a: &x [*x]\n",
    "<<: {a: 1}\nb: 2\n", "a: {<<: {b: 1}}\n", "%YAML 1.1\n---\na: yes\n", "# c\n%YAML 1.1\n---\na: yes\n", "# c\n%TAG !e! tag:e,2000:\n---\na: 1\n", "a: 1\n---\nb: 2\n", "---\na: 1\n...\n",
    "a:\n\tb: 1\n", "a: x\u2028y\n", "a: x\x85y\n", "? [a]\n: 1\n", "1: a\n", "null: a\n", "true: a\n",
    "[1, 2]\n", "x\n", "", "# only a comment\n", "a: 'unterminated\n", "a: [1, 2\n", "a:\n  - b\n - c\n",
    "a: b: c\n", "- a\nb: 1\n", "a: !!binary aGk=\n", "a: !!set {x}\n", "a: !!omap [{x: 1}]\n",
    "\ufeffa: 1\n", "a: 1 # c\nb: 2\n", "a: \"x # y\"\n", "a:   \n  - 1\n", "a: [a, b, ]\n", "{a: 1, a: 2}\n",
    "a: {b: [c, {d: e}]}\n", "a:\n- 1\n- 2\n", "a:\n- 1\nb: 2\n", "- k:\n  - a\n  j: 1\n", "a:\n- 1\n  - 2\n",
    "- abc\n def\n", "k: abc\n def\n", "- k: v\n cont\n", "- k: v\n   cont\n", "- a: 1\n- b: 2\n", "- # c\n- x\n",
    "-\n  a: 1\n", "- - a\n  - b\n- c\n", "a:\n  b:\n    c: d\n  e: f\ng: h\n", "a:\n  b: 1\n c: 2\n", "  a: 1\n  b: 2\n",
    "a: [x,y]\n", "a: [ ]\n", "a: [x, [y]]\n", "a: [x\n  , y]\n", "a: [x, 'y']\n", "a: [-x, - y]\n", "a: [1, 2.5, true, ~]\n",
    "a: [x] # c\n", "a: [x]y\n", "a: \"x\" # c\n", "a: \"x\"y\n", "a: 'x'  \n", "a: - x\n", "a: -\n", "a: ---\n", "- ---\n",
    "a: x: y\n", "a: x:\n", "a:b: c\n", "a:#x\n", "a:  # c\n  b: 1\n", "a: b #c\n", "a: b# c\n", "a: ?x\n", "a: @x\n",
    "a-b/c.d_e: 1\n", "true: 1\n", "_: 1\n", "a: 1\r\nb: 2\r\n", "a: x\x01\n", "a: \ufeffx\n", "a:\n\n\n  b: 1\n", "'a b': 1\n", "\"a\\x41\": 1\n", "a: |2\n   x\n",
])
def test_documents_agree(text: str) -> None:
    _agree(text)


def test_deep_documents_defer_and_wide_documents_are_refused_outright() -> None:
    assert not _agree("a: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n")
    for wide in ("a: [" + ", ".join(["1"] * (MAX_NODES + 1)) + "]\n",
                 "".join(f"- {i}\n" for i in range(MAX_NODES + 1))):
        # final: the round-trip loader would count at least as many values, after a minute of work
        with pytest.raises(_fastyaml.TooManyValues):
            _fastyaml.fast_load(wide, max_nodes=MAX_NODES, max_depth=MAX_DEPTH)
    deep = "".join(" " * (2 * i) + f"k{i}:\n" for i in range(MAX_DEPTH + 2)) + " " * (2 * MAX_DEPTH + 4) + "x: 1\n"
    assert not _agree(deep)


def test_alias_bomb_defers_and_fails_cleanly() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    text = "\n".join(lines) + "\n"
    assert _fastyaml.fast_load(text, max_nodes=MAX_NODES, max_depth=MAX_DEPTH) == (False, None)
    from tau_core.config import ConfigValidationError

    with pytest.raises(ConfigValidationError, match="expands to more than"):
        parse_yaml(text, "bomb.yaml")


def test_positions_are_parsed_lazily_for_fast_documents() -> None:
    doc = parse_yaml("name: x\ncompute:\n  gpus: 2\n", "lazy.yaml")
    assert doc.lazy and doc.raw is None
    assert doc.position(("compute", "gpus")) == (3, 3)
    assert not doc.lazy and doc.raw is not None


_key = st.text(st.sampled_from("ab:-#'\" 01.~né\t!&*[]{}%\\"), min_size=0, max_size=5)
_scalar_text = st.one_of(st.sampled_from(SCALARS), st.text(
    st.sampled_from("ab:-#'\" 01.,eE_+~xné\t!&*|>[]{}%@`\\\n"), max_size=12))


_friendly_key = st.text(st.sampled_from("ab_-.0 é"), min_size=1, max_size=4)
_friendly_scalar = st.one_of(st.sampled_from(SCALARS), st.text(st.sampled_from("ab:-#'\" 01.,eE_+~né\n[]{}"),
                                                                max_size=10))


@st.composite
def _yamlish(draw: st.DrawFn, keys: Any = _key, scalars: Any = _scalar_text) -> str:
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        indent = " " * draw(st.sampled_from([0, 0, 2, 4]))
        form = draw(st.sampled_from(["kv", "kv", "item", "key", "itemkv"]))
        key, value = draw(keys), draw(scalars)
        lines.append({"kv": f"{indent}{key}: {value}", "item": f"{indent}- {value}", "key": f"{indent}{key}:",
                      "itemkv": f"{indent}- {key}: {value}"}[form])
    return "\n".join(lines) + "\n"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_yamlish())
def test_random_documents_agree(text: str) -> None:
    _agree(text)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_yamlish(_friendly_key, _friendly_scalar))
def test_random_plain_documents_agree(text: str) -> None:
    _agree(text)


@settings(max_examples=150, deadline=None)
@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8)),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                    max_leaves=10))
def test_dumped_documents_agree(data: Any) -> None:
    import yaml

    for style in (False, None, True):
        text = yaml.safe_dump({"root": data}, default_flow_style=style, allow_unicode=True)
        _agree(text)


def test_risky_text_pattern_sees_non_specific_tags() -> None:
    assert _fastyaml._risky("a: ! 5\n")
    assert _fastyaml._risky("- !\n")
    assert not _fastyaml._risky("a: hello!\nb: \"x!y\"\n")


def test_typed_scalars_match_ruamel_resolver() -> None:
    """The copied YAML 1.2 patterns equal ruamel.yaml's, and the character pre-filter never hides a match."""
    from ruamel.yaml.resolver import implicit_resolvers

    ours = re.compile(_fastyaml._TYPED_12_PATTERN, re.X)
    theirs = [regexp for versions, tag, regexp, _ in implicit_resolvers
              if (1, 2) in versions and tag.rsplit(":", 1)[-1] in ("int", "float", "merge", "timestamp", "value")]
    assert len(theirs) == 5
    for scalar in [*SCALARS, "0b1_0", "-0o17", "+0x_F", "1_0.5e+3", "2001-1-2 3:04:05.6 +07:00", "-.INF", ".NaN"]:
        expected = any(r.match(scalar) for r in theirs)
        assert bool(ours.match(scalar)) == expected, scalar
        assert _fastyaml._typed(scalar) == expected, scalar
