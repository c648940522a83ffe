"""Typed rows of the writer: attrs records, converted with cattrs at the SQLite/JSON boundary.

* :class:`RunRow` is one ``runs`` row (its 16 columns, in table order).
* :class:`MetricPoint` is one scalar point on its way into a metric file.
* :class:`StagedMetricFile` is a metric file a sink batch wrote to ``.staging/``, awaiting its commit.

The converter is built on first use, so importing this module stays cheap.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from . import schema

if TYPE_CHECKING:
    import cattrs

    from .metricfile import MetricFileWriter


@functools.cache
def converter() -> cattrs.Converter:
    """The store's cattrs converter (``None`` stays ``None``; records to plain dicts and back)."""
    import cattrs

    return cattrs.Converter()


@attrs.frozen(kw_only=True)
class RunRow:
    """One row of the ``runs`` table."""

    run_id: str
    project: str
    experiment_id: str = ""
    run_group_id: str
    parent_run_id: str | None = None
    state: str
    owner: str | None = None
    created_at: str
    started_at: str | None = None
    completed_at: str | None = None
    config_hash: str | None = None
    code_sha: str | None = None
    image_digest: str | None = None
    tau_command: str | None = None
    result_uri: str | None = None
    index_version: str = schema.SCHEMA_VERSION

    def to_row(self) -> dict[str, Any]:
        """The row as SQLite and the append log take it (column order of the table)."""
        row: dict[str, Any] = converter().unstructure(self)
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RunRow:
        """A row read from SQLite (extra columns ignored, a NULL experiment id read as ``''``)."""
        names = [f.name for f in attrs.fields(cls)]
        data = {n: row[n] for n in names if row.get(n) is not None}
        run: RunRow = converter().structure(data, cls)
        return run


RUN_ROW_COLUMNS = tuple(f.name for f in attrs.fields(RunRow))
assert RUN_ROW_COLUMNS == tuple(c for c, _ in schema.TABLES["runs"]), "RunRow must follow the runs table"


@attrs.frozen
class MetricPoint:
    """One scalar point of a sink batch (``wall_time_us``: microseconds since the epoch)."""

    metric_name: str
    step: int | None
    wall_time_us: int | None
    value: float

    def request_key(self) -> list[Any]:
        """The point as the batch's request hash sees it (``repr`` keeps every float bit)."""
        return [self.metric_name, self.step, self.wall_time_us, repr(self.value)]


@attrs.frozen
class SinkBatchKey:
    """What one metric file of a sink batch shares: the run and the constant columns."""

    project: str
    run_group_id: str
    run_id: str
    unit: str
    source: str
    split: str
    tags_json: str


@attrs.define
class StagedMetricFile:
    """A sink batch's metric file written to staging: placed (or found already present) at commit."""

    key: SinkBatchKey
    request_hash: str
    staged: Path
    writer: MetricFileWriter
    points: Sequence[MetricPoint]
    digest: str = ""

    @property
    def file_id(self) -> str:
        return f"sink-{self.key.run_id}-{self.request_hash[:12]}"
