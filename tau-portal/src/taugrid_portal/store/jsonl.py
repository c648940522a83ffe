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

Files are read in blocks (8 MiB) ending at a newline.  A block is parsed by Arrow's native
(multi-threaded) JSON reader; any block the fast path cannot vouch for is re-parsed line by line in Python,
which either produces the same rows or the precise error (file and line).  Memory is bounded
by the block size.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tau_core.errors import ConfigError

BLOCK = 8 << 20
MAX_LINE = 16 << 20
INT64_MAX = (1 << 63) - 1
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


_STRUCTURE = None


def flatten_row(raw: bytes) -> bytes:
    """``raw`` (one JSON line) with every value nested inside the top-level object replaced by ``null``.

    Strings are honoured (brackets inside them are text).  Unbalanced input is returned unchanged
    (``json`` then reports it).  Linear in the line length, no recursion.
    """
    import re

    global _STRUCTURE
    if _STRUCTURE is None:
        _STRUCTURE = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')
    out: list[bytes] = []
    depth, pos = 0, 0
    for m in _STRUCTURE.finditer(raw):
        tok = m.group(0)
        if tok[:1] == b'"':
            continue
        if tok in (b"[", b"{"):
            depth += 1
            if depth == 2:
                out.append(raw[pos:m.start()])
        else:
            depth -= 1
            if depth < 0:
                return raw
            if depth == 1:
                out.append(b"null")
                pos = m.end()
    if depth != 0 or not out:
        return raw
    out.append(raw[pos:])
    return b"".join(out)


def _fail(path: Path, line: int, message: str, hint: str | None = None) -> JsonlError:
    return JsonlError(f"{path}: line {line}: {message}", hint=hint)


def _shown(value: Any, limit: int = 80) -> str:
    text = json.dumps(value) if not isinstance(value, int) or len(str(value)) < limit else str(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _shown_key(key: str, limit: int = 80) -> str:
    return repr(key) if len(key) <= limit else repr(key[:limit]) + f"... ({len(key)} characters)"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_lines_slow(
    data: bytes, path: Path, first_line: int, *, step_field: str, time_field: str, prefix: str,
    final: bool,
) -> Any:
    """The authoritative line-by-line parser: rows, or the first error with its line number."""
    import polars as pl

    names: list[str] = []
    steps: list[int] = []
    walls: list[int | None] = []
    values: list[float] = []
    lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        lines.pop()
    for offset, raw in enumerate(lines):
        lineno = first_line + offset
        text = raw.strip()
        if not text:
            continue
        if b"[" in text or text.count(b"{") > 1:
            text = flatten_row(text)
        try:
            obj = json.loads(text)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            if final and offset == len(lines) - 1 and not ends_with_newline:
                raise _fail(path, lineno, "truncated last row: the file ends in the middle of a JSON object",
                            hint="the writer may still be running or was killed; import the file once it is "
                            "complete (write chunks to a temp file and rename them)") from None
            raise _fail(path, lineno, f"invalid JSON ({exc})",
                        hint="each line must hold exactly one JSON object") from None
        if not isinstance(obj, dict):
            raise _fail(path, lineno, f"row must contain exactly one JSON object, got {type(obj).__name__}",
                        hint='write one object per line, e.g. {"_step": 0, "loss": 1.0}')
        if step_field not in obj:
            raise _fail(path, lineno, f"missing required numeric {step_field} field",
                        hint=f"every row needs {step_field}; use --step-field if the history names it differently")
        step_raw = obj[step_field]
        if not _is_number(step_raw) or (isinstance(step_raw, float) and not math.isfinite(step_raw)):
            raise _fail(path, lineno, f"{step_field} must be a finite number, got {_shown(step_raw)}")
        step = int(step_raw)
        if abs(step) > INT64_MAX:
            raise _fail(path, lineno, f"{step_field} must be an integer representable as int64")
        wall: int | None = None
        if time_field in obj and obj[time_field] is not None:
            ts = obj[time_field]
            if not _is_number(ts) or not math.isfinite(ts) or ts <= 0 or ts > 253402300799:
                raise _fail(path, lineno, f"{time_field} must be a valid positive Unix epoch-seconds value, "
                            f"got {_shown(ts)}")
            wall = round(ts * 1_000_000)
        for key, value in obj.items():
            if key == step_field or key == time_field or key.startswith("_"):
                continue
            if not _is_number(value):
                continue
            try:
                fvalue = float(value)
            except OverflowError:  # an integer beyond the float range (400 nines)
                fvalue = math.inf
            if not math.isfinite(fvalue):
                raise _fail(path, lineno, f"metric {_shown_key(key)} must be a finite number, got {_shown(value)}",
                            hint="NaN and Infinity are rejected at import; log a counter such as nan_steps instead")
            names.append(f"{prefix}{key}")
            steps.append(step)
            walls.append(wall)
            values.append(fvalue)
    return pl.DataFrame(
        {"metric_name": names, "step": steps, "wall_time_us": walls, "value": values},
        schema={"metric_name": pl.String, "step": pl.Int64, "wall_time_us": pl.Int64, "value": pl.Float64},
    )


_NUMERIC = ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "Float32", "Float64")


def parse_block_fast(
    data: bytes, *, step_field: str, time_field: str, prefix: str, newlines: int | None = None
) -> Any | None:
    """Parse with Arrow's JSON reader; ``None`` when the block needs the authoritative slow path."""
    import re

    import polars as pl
    import pyarrow.json as pj

    if b"[" in data or re.search(rb"\{[^\n{]*\{", data):
        return None  # nested values: the slow path flattens them before any parser sees them
    if re.search(rb"(?m)^[ \t\r]*[^{\s]", data):
        return None  # a row that is not an object: pyarrow 26 segfaults on a first row of `null`
    first = data[:data.find(b"\n")] if b"\n" in data else data
    if first.count(b'":') > WIDE_COLUMNS:
        return None  # a wide history: the long (slow) path scales with points, the columnar one with metrics
    try:
        # pyarrow's reader infers new keys in later rows and fails loudly on type changes;
        # polars' reader (with a bounded inference window) would silently drop late keys.
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
            lo, hi = valid.min(), valid.max()
            if valid.len() and (not valid.is_finite().all() or float(lo) <= 0 or float(hi) > 253402300799):  # type: ignore[arg-type]
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
