"""Streaming parser for JSONL scalar history (``tau.jsonl.import.v1``).

Each line is one JSON object such as ``{"_step": 3, "_timestamp": 1760000003.1, "loss": 0.4}``.

* ``_step`` (``--step-field``) is required and numeric: integers are exact, floats truncated.
* ``_timestamp`` (``--time-field``) is optional; when present it is positive Unix seconds.
* Other keys starting with ``_`` are metadata and skipped; so are non-numeric values
  (strings, booleans, objects, lists, null).  Numeric values must be finite: ``NaN`` and
  ``Infinity`` are rejected, as the reference importer does.
* Nested values are skipped *before* any parser sees them: a row's nested lists and objects
  are replaced by ``null`` in the raw bytes (:func:`flatten_row`), so a list nested 1,000 deep
  neither recurses in ``json`` nor reaches Arrow/polars (which crashed on it).  Integers beyond
  the float range are rejected like ``Infinity``.
* Blank lines are skipped.  A last line without a newline is accepted when it is a complete
  object and reported as a truncated row otherwise.

Files are read in blocks (4 MiB) ending at a newline.  A block of flat numeric rows is parsed by
polars' NDJSON reader when it can vouch for every key (:func:`_read_numeric_rows`), else by Arrow's
(multi-threaded) JSON reader; any block the fast path cannot vouch for is re-parsed line by line by
the authoritative parser (:func:`tau_core.telemetry.parse_jsonl_lines`, shared with the local
evidence bridge), which either produces the same rows or the precise error (file and line).
Memory is bounded by the block size.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tau_core.errors import ConfigError
from tau_core.telemetry import (
    INT64_MAX,
    MAX_EPOCH_SECONDS,
    JsonlFields,
    JsonlRowError,
    flatten_row,
    parse_jsonl_lines,
)

#: 4 MiB keeps a 1 M-point import under 200 MB peak RSS at the same points per CPU-second as 8 MiB.
BLOCK = 4 << 20
MAX_LINE = 16 << 20
__all__ = ["INT64_MAX", "Block", "FileStats", "JsonlError", "flatten_row", "parse_block_fast", "parse_lines_slow",
           "read_history"]
#: Above this many keys a block takes the long path: its cost is per point, the columnar one's per metric.
WIDE_COLUMNS = 512


class JsonlError(ConfigError):
    """A history file is malformed; the message names the file and line."""


@dataclass
class Block:
    """Parsed rows of one block: a long frame (slow path) or a wide frame (fast path)."""

    frame: Any  # polars long frame: metric_name, step, wall_time_us, value (None on the fast path)
    first_line: int
    wide: Any = None  # fast path: step, wall_time_us, <metric>... (one row per JSONL line)

    @property
    def rows(self) -> int:
        """Scalar points in the block."""
        if self.wide is not None:
            return sum(self.wide.height - self.wide[c].null_count() for c in self.wide.columns
                       if c not in ("step", "wall_time_us"))
        return int(self.frame.height)

    def long(self) -> Any:
        """The points as a long frame (used by tests and the dry-run path)."""
        if self.frame is not None:
            return self.frame
        metrics = [c for c in self.wide.columns if c not in ("step", "wall_time_us")]
        return self.wide.unpivot(index=["step", "wall_time_us"], on=metrics, variable_name="metric_name",
                                 value_name="value").drop_nulls("value").select(
            "metric_name", "step", "wall_time_us", "value")


def _fail(path: Path, line: int, message: str, hint: str | None = None) -> JsonlError:
    return JsonlError(f"{path}: line {line}: {message}", hint=hint)


def parse_lines_slow(
    data: bytes, path: Path, first_line: int, *, step_field: str, time_field: str, prefix: str,
    final: bool,
) -> Any:
    """The authoritative line-by-line parser (:func:`tau_core.telemetry.parse_jsonl_lines`) as a long frame."""
    import polars as pl

    fields = JsonlFields(step_field=step_field, time_field=time_field, prefix=prefix)
    try:
        cols = parse_jsonl_lines(data, fields, first_line=first_line, final=final)
    except JsonlRowError as exc:
        raise _fail(path, exc.line, exc.message, exc.hint) from None
    return pl.DataFrame(
        {"metric_name": cols.metric_name, "step": cols.step, "wall_time_us": cols.wall_time_us,
         "value": cols.value},
        schema={"metric_name": pl.String, "step": pl.Int64, "wall_time_us": pl.Int64, "value": pl.Float64},
    )


_NUMERIC = ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "Float32", "Float64")


def _flat_objects(data: bytes, newlines: int) -> bool:
    """True when every row of ``data`` is a flat JSON object the fast reader may see.

    Nested values go to the slow path, which flattens them before any parser sees them; so does a
    row that is not an object (pyarrow 26 segfaults on a first row of ``null``).  The common case
    (each line starts with its one ``{``) is decided with byte counts; anything else (indented
    rows, blank lines, braces inside strings) with the exact regular expressions.
    """
    import re

    if b"[" in data:
        return False
    if (b"\\ud" in data or b"\\uD" in data) and re.search(rb"\\u[dD][89a-fA-F]", data):
        return False  # surrogate escapes: the slow path pairs them, and names a lone one
    lines = newlines + (0 if data.endswith(b"\n") else 1)
    starts = data.count(b"\n{") + (1 if data.startswith(b"{") else 0)
    if starts == lines == data.count(b"{"):
        return True
    return not (re.search(rb"\{[^\n{]*\{", data) or re.search(rb"(?m)^[ \t\r]*[^{\s]", data))


def _read_numeric_rows(data: bytes) -> Any | None:
    """polars' NDJSON reader for rows whose every quoted token is a key; ``None`` when it cannot vouch.

    polars infers the schema from the first rows, so a key first seen later (or a value of another
    type) could be lost.  Such a loss is always detected: when every quoted token is a key
    (``"`` count is twice the ``":`` count) each key occurrence must give a non-null cell, and a
    lost key or value leaves fewer cells than keys.  Histories with string values, nulls, spaced
    colons, booleans or integers beyond int64 go to pyarrow's reader instead.
    """
    import polars as pl

    keys = data.count(b'":')
    if data.count(b'"') != 2 * keys:
        return None
    try:
        df = pl.read_ndjson(io.BytesIO(data))
    except Exception:
        return None
    if any(dtype not in (pl.Int64, pl.Float64) for dtype in df.schema.values()):
        return None  # e.g. Int128 for an integer beyond int64: pyarrow's reader makes it a float, as json does
    cells = sum(df.height - df[c].null_count() for c in df.columns)
    return df if cells == keys else None


def parse_block_fast(
    data: bytes, *, step_field: str, time_field: str, prefix: str, newlines: int | None = None
) -> Any | None:
    """Parse with Arrow's JSON reader; ``None`` when the block needs the authoritative slow path."""
    import polars as pl

    if not _flat_objects(data, data.count(b"\n") if newlines is None else newlines):
        return None
    first = data[:data.find(b"\n")] if b"\n" in data else data
    if first.count(b'":') > WIDE_COLUMNS:
        return None  # a wide history: the long (slow) path scales with points, the columnar one with metrics
    df = _read_numeric_rows(data)
    if df is None:
        import pyarrow.json as pj  # only when polars' reader cannot vouch for the block

        try:
            # pyarrow's reader infers new keys in later rows and fails loudly on type changes
            table = pj.read_json(io.BytesIO(data), read_options=pj.ReadOptions(block_size=1 << 20))
            df = pl.from_arrow(table)
        except Exception:  # any rejection means: take the slow path for the exact error
            return None
    if not isinstance(df, pl.DataFrame) or df.width > WIDE_COLUMNS:
        return None
    n_lines = (data.count(b"\n") if newlines is None else newlines) + (0 if data.endswith(b"\n") else 1)
    if df.height != n_lines:  # blank lines, or two objects on one line: count exactly
        blank = data.count(b"\n\n") + (1 if data.startswith(b"\n") else 0)
        if df.height != n_lines - blank:
            return None
    if df.height == 0:
        return None
    if step_field not in df.columns:
        return None
    step = df[step_field]
    if step.dtype.__class__.__name__ not in _NUMERIC or step.null_count():
        return None
    if step.dtype.is_float():
        if not step.is_finite().all():
            return None
        step = step.cast(pl.Int64, strict=False)
        if step.null_count():
            return None
    wall = pl.Series("wall_time_us", [None] * df.height, dtype=pl.Int64)
    if time_field in df.columns:
        ts = df[time_field]
        if ts.dtype.__class__.__name__ == "Null":
            pass
        elif ts.dtype.__class__.__name__ not in _NUMERIC:
            return None
        else:
            tsf = ts.cast(pl.Float64)
            valid = tsf.drop_nulls()
            out_of_range = (valid <= 0).any() or (valid > MAX_EPOCH_SECONDS).any()
            if valid.len() and (not valid.is_finite().all() or out_of_range):
                return None
            wall = (tsf * 1_000_000).round(0).cast(pl.Int64)
    metrics: list[str] = []
    for name, dtype in df.schema.items():
        if name in (step_field, time_field) or name.startswith("_"):
            continue
        kind = dtype.__class__.__name__
        if kind in _NUMERIC:
            col = df[name]
            if dtype.is_float() and not col.drop_nulls().is_finite().all():
                return None
            metrics.append(name)
        elif kind == "String":
            return None  # a mixed column: the slow path keeps its numeric values
    if not metrics:
        return Block(pl.DataFrame(schema={"metric_name": pl.String, "step": pl.Int64, "wall_time_us": pl.Int64,
                                          "value": pl.Float64}), 0)
    base = pl.DataFrame({"step": step.cast(pl.Int64), "wall_time_us": wall}).with_columns(
        [df[m].cast(pl.Float64).alias(f"{prefix}{m}") for m in metrics]
    )
    return Block(None, 0, wide=base)


@dataclass
class FileStats:
    path: Path
    size_bytes: int
    sha256: str
    scalar_rows: int
    lines: int


def read_history(
    path: Path,
    *,
    step_field: str = "_step",
    time_field: str = "_timestamp",
    metric_prefix: str | None = None,
    copy_to: BinaryIO | None = None,
    progress: Callable[[int], None] | None = None,
) -> Generator[Block, None, FileStats]:
    """Yield parsed blocks of ``path``; the generator's return value is the :class:`FileStats`.

    ``copy_to`` receives the raw bytes (the artifact copy) in the same pass as hashing and parsing.
    """
    prefix = f"{metric_prefix.rstrip('/')}/" if metric_prefix else ""
    digest = hashlib.sha256()
    size = 0
    line_no = 1
    rows = 0
    carry = b""
    try:
        fh = open(path, "rb")
    except IsADirectoryError:
        raise ConfigError(f"JSONL history path {path} is a directory", hint="pass files or a glob such as "
                          f"'{path}/*.jsonl'") from None
    except OSError as exc:
        raise ConfigError(f"cannot read JSONL history {path}: {exc.strerror or exc}") from None
    with fh:
        while True:
            chunk = fh.read(BLOCK)
            final = not chunk
            if chunk:
                digest.update(chunk)
                size += len(chunk)
                if copy_to is not None:
                    copy_to.write(chunk)
                if progress is not None:
                    progress(len(chunk))
                data = carry + chunk
                cut = data.rfind(b"\n")
                if cut < 0:
                    if len(data) > MAX_LINE:
                        raise _fail(path, line_no, f"line is longer than {MAX_LINE >> 20} MiB")
                    carry = data
                    continue
                block, carry = data[: cut + 1], data[cut + 1 :]
                if len(carry) > MAX_LINE:
                    raise _fail(path, line_no + block.count(b"\n"), f"line is longer than {MAX_LINE >> 20} MiB")
            else:
                block, carry = carry, b""
                if not block:
                    break
            newlines = block.count(b"\n")
            parsed = parse_block_fast(block, step_field=step_field, time_field=time_field, prefix=prefix,
                                      newlines=newlines)
            if parsed is None:
                parsed = Block(parse_lines_slow(block, path, line_no, step_field=step_field,
                                                time_field=time_field, prefix=prefix, final=final), line_no)
            parsed.first_line = line_no
            rows += parsed.rows
            yield parsed
            line_no += newlines
            if final:
                break
    return FileStats(path, size, digest.hexdigest(), rows, line_no - 1)
