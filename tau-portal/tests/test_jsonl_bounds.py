"""Hostile JSONL (issue 19, A4-A6): huge numbers, deep nesting and wide rows are bounded before parsing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from taugrid_portal.store.jsonl import WIDE_COLUMNS, JsonlError, flatten_row, parse_block_fast, read_history
from taugrid_portal.store.writes import import_jsonl


def _rows(path: Path) -> list[tuple[str, int, float]]:
    gen = read_history(path)
    out = []
    for block in gen:
        out += [(r["metric_name"], r["step"], r["value"]) for r in block.long().iter_rows(named=True)]
    return sorted(out)


def test_integer_beyond_float_range_is_a_row_error_not_an_overflow(tmp_path: Path) -> None:
    path = tmp_path / "nines.jsonl"
    path.write_text('{"_step": 1, "loss": ' + "9" * 400 + "}\n")
    with pytest.raises(JsonlError, match=r"line 1: metric 'loss' must be a finite number") as info:
        _rows(path)
    assert len(info.value.message) < 400  # the 400 digits are not echoed whole


@pytest.mark.parametrize("depth", [1, 50, 1000, 100_000])
def test_nested_values_are_skipped_before_any_parser(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "deep.jsonl"
    nested = "[" * depth + "]" * depth
    path.write_text(f'{{"_step": 1, "loss": 0.5, "x": {nested}, "y": {{"z": {nested}}}}}\n')
    assert parse_block_fast(path.read_bytes(), step_field="_step", time_field="_timestamp", prefix="") is None
    assert _rows(path) == [("loss", 1, 0.5)]


def test_flatten_row_keeps_strings_and_top_level_scalars() -> None:
    assert flatten_row(b'{"a": [1, [2]], "b": 1, "c": {"x": "["}, "d": "]{"}') == b'{"a": null, "b": 1, "c": null, "d": "]{"}'
    assert flatten_row(b'{"a": [[[}') == b'{"a": [[[}'  # unbalanced: json reports it
    assert flatten_row(b'{"a": 1}') == b'{"a": 1}'


@pytest.mark.parametrize(("body", "code"), [
    ('{"_step": 1, "loss": 1.0, "x": ' + "[" * 1000 + "]" * 1000 + "}\n", 0),  # polars segfaulted (exit 139)
    ("null\n", 1),  # pyarrow's JSON reader segfaults on a first row of null (found by fuzzing)
    ('null"_step": 0, "loss": 1}\n', 1),
])
def test_hostile_rows_do_not_crash_the_importer_process(tmp_path: Path, body: str, code: int) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(body)
    env = {**os.environ, "NO_COLOR": "1"}
    cmd = [sys.executable, "-c", "from taugrid_portal.cli import main; main()"]
    store = str(tmp_path / "store")
    subprocess.run([*cmd, "experiment", "init", "p", "--store", store], check=True, capture_output=True, env=env)
    r = subprocess.run([*cmd, "experiment", "import", "jsonl", "--run", "r1", "--history", str(path),
                        "--store", store, "-o", "json"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == code, r.stderr
    assert "Traceback" not in r.stderr


def test_wide_rows_take_the_per_point_path(tmp_path: Path, store) -> None:  # type: ignore[no-untyped-def]
    """3 rows x 10,000 metrics took 21 s and 2 GB on the per-metric columnar path."""
    path = tmp_path / "wide.jsonl"
    metrics = 10_000
    path.write_text("".join(json.dumps({"_step": s, **{f"m{i:05d}": s + i / 10 for i in range(metrics)}}) + "\n"
                            for s in range(3)))
    assert parse_block_fast(path.read_bytes(), step_field="_step", time_field="_timestamp", prefix="") is None
    narrow = tmp_path / "narrow.jsonl"
    narrow.write_text("".join(json.dumps({"_step": s, **{f"m{i}": float(i) for i in range(WIDE_COLUMNS // 2)}}) + "\n"
                              for s in range(3)))
    assert parse_block_fast(narrow.read_bytes(), step_field="_step", time_field="_timestamp", prefix="") is not None
    result = import_jsonl(store, run="r1", history=[str(path)])
    assert result["rows"] == 3 * metrics
