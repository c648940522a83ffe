"""A local run's output archived the way the cluster's entrypoint wrapper does it: the raw lines (no
timestamps) in ``<output>/logs/<run-id>-<container>.log``, rotated to ``.log.1`` past
``$TAU_LOG_ARCHIVE_MAX_BYTES`` (default 64 MiB; one rotated copy kept), flushed line by line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from tau_core import keys


def max_bytes(env: dict[str, str] | None = None) -> int:
    text = (os.environ if env is None else env).get(keys.ENV_LOG_ARCHIVE_MAX_BYTES, "")
    try:
        value = int(text)
    except ValueError:
        return keys.LOG_ARCHIVE_MAX_BYTES_DEFAULT
    return value if value > 0 else keys.LOG_ARCHIVE_MAX_BYTES_DEFAULT


def archive_path(output_dir: str | Path, run_id: str, container: str) -> Path:
    return Path(output_dir) / keys.LOGS_DIR / f"{run_id}-{container}.log"


class LogArchive:
    """Appends lines to one archived log; never raises (an archive that cannot be written is given up)."""

    def __init__(self, path: Path, limit: int) -> None:
        self.path, self.limit = path, limit
        self.fh: BinaryIO | None = None
        self.size = 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._open()
        except OSError:
            self.fh = None

    def _open(self) -> None:
        self.fh = open(self.path, "ab", buffering=0)
        self.size = self.fh.seek(0, os.SEEK_END)

    def write(self, line: bytes) -> None:
        if self.fh is None:
            return
        data = line.rstrip(b"\r\n") + b"\n"
        try:
            if self.size + len(data) > self.limit and self.size:
                self.fh.close()
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
                self._open()
            self.fh.write(data)
            self.size += len(data)
        except OSError:
            self.close()

    def close(self) -> None:
        if self.fh is not None:
            try:
                self.fh.close()
            finally:
                self.fh = None
