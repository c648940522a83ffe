"""Writing immutable ``tau.metrics.scalar.v2`` Parquet files, chunk by chunk.

Frames come from polars (``metric_name, step, wall_time_us, value``); constant columns
(project, group, run, unit, source, split, tags) are added here and each chunk becomes one
Parquet row group, so memory stays bounded by the chunk size, not the file size.  Summaries
are folded in per chunk with the same merge that combines files.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from pathlib import Path
from typing import Any

from . import schema
from ._util import sha256_text
from .summaries import merge, summarize_frame

SCHEMA_HASH = sha256_text(",".join(schema.METRIC_SCHEMA_COLUMNS))


#: One chunk as Arrow columns (metric names as a dictionary, steps, wall times, values), its min and max
#: step, and the chunk as the display copy reads it (names, then polars codes, steps and values).
Columns = tuple[Any, Any, Any, Any, int | None, int | None, tuple[list[str], Any, Any, Any]]
KEEP_CHUNK_ROWS = 4_000_000  # ~64 MB of steps and values
CONSTANT_COLUMNS = ("project", "run_group_id", "run_id", "unit", "source", "split", "tags")


def string_array(values: list[str]) -> Any:
    """A pyarrow ``string`` array built from its buffers.

    ``pyarrow.array`` on a Python list asks whether pandas is installed, which imports pandas
    (about 0.4 s of CPU and 40 MB): an importer has no other use for it.
    """
    import pyarrow as pa

    encoded = [v.encode() for v in values]
    offsets = [0]
    for item in encoded:
        offsets.append(offsets[-1] + len(item))
    return pa.StringArray.from_buffers(len(values), pa.py_buffer(array("i", offsets).tobytes()),
                                       pa.py_buffer(b"".join(encoded)))


def arrow_schema(*, dictionary_constants: bool = False) -> Any:
    """The ``tau.metrics.scalar.v2`` columns.  With ``dictionary_constants`` the per-file constant
    columns are dictionary arrays in memory; on disk they are plain (dictionary-encoded) strings."""
    import pyarrow as pa

    const = pa.dictionary(pa.int32(), pa.string()) if dictionary_constants else pa.string()
    return pa.schema([
        pa.field("project", const, nullable=False),
        pa.field("run_group_id", const, nullable=False),
        pa.field("run_id", const, nullable=False),
        pa.field("metric_name", const, nullable=False),
        pa.field("step", pa.int64(), nullable=True),
        pa.field("wall_time", pa.timestamp("us", tz="UTC"), nullable=True),
        pa.field("value", pa.float64(), nullable=False),
        pa.field("unit", const, nullable=True),
        pa.field("source", const, nullable=False),
        pa.field("split", const, nullable=True),
        pa.field("tags", const, nullable=False),
    ])


class MetricFileWriter:
    """Stream chunks into one Parquet file at ``path`` (a staging path) and summarize them."""

    def __init__(
        self,
        path: Path | None,
        *,
        project: str,
        run_group_id: str,
        run_id: str,
        source: str,
        unit: str | None = None,
        split: str | None = None,
        keep_chunks: bool = False,
    ) -> None:
        self.path = path
        self.project, self.run_group_id, self.run_id = project, run_group_id, run_id
        self.source, self.unit, self.split = source, unit, split
        self.rows = 0
        self.min_step: int | None = None
        self.max_step: int | None = None
        self.summaries: dict[str, dict[str, Any]] = {}
        self._writer: Any = None
        self._schema = arrow_schema(dictionary_constants=True)
        self._const_rows = 0
        # the chunks as written (metric codes, steps, values), kept for the display copy while
        # the file is small; a larger file is read back instead (see store/display.py)
        self.chunks: list[tuple[list[str], Any, Any, Any]] | None = [] if keep_chunks else None
        self._zeros: Any = None
        self._nulls: Any = None

    def write(
        self,
        frame: Any,
        tags: dict[str, str],
        *,
        summary: dict[str, dict[str, Any]] | None = None,
        wide: Any = None,
    ) -> None:
        """Append one chunk: a long polars frame ``metric_name, step, wall_time_us, value``, or
        (``frame=None``) a ``wide`` frame ``step, wall_time_us, <metric>...`` straight from the parser.

        ``summary`` may be precomputed (by a parser thread) with ``ordinal_offset`` equal to the
        rows written before this chunk.
        """
        cols = self._columns_from_wide(wide) if wide is not None else self._columns_from_long(frame)
        if cols is None:
            return
        names, steps, walls, values, lo, hi, polars_chunk = cols
        n = len(values)
        if summary is None:
            from .summaries import summarize_wide

            summary = summarize_wide(wide, ordinal_offset=self.rows) if wide is not None else summarize_frame(
                frame, ordinal_offset=self.rows)
        for name, s in summary.items():
            old = self.summaries.get(name)
            key_new = (s["latest_step"] is not None, s["latest_step"] or 0,
                       s["latest_wall_time"] is not None, s["latest_wall_time"] or 0, s["_ordinal"])
            key_old = None
            if old is not None:
                key_old = (old["latest_step"] is not None, old["latest_step"] or 0,
                           old["latest_wall_time"] is not None, old["latest_wall_time"] or 0, old["_ordinal"])
            self.summaries[name] = merge(old, s, old_key=key_old, new_key=key_new)
        if lo is not None and hi is not None:
            self.min_step = lo if self.min_step is None else min(self.min_step, lo)
            self.max_step = hi if self.max_step is None else max(self.max_step, hi)
        self.rows += n
        if self.chunks is not None:
            if self.rows <= KEEP_CHUNK_ROWS:
                self.chunks.append(polars_chunk)
            else:
                self.chunks = None
        if self.path is not None:
            self._append(names, steps, walls, values, tags)

    def _append(self, names: Any, steps: Any, walls: Any, values: Any, tags: dict[str, str]) -> None:
        """One chunk as a Parquet row group (pyarrow's core and parquet modules only, never compute)."""
        import polars as pl
        import pyarrow as pa

        assert self.path is not None
        n = len(values)
        tags_json = json.dumps(tags, sort_keys=True, separators=(",", ":"))

        if self._const_rows < n:  # one all-zero and one all-null index array, sliced per chunk
            self._const_rows = max(n, 2 * self._const_rows)
            self._zeros = pl.zeros(self._const_rows, pl.Int32, eager=True).to_arrow()  # no pa.scalar: it imports pandas
            self._nulls = pa.nulls(self._const_rows, pa.int32())

        def const(value: str | None) -> Any:
            if value is None:
                return pa.DictionaryArray.from_arrays(self._nulls.slice(0, n), string_array([]))
            return pa.DictionaryArray.from_arrays(self._zeros.slice(0, n), string_array([value]))

        table = pa.Table.from_arrays(
            [
                const(self.project), const(self.run_group_id), const(self.run_id), names, steps,
                walls, values, const(self.unit), const(self.source),
                const(self.split), const(tags_json),
            ],
            schema=self._schema,
        )
        if self._writer is None:
            import pyarrow.parquet as pq

            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(
                self.path, self._schema, compression="zstd", compression_level=1, store_schema=False,
                write_statistics=["metric_name", "step", "wall_time", "value"],
                use_dictionary=["metric_name", *CONSTANT_COLUMNS],
                # steps and wall times rise steadily within a series: delta encoding halves the
                # encoding CPU and shrinks the file about 4x against dictionary/plain + zstd
                column_encoding={"step": "DELTA_BINARY_PACKED", "wall_time": "DELTA_BINARY_PACKED"},
            )
        self._writer.write_table(table, row_group_size=1 << 20)

    @staticmethod
    def _arrow_columns(codes: Any, metrics: list[str], long: Any) -> Columns | None:
        """Arrow columns of a long polars frame ``step, wall_time_us, value`` plus int32 metric ``codes``.

        The dtypes come out of polars exactly as the file stores them (no Arrow casts, so
        ``pyarrow.compute`` is never imported).
        """
        import polars as pl
        import pyarrow as pa

        if long.height == 0:
            return None
        names = pa.DictionaryArray.from_arrays(codes.cast(pl.Int32).to_arrow(), string_array(metrics))
        walls = long["wall_time_us"].cast(pl.Int64).cast(pl.Datetime("us", "UTC"))
        step = long["step"].cast(pl.Int64)
        lo, hi = step.min(), step.max()
        value = long["value"].cast(pl.Float64)
        return (names, step.to_arrow(), walls.to_arrow(), value.to_arrow(), None if lo is None else int(lo),
                None if hi is None else int(hi), (metrics, codes.cast(pl.Int32), step, value))

    @classmethod
    def _columns_from_long(cls, frame: Any) -> Columns | None:
        import polars as pl

        metrics = frame["metric_name"].unique(maintain_order=True)
        codes = frame["metric_name"].replace_strict(metrics, pl.int_range(0, metrics.len(), eager=True),
                                                    return_dtype=pl.Int32)
        return cls._arrow_columns(codes, metrics.to_list(), frame)

    @classmethod
    def _columns_from_wide(cls, wide: Any) -> Columns | None:
        """Long columns without materialising a metric-name string per point."""
        import polars as pl

        metrics = [c for c in wide.columns if c not in ("step", "wall_time_us")]
        parts = [wide.select(pl.lit(k, pl.Int32).alias("_m"), "step", "wall_time_us",
                             pl.col(m).cast(pl.Float64).alias("value")).drop_nulls("value")
                 for k, m in enumerate(metrics)]
        if not parts:
            return None
        long = pl.concat(parts, rechunk=True)
        return cls._arrow_columns(long["_m"], metrics, long)

    def close(self) -> str | None:
        """Finish the file; returns its sha256 (None when nothing was written)."""
        if self._writer is None:
            return None
        self._writer.close()
        self._writer = None
        digest = hashlib.sha256()
        assert self.path is not None
        with open(self.path, "rb") as fh:
            while block := fh.read(1 << 22):
                digest.update(block)
        return digest.hexdigest()

    def abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:
                pass
            self._writer = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)

