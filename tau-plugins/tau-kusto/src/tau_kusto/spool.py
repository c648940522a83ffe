"""The sink's durable buffer: batches waiting to be queued for ingestion, one file each, in order.

A batch is written here (atomically: temp file, fsync, rename) *before* the sink returns from ``write``, and
removed only once Kusto's ingestion queue has accepted it.  So a caller that checkpoints after ``write``
never loses a point: a restart finds the unsent batches and sends them first, and a batch sent twice (the
process died between the queue accepting it and the file's removal) carries the same ingest-by tag and is
skipped by Kusto.

Layout: ``<spool>/pending/<seq 12 digits>-<tag>.ndjson`` (typed event rows) and ``<spool>/sent.json``
(the tags of the last batches sent, for the status line).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from tau_core.fsutil import write_json_atomic

KEEP_SENT = 200


@attrs.frozen
class Batch:
    path: Path | None
    tag: str
    data: bytes
    #: the parsed rows of ``data`` when this process wrote it (saves parsing it back to build the projection)
    rows: tuple[dict[str, Any], ...] | None = attrs.field(default=None, eq=False)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class Spool:
    """Pending batches on disk under ``root`` (or in memory when ``root`` is None: not durable)."""

    def __init__(self, root: str | os.PathLike[str] | None) -> None:
        self.root = Path(root) if root else None
        self._memory: list[Batch] = []
        self._loaded = False
        self._seq = 0
        if self.root is not None:
            (self.root / "pending").mkdir(parents=True, exist_ok=True)
            for stale in (self.root / "pending").glob(".*.tmp"):
                stale.unlink(missing_ok=True)
            names = sorted(p.name for p in (self.root / "pending").glob("*.ndjson"))
            self._seq = int(names[-1].split("-", 1)[0]) if names else 0

    def add(self, tag: str, data: bytes, rows: Sequence[dict[str, Any]] | None = None) -> Batch:
        known = next((b for b in self.pending() if b.tag == tag), None)
        if known is not None:  # the same events again: already waiting
            return known
        if self.root is None:
            batch = Batch(None, tag, data, tuple(rows) if rows is not None else None)
        else:
            self._seq += 1
            path = self.root / "pending" / f"{self._seq:012d}-{tag}.ndjson"
            _write_atomic(path, data)
            batch = Batch(path, tag, data, tuple(rows) if rows is not None else None)
        self._memory.append(batch)
        return batch

    def pending(self) -> list[Batch]:
        """Batches not yet sent, oldest first (read from disk once per process, then kept in memory)."""
        if self.root is not None and not self._loaded:
            self._loaded = True
            self._memory = [Batch(p, p.stem.split("-", 1)[1], p.read_bytes())
                            for p in sorted((self.root / "pending").glob("*.ndjson"))]
        return list(self._memory)

    def done(self, batch: Batch, sent: list[str]) -> None:
        self._memory = [b for b in self._memory if b.tag != batch.tag]
        if batch.path is None or self.root is None:
            return
        sent.append(batch.tag)
        write_json_atomic(self.root / "sent.json", {"sent": sent[-KEEP_SENT:]})
        batch.path.unlink(missing_ok=True)
