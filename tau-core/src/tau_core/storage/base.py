"""The storage-backend contract every registry and artifact store is written against.

Keys are relative POSIX paths under the store's root (``a/b/c.json``).  :func:`check_key` is the
one gate for them: no absolute paths, no ``.``/``..``/empty segments, no backslashes or NULs.
(Issue 19 adds a shared path-safety module; this check is small on purpose so it can move there.)

Etags are opaque strings.  ``create`` is the immutability primitive (it fails if the key exists);
``swap`` is compare-and-swap: ``expect=None`` means "must be absent", otherwise the current etag
must equal ``expect``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import BinaryIO, Protocol, runtime_checkable

import attrs

from tau_core.errors import ConflictError, UsageError

CHUNK = 4 * 1024 * 1024

#: called with the number of bytes just processed (progress bars)
Progress = Callable[[int], None]


class AlreadyExistsError(ConflictError):
    """``create`` found the key already present."""


class PreconditionFailedError(ConflictError):
    """``swap``/``delete`` found a different etag (or presence) than expected."""


@attrs.frozen
class ObjectInfo:
    key: str
    size: int
    etag: str | None = None


@attrs.frozen
class Versioned:
    data: bytes
    etag: str


def check_key(key: str, *, what: str = "storage key", allow_empty: bool = False) -> str:
    """Return ``key`` if it is a canonical relative path, else raise a one-line UsageError."""
    if key == "" and allow_empty:
        return key
    bad = (not key or key.startswith("/") or "\\" in key or "\x00" in key
           or any(part in ("", ".", "..") for part in key.split("/")))
    if bad:
        raise UsageError(f"{what} {key!r} is not a canonical relative path",
                         hint="use segments like name/version/file.bin (no '..', '.', '//' or leading '/')")
    return key


def join_key(*parts: str) -> str:
    joined = "/".join(p.strip("/") for p in parts if p and p.strip("/"))
    return check_key(joined, allow_empty=True)


def key_parts(key: str) -> tuple[str, ...]:
    return PurePosixPath(check_key(key)).parts


def sha256_stream(stream: BinaryIO, progress: Progress | None = None) -> tuple[str, int]:
    """(lowercase hex sha256, byte count) of everything readable from ``stream``."""
    digest = hashlib.sha256()
    size = 0
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    readinto = getattr(stream, "readinto", None)
    while True:
        if readinto is not None:
            n = readinto(view)
            if not n:
                break
            digest.update(view[:n])
        else:
            chunk = stream.read(CHUNK)
            if not chunk:
                break
            n = len(chunk)
            digest.update(chunk)
        size += n
        if progress is not None:
            progress(n)
    return digest.hexdigest(), size


@runtime_checkable
class ObjectStore(Protocol):
    """What a storage backend's factory returns."""

    #: the location this store was opened from (``file:///...``, ``az://...``, ``pvc``)
    url: str

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        """Every object whose key starts with the directory ``prefix``, recursively, sorted by key."""

    def read(self, key: str) -> Versioned:
        """Bytes and etag; :class:`~tau_core.errors.NotFoundError` when absent."""

    def create(self, key: str, data: bytes) -> str:
        """Write only if absent (atomically: whole object or nothing); :class:`AlreadyExistsError` otherwise."""

    def swap(self, key: str, data: bytes, expect: str | None) -> str:
        """Compare-and-swap; :class:`PreconditionFailedError` when the current state is not ``expect``."""

    def delete(self, key: str, expect: str | None = None) -> None:
        """Remove ``key`` (only if its etag is ``expect`` when given); absent keys are NotFoundError."""

    def open(self, key: str) -> BinaryIO:
        """A binary stream of the object's bytes, for streaming hashes and copies."""

    def upload(self, key: str, stream: BinaryIO, progress: Progress | None = None) -> ObjectInfo:
        """Create ``key`` from a stream if absent (whole object or nothing)."""

    def hash(self, key: str, progress: Progress | None = None) -> tuple[str, int]:
        """Streaming sha256 and size of one object."""
