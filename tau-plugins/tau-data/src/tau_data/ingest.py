"""Copy-and-verify of a registered dataset's bytes, with a forward-only ``ingest-status.json``."""

from __future__ import annotations

import hashlib
import uuid
from typing import BinaryIO

from tau_core.errors import NotFoundError, UsageError
from tau_core.storage import ObjectStore, PreconditionFailedError, layout, open_store

from .common import open_source
from .datasets import DatasetRegistry
from .progress import bar
from .records import CompletedFile, DatasetRecord, IngestStatus, load, now, to_json

MAX_SUMMARY = 512


class HashingReader:
    """A read-only stream that hashes what passes through it."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.sha = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        chunk = self.stream.read(size)
        self.sha.update(chunk)
        return chunk


def read_status(reg: DatasetRegistry, name: str, version: str) -> IngestStatus:
    key = layout.dataset_status(name, version)
    try:
        raw = reg.store.read(key).data
    except NotFoundError:
        raise NotFoundError(f"no ingest status found for {name}@{version} "
                            "(run `tau data dataset ingest` first)") from None
    status: IngestStatus = load(raw, IngestStatus, key)
    return status


def status_text(s: IngestStatus) -> str:
    rows = [("Name", s.name), ("Version", s.version), ("State", s.state), ("RecordDigest", s.record_digest),
            ("VerifiedFiles", s.verified_files), ("VerifiedBytes", s.verified_bytes), ("AttemptID", s.attempt_id),
            ("StartedAt", s.started_at), ("UpdatedAt", s.updated_at), ("FailureSummary", s.failure_summary or "-")]
    return "\n".join(f"{k + ':':<16} {v}" for k, v in rows)


class _StatusWriter:
    def __init__(self, reg: DatasetRegistry, status: IngestStatus) -> None:
        self.store = reg.store
        self.key = layout.dataset_status(status.name, status.version)
        self.status = status
        try:
            self.etag: str | None = self.store.read(self.key).etag
        except NotFoundError:
            self.etag = None

    def save(self) -> None:
        self.status.updated_at = now()
        try:
            self.etag = self.store.swap(self.key, to_json(self.status), self.etag)
        except PreconditionFailedError:
            raise PreconditionFailedError(f"ingest status of {self.status.name}@{self.status.version} was changed "
                                          f"by another attempt; attempt {self.status.attempt_id} stops") from None


def destination_store(record: DatasetRecord, destination: str, remote: bool = False) -> ObjectStore:
    location = record.location()
    if destination and destination.rstrip("/") != location.rstrip("/"):
        raise UsageError(f"--destination {destination} does not match the record's location {location or '-'}; "
                         "the record is authoritative")
    if not remote and not location.startswith("file://"):
        raise UsageError(f"local ingest mode requires a file:// destination, got {location.split('/')[0] or '-'}//; "
                         "use --workspace for Azure destinations")
    return open_store(location)


def copy_verified(source: ObjectStore, dest: ObjectStore, record: DatasetRecord, writer: _StatusWriter) -> None:
    done = {c.path for c in writer.status.completed_files}
    with bar(record.total_bytes, "copying") as progress:
        for entry in record.files:
            if entry.path in done:
                continue
            try:
                sha, size = dest.hash(entry.path)
            except NotFoundError:
                with source.open(entry.path) as stream:
                    reader = HashingReader(stream)
                    dest.upload(entry.path, reader, progress)  # type: ignore[arg-type]
                sha, size = reader.sha.hexdigest(), dest.hash(entry.path)[1]
                if sha != entry.sha256 or size != entry.bytes:
                    dest.delete(entry.path)
            if sha != entry.sha256 or size != entry.bytes:
                raise ValueError(f"{entry.path}: sha256 {entry.sha256} != {sha}" if sha != entry.sha256
                                 else f"{entry.path}: bytes {entry.bytes} != {size}")
            writer.status.completed_files.append(CompletedFile(entry.path, sha, size, now()))
            writer.status.verified_files += 1
            writer.status.verified_bytes += size
            writer.save()


def ingest_local(reg: DatasetRegistry, record: DatasetRecord, source_root: str, destination: str,
                 remote: bool = False) -> IngestStatus:
    """Copy in this process (``remote``: the in-cluster worker, which may write to az://)."""
    dest = destination_store(record, destination, remote)
    source = open_source(source_root)
    try:
        previous = read_status(reg, record.name, record.version)
    except NotFoundError:
        previous = None
    completed = previous.completed_files if previous and previous.record_digest == record.digest else []
    status = IngestStatus(name=record.name, version=record.version, record_digest=record.digest,
                          state="ingesting", source_root=source_root, destination=dest.url,
                          attempt_id=uuid.uuid4().hex[:12], started_at=now(), updated_at=now(),
                          completed_files=list(completed), verified_files=len(completed),
                          verified_bytes=sum(c.bytes for c in completed))
    writer = _StatusWriter(reg, status)
    writer.save()
    try:
        copy_verified(source, dest, record, writer)
    except (ValueError, NotFoundError) as exc:
        status.state, status.failure_summary = "failed", str(exc)[:MAX_SUMMARY]
        writer.save()
        return status
    status.state = "ready"
    writer.save()
    return status
