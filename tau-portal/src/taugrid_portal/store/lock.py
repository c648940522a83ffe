"""The store's single-writer lock: an exclusive ``flock`` on ``<root>/.tau-exp.lock``.

Readers never take it (SQLite WAL gives them a consistent view).  Writers poll every
250 ms and give up after a timeout (10 s by default, ``TAU_EXP_LOCK_TIMEOUT`` seconds)
with a :class:`~tau_core.errors.ConflictError` that names the lock file.  The kernel
releases a ``flock`` when its holder dies, so a killed writer never wedges the store.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path
from types import TracebackType

from tau_core.errors import ConflictError

LOCK_NAME = ".tau-exp.lock"
POLL_SECONDS = 0.25
DEFAULT_TIMEOUT = 10.0


def default_timeout() -> float:
    raw = os.environ.get("TAU_EXP_LOCK_TIMEOUT", "")
    try:
        return float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        return DEFAULT_TIMEOUT


class WriterLock:
    """Re-entrant within one thread; other threads of the process wait like other processes do."""

    def __init__(self, root: Path, timeout: float | None = None) -> None:
        self.path = root / LOCK_NAME
        self.timeout = default_timeout() if timeout is None else timeout
        self._fd: int | None = None
        self._depth = 0
        self._thread_lock = threading.RLock()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock without waiting; False when another writer holds it."""
        if not self._thread_lock.acquire(blocking=False):
            return False
        if self._fd is not None:  # this thread already holds it
            self._depth += 1
            return True
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            self._thread_lock.release()
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self._thread_lock.release()
            return False
        self._fd = fd
        self._depth = 1
        return True

    def acquire(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise ConflictError(
                    f"timed out after {self.timeout:g}s waiting for the experiment store writer lock {self.path}",
                    hint="another taugrid-portal writer is busy with this store; retry when it finishes "
                    "(or raise TAU_EXP_LOCK_TIMEOUT)",
                )
            time.sleep(POLL_SECONDS)

    def release(self) -> None:
        if self._fd is None:
            return
        self._depth -= 1
        if self._depth == 0:
            fd, self._fd = self._fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._thread_lock.release()

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.release()
