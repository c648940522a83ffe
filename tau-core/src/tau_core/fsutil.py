"""Crash-safe file writes shared by every layer of tau-core."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: Any, *, mode: int = 0o644, durable: bool = False,
                      dir_mode: int | None = None) -> None:
    """Write ``data`` to a temporary dotfile beside ``path`` and rename it into place.

    Readers never see a partial document.  ``dir_mode`` creates (and tightens) the directory with
    that mode, for private state such as kubeconfigs.  ``durable`` also fsyncs the data before the rename (state
    transitions skip it: they are rewritten often and a crash loses at most the newest transition).
    """
    if dir_mode is None:
        path.parent.mkdir(parents=True, exist_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True, mode=dir_mode)
        os.chmod(path.parent, dir_mode)
    tmp = str(path.parent / f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
