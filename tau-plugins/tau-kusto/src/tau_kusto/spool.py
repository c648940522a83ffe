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
from pathlib import Path

import attrs

from tau_core.fsutil import write_json_atomic

KEEP_SENT = 200


@attrs.frozen
class Batch:
    path: Path | None
    tag: str
    data: bytes


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
        self._seq = 0
        if self.root is not None:
            (self.root / "pending").mkdir(parents=True, exist_ok=True)
            for stale in (self.root / "pending").glob(".*.tmp"):
                stale.unlink(missing_ok=True)
            names = sorted(p.name for p in (self.root / "pending").glob("*.ndjson"))
            self._seq = int(names[-1].split("-", 1)[0]) if names else 0

    def add(self, tag: str, data: bytes) -> Batch:
        if self.root is None:
            batch = Batch(None, tag, data)
            self._memory.append(batch)
            return batch
        if any(b.tag == tag for b in self.pending()):
            return next(b for b in self.pending() if b.tag == tag)
        self._seq += 1
        path = self.root / "pending" / f"{self._seq:012d}-{tag}.ndjson"
        _write_atomic(path, data)
        return Batch(path, tag, data)

    def pending(self) -> list[Batch]:
        if self.root is None:
            return list(self._memory)
        out = []
        for path in sorted((self.root / "pending").glob("*.ndjson")):
            out.append(Batch(path, path.stem.split("-", 1)[1], path.read_bytes()))
        return out

    def done(self, batch: Batch, sent: list[str]) -> None:
        if batch.path is None:
            self._memory.remove(batch)
            return
        sent.append(batch.tag)
        write_json_atomic(self.root / "sent.json", {"sent": sent[-KEEP_SENT:]})  # type: ignore[operator]
        batch.path.unlink(missing_ok=True)
