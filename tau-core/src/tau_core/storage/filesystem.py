"""``file://<dir>``: a local directory as an object store.

* ``create`` writes a hidden temporary file, fsyncs it and hard-links it into place: ``link(2)``
  fails if the name exists, so the object appears whole or not at all and never overwrites.
* ``swap``/``delete`` hold an exclusive ``flock`` on a per-key lock file while they compare the
  current etag (a sha256 of the bytes) and rename the new bytes into place.
* Every key is checked with :func:`check_key`, and the resolved path (symlinks followed) must stay
  inside the root: a symlink that escapes it is an error, never followed.
* Hidden names (``.x``) are the store's own scratch space and are never listed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from tau_core.errors import NotFoundError, UsageError
from tau_core.storage.base import (
    CHUNK,
    AlreadyExistsError,
    ObjectInfo,
    PreconditionFailedError,
    Progress,
    Versioned,
    check_key,
    sha256_stream,
)

LOCKS = ".locks"


def _etag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


class FileStore:
    """Objects as files under one directory."""

    def __init__(self, url: str = "", location: Any = None, root: str | os.PathLike[str] | None = None,
                 **_options: Any) -> None:
        path = root if root is not None else getattr(location, "path", "") or url.removeprefix("file://")
        if not path:
            raise UsageError("--registry file URL must be file://<dir>")
        self.root = Path(os.path.realpath(Path(path).expanduser()))
        self.url = url or f"file://{self.root}"

    # -- paths ------------------------------------------------------------------------------
    def _path(self, key: str) -> Path:
        check_key(key)
        path = self.root / key
        real = os.path.realpath(path)
        if real != str(self.root) and not real.startswith(str(self.root) + os.sep):
            raise UsageError(f"{key!r} resolves outside {self.root} "
                             "(a symlink escapes the root); refusing to follow it",
                             hint="replace the symlink with the file itself")
        return path

    def _dir(self, prefix: str) -> Path:
        return self._path(prefix.strip("/")) if prefix.strip("/") else self.root

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        locks = self.root / LOCKS
        locks.mkdir(parents=True, exist_ok=True)
        fd = os.open(locks / hashlib.sha256(key.encode()).hexdigest(), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _tmp(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.parent / f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp"

    @staticmethod
    def _sync_dir(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- reads ------------------------------------------------------------------------------
    def list(self, prefix: str = "") -> list[ObjectInfo]:
        base = self._dir(prefix)
        if not base.is_dir():
            return []
        found: list[ObjectInfo] = []
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in list(dirnames):
                full = Path(dirpath) / name
                if full.is_symlink():
                    self._path(full.relative_to(self.root).as_posix())  # escaping -> error
                    dirnames.remove(name)
            for name in filenames:
                if name.startswith("."):
                    continue
                full = Path(dirpath) / name
                key = full.relative_to(self.root).as_posix()
                size = os.stat(self._path(key)).st_size
                found.append(ObjectInfo(key=key, size=size))
        return sorted(found, key=lambda info: info.key)

    def read(self, key: str) -> Versioned:
        path = self._path(key)
        try:
            data = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise NotFoundError(f"{key} was not found in {self.url}") from None
        return Versioned(data=data, etag=_etag(data))

    def open(self, key: str) -> BinaryIO:
        try:
            return open(self._path(key), "rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise NotFoundError(f"{key} was not found in {self.url}") from None

    def hash(self, key: str, progress: Progress | None = None) -> tuple[str, int]:
        with self.open(key) as stream:
            return sha256_stream(stream, progress)

    # -- writes -----------------------------------------------------------------------------
    def _publish(self, tmp: Path, path: Path, key: str) -> None:
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise AlreadyExistsError(f"{key} already exists in {self.url}") from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self._sync_dir(path.parent)

    def _write_tmp(self, path: Path, data: bytes) -> Path:
        tmp = self._tmp(path)
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return tmp

    def create(self, key: str, data: bytes) -> str:
        path = self._path(key)
        self._publish(self._write_tmp(path, data), path, key)
        return _etag(data)

    def upload(self, key: str, stream: BinaryIO, progress: Progress | None = None) -> ObjectInfo:
        path = self._path(key)
        tmp = self._tmp(path)
        size = 0
        try:
            with open(tmp, "wb") as fh:
                while chunk := stream.read(CHUNK):
                    fh.write(chunk)
                    size += len(chunk)
                    if progress is not None:
                        progress(len(chunk))
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._publish(tmp, path, key)
        return ObjectInfo(key=key, size=size)

    def _current(self, path: Path) -> str | None:
        try:
            return _etag(path.read_bytes())
        except FileNotFoundError:
            return None

    def swap(self, key: str, data: bytes, expect: str | None) -> str:
        path = self._path(key)
        with self._locked(key):
            current = self._current(path)
            if current != expect:
                raise PreconditionFailedError(
                    f"{key} changed concurrently in {self.url}" if current else f"{key} does not exist in {self.url}")
            tmp = self._write_tmp(path, data)
            os.replace(tmp, path)
            self._sync_dir(path.parent)
        return _etag(data)

    def delete(self, key: str, expect: str | None = None) -> None:
        path = self._path(key)
        with self._locked(key):
            current = self._current(path)
            if current is None:
                raise NotFoundError(f"{key} was not found in {self.url}")
            if expect is not None and current != expect:
                raise PreconditionFailedError(f"{key} changed concurrently in {self.url}")
            os.unlink(path)
        parent = path.parent
        while parent != self.root:
            try:
                parent.rmdir()
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                    break
                raise
            parent = parent.parent
