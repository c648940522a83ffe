"""The output module: tables, JSON/YAML documents, colour rules, stderr messages."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

from ruamel.yaml import YAML

from tau_core import output


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_table_is_aligned_with_upper_case_headers():
    text = output.render_table([("a", 1, None), ("longer-name", 22, "x")], ["name", "count", "note"])
    assert text.splitlines() == [
        "NAME         COUNT  NOTE",
        "a            1",
        "longer-name  22     x",
    ]


def test_emit_json_yaml_and_table():
    doc = {"name": "r1", "when": datetime(2026, 1, 2, tzinfo=UTC), "path": Path("/tmp/x"), "tags": {"b", "a"}}
    buf = io.StringIO()
    output.emit(doc, "json", stream=buf)
    assert json.loads(buf.getvalue()) == {"name": "r1", "when": "2026-01-02T00:00:00+00:00", "path": "/tmp/x",
                                          "tags": ["a", "b"]}
    buf = io.StringIO()
    output.emit(doc, "yaml", stream=buf)
    assert YAML(typ="safe").load(buf.getvalue())["when"] == "2026-01-02T00:00:00+00:00"
    buf = io.StringIO()
    output.emit(doc, "table", table=lambda d: f"run {d['name']}", stream=buf)
    assert buf.getvalue() == "run r1\n"


def test_colour_only_on_a_tty_without_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert output.use_color(_Tty()) is True
    assert output.use_color(io.StringIO()) is False
    assert output.style("x", io.StringIO(), fg="red") == "x"
    assert output.style("x", _Tty(), fg="red") != "x"
    monkeypatch.setenv("NO_COLOR", "1")
    assert output.use_color(_Tty()) is False


def test_error_and_warning_go_to_stderr(capsys, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    output.error("it broke", "try again")
    output.warning("careful")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "error: it broke\nhint: try again\nwarning: careful\n"
