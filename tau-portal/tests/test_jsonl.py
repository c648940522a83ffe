"""JSONL history edge cases: every bad file gets one clear error naming the file and line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tau_core.errors import ConfigError, UsageError
from taugrid_portal.store.jsonl import JsonlError, parse_block_fast, parse_lines_slow
from taugrid_portal.store.summaries import summarize_frame, summarize_wide
from taugrid_portal.store.writes import import_jsonl


def _import(store, path: Path, **kw):
    return import_jsonl(store, run="r1", history=[str(path)], **kw)


GOOD = '{"_step": 0, "_timestamp": 1760000000.125, "loss": 1.0, "accuracy": 0.0}\n'


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        (GOOD + '{"_step": 1, "loss": NaN}\n', 2, "metric 'loss' must be a finite number, got NaN"),
        (GOOD + GOOD + '{"_step": 2, "loss": Infinity}\n', 3, "metric 'loss' must be a finite number, got Infinity"),
        (GOOD + '{"_step": 1, "loss": -Infinity}\n', 2, "must be a finite number"),
        (GOOD + '{"_step": 1, "loss": 1e999}\n', 2, "metric 'loss' must be a finite number"),
        (GOOD + '{"loss": 0.5}\n', 2, "missing required numeric _step field"),
        (GOOD + '{"_step": "three", "loss": 0.5}\n', 2, '_step must be a finite number, got "three"'),
        (GOOD + '{"_step": true, "loss": 0.5}\n', 2, "_step must be a finite number, got true"),
        (GOOD + "[1, 2, 3]\n", 2, "row must contain exactly one JSON object, got list"),
        (GOOD + "42\n", 2, "row must contain exactly one JSON object, got int"),
        (GOOD + '{"_step": 1, "loss": 0.5}{"_step": 2}\n', 2, "invalid JSON"),
        (GOOD + "\n\nnot json at all\n", 4, "invalid JSON"),
        (GOOD + '{"_step": 1, "_timestamp": -5, "loss": 0.5}\n', 2, "_timestamp must be a valid positive Unix"),
        (GOOD + '{"_step": 1, "loss": 0.5', 2, "truncated last row"),
        (GOOD + '{"_step": 1, "lone\\ud800": 0.5}\n', 2, "is not valid Unicode (a lone surrogate escape)"),
        (GOOD + '{"_step": 1, "nested": {"a": 1}, "x\\udfff": 0.5}\n', 2, "is not valid Unicode"),
    ],
)
def test_bad_rows_name_file_and_line(store, tmp_path, body, line, message, visible_files):
    path = tmp_path / "history.jsonl"
    path.write_text(body)
    with pytest.raises(ConfigError) as err:
        _import(store, path)
    assert str(err.value).startswith(f"{path}: line {line}: ")
    assert message in str(err.value)
    assert store.runs() == [] and visible_files(store.root) == []


def test_accepted_shapes(store, tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text(
        '{"_step": 0, "loss": 1, "phase": "warmup", "ok": true, "nested": {"a": 1}, "_meta": 3}\n'
        "\n"
        '{"_step": 1.9, "loss": 0.5, "phase": "train", "lr": 3e-4}\n'
        '{"_step": 2, "loss": 0.25, "phase": 7}'  # no final newline, complete object
    )
    result = _import(store, path, metric_prefix="train")
    assert result["rows"] == 5  # loss x3, lr x1, phase=7 x1 (numeric values only)
    sums = {s["metric_name"]: s for s in store.summaries(["r1"])}
    assert set(sums) == {"train/loss", "train/lr", "train/phase"}
    assert sums["train/loss"]["max_step"] == 2 and sums["train/lr"]["latest_step"] == 1  # 1.9 truncated
    assert sums["train/loss"]["latest_value"] == 0.25


def test_a_surrogate_pair_escape_is_one_character(store, tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text('{"_step": 0, "smile\\ud83d\\ude00": 1.5}\n')
    _import(store, path)
    assert [s["metric_name"] for s in store.summaries(["r1"])] == ["smile\U0001f600"]


def test_metadata_only_history_is_rejected(store, tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text('{"_step": 0, "note": "hi"}\n')
    with pytest.raises(UsageError, match="contain no scalar metrics"):
        _import(store, path)


def test_missing_directory_and_glob(store, tmp_path, write_history):
    with pytest.raises(Exception, match="does not exist"):
        _import(store, tmp_path / "missing.jsonl")
    with pytest.raises(UsageError, match="is a directory"):
        _import(store, tmp_path)
    for i in range(3):
        write_history(tmp_path / "hist" / f"chunk-{i:06d}.jsonl", steps=10, start=10 * i)
    result = import_jsonl(store, run="r1", history=[str(tmp_path / "hist" / "chunk-*.jsonl")])
    assert [Path(h["path"]).name for h in result["history_files"]] == [f"chunk-{i:06d}.jsonl" for i in range(3)]
    assert (result["min_step"], result["max_step"], result["rows"]) == (0, 29, 60)
    assert len(store.artifacts("r1")) == 3


row_value = st.one_of(
    st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False, width=64), st.text(max_size=5),
    st.booleans(), st.none(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.dictionaries(st.sampled_from(["loss", "acc", "lr", "_x"]), row_value, max_size=4),
                     min_size=1, max_size=12), div=st.sampled_from([1, 2, 3]))
def test_fast_path_agrees_with_the_reference_parser(rows, div):
    """Whenever the native Arrow path accepts a block, it yields exactly the slow parser's rows."""
    lines = [json.dumps({"_step": i // div, "_timestamp": 1_760_000_000 + i // div, **r})
             for i, r in enumerate(rows)]
    data = ("\n".join(lines) + "\n").encode()
    slow = parse_lines_slow(data, Path("h.jsonl"), 1, step_field="_step", time_field="_timestamp", prefix="",
                            final=True)
    fast = parse_block_fast(data, step_field="_step", time_field="_timestamp", prefix="")
    if fast is not None:
        key = ["metric_name", "step", "value"]
        assert fast.long().sort(key).to_dicts() == slow.sort(key).to_dicts()
        assert fast.rows == slow.height
        if fast.wide is not None:  # the wide-form summaries equal the long-form ones
            def strip(d):
                return {m: {k: v for k, v in s.items() if k != "_ordinal"} for m, s in d.items()}

            assert strip(summarize_wide(fast.wide)) == strip(summarize_frame(slow))


def test_fifty_megabyte_file_streams_with_bounded_memory(tmp_path):
    """Importing 50 MB costs no more memory than importing 10 MB: the file is streamed in blocks."""
    path = tmp_path / "big.jsonl"
    line = '{"_step": %d, "_timestamp": %d.5, "loss": 0.%06d, "accuracy": 0.%06d, "lr": 0.000300, "gn": 1.%06d}\n'
    with open(path, "w") as fh:
        i = 0
        while fh.tell() < 50 * 1024 * 1024:
            fh.write("".join(line % (j, 1760000000 + j, j % 999999, j % 77777, j % 5555) for j in range(i, i + 5000)))
            i += 5000
    small = tmp_path / "small.jsonl"
    with open(path, "rb") as src:
        small.write_bytes(b"".join(src.readline() for _ in range(i // 5)))
    script = textwrap.dedent("""
        import json, resource, sys
        import polars, pyarrow.compute, pyarrow.json, pyarrow.parquet  # baseline includes the libraries
        import taugrid_portal.store.jsonl as jsonl
        jsonl.BLOCK = 1 << 20
        from taugrid_portal.store import ExperimentStore
        from taugrid_portal.store.writes import import_jsonl
        s, _ = ExperimentStore.init(sys.argv[1], project="demo")
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        r = import_jsonl(s, run="big", history=[sys.argv[2]])
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({"rows": r["rows"], "grew_mb": (peak - base) / 1024, "lines": r["max_step"] + 1}))
    """)

    def run(history: Path, name: str) -> dict:
        out = subprocess.run([sys.executable, "-c", script, str(tmp_path / name), str(history)],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    big, little = run(path, "store-big"), run(small, "store-small")
    assert big["rows"] == big["lines"] * 4 and big["lines"] > 400_000
    assert little["lines"] == big["lines"] // 5
    # slurping would grow with the file (5x the text, 5x the parsed points); streaming does not
    assert big["grew_mb"] < little["grew_mb"] + 40, (big, little)


def test_error_in_the_last_line_of_a_big_file_names_the_line(store, tmp_path):
    path = tmp_path / "big.jsonl"
    n = 300_000
    with open(path, "w") as fh:
        fh.write("".join(f'{{"_step": {j}, "loss": 0.5}}\n' for j in range(n)))
        fh.write('{"_step": 300000, "loss": NaN}\n')
    with pytest.raises(ConfigError, match=rf"{path}: line {n + 1}: metric 'loss' must be a finite number"):
        _import(store, path)


def test_identical_chunks_under_different_names_are_both_kept(store, tmp_path):
    body = '{"_step": 0, "loss": 1.0}\n'
    for name in ("chunk-a.jsonl", "chunk-b.jsonl"):
        (tmp_path / name).write_text(body)
    result = import_jsonl(store, run="r1", history=[str(tmp_path / "chunk-*.jsonl")])
    assert result["rows"] == 2 and len(result["artifacts"]) == 2
    assert sorted(a["name"].split("-", 1)[1] for a in store.artifacts("r1")) == ["chunk-a.jsonl", "chunk-b.jsonl"]


late_value = st.one_of(st.integers(-10**20, 10**20), st.floats(width=64), st.text(max_size=4), st.booleans(),
                       st.none())


@settings(max_examples=60, deadline=None)
@given(head=st.integers(0, 400), late_key=st.sampled_from(["loss", "late"]), value=late_value,
       spaced=st.booleans())
def test_fast_path_never_loses_a_late_key_or_value(head, late_key, value, spaced):
    """polars infers its schema from the first rows; a key or type first seen after them is never lost."""
    sep = '": ' if spaced else '":'
    lines = [f'{{"_step{sep}{i},"loss{sep}{i * 0.5}}}' for i in range(head)]
    lines.append(json.dumps({"_step": head, late_key: value}))
    data = ("\n".join(lines) + "\n").encode()
    try:
        slow = parse_lines_slow(data, Path("h.jsonl"), 1, step_field="_step", time_field="_timestamp", prefix="",
                                final=True)
    except JsonlError:
        slow = None  # NaN, Infinity or a huge integer: the fast path must decline too
    fast = parse_block_fast(data, step_field="_step", time_field="_timestamp", prefix="")
    if fast is not None:
        assert slow is not None
        key = ["metric_name", "step", "value"]
        assert fast.long().sort(key).to_dicts() == slow.sort(key).to_dicts()


def test_import_process_loads_neither_pandas_nor_arrow_compute(tmp_path, write_history):
    """The whole ``experiment import jsonl`` command stays off pandas and ``pyarrow.compute``.

    Building a pyarrow array from a Python list (``pa.array``, ``pa.scalar``) imports pandas,
    which doubled the import's start-up cost; the writer builds its arrays from buffers instead.
    """
    history = write_history(tmp_path / "h.jsonl", steps=50)
    script = textwrap.dedent("""
        import json, sys
        from taugrid_portal.cli import main
        try:
            main(sys.argv[1:])
        except SystemExit as exc:
            assert not exc.code, exc.code
        print(json.dumps(sorted(m for m in sys.modules if m in ("pandas", "pyarrow.compute"))), file=sys.stderr)
    """)
    store = tmp_path / "store"
    for argv in (["experiment", "init", "demo", "--store", str(store)],
                 ["experiment", "import", "jsonl", "--store", str(store), "--run", "r1", "--history", str(history),
                  "-o", "json"]):
        out = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, check=True)
    assert json.loads(out.stderr.strip().splitlines()[-1]) == []
    assert json.loads(out.stdout)["rows"] == 100
