"""The experiment store seen through the plugin host's storage-backend and telemetry-sink hooks."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from tau_core.errors import NotFoundError, UsageError

from ._util import atomic_write_bytes, inside
from .core import ARTIFACTS, ExperimentStore
from .paths import resolve_store


def _open_or_init(root: str | os.PathLike[str] | None, project: str | None) -> ExperimentStore:
    path = resolve_store(str(root) if root else None)
    if (path / "manifest.json").exists():
        return ExperimentStore.open(path)
    return ExperimentStore.init(path, project=project or "default")[0]


class ExperimentStoreBackend:
    """Bytes under keys relative to ``<store>/artifacts``; a key can never leave that directory."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *, project: str | None = None,
                 **_options: Any) -> None:
        self.store = _open_or_init(root, project)
        self.base = self.store.root / ARTIFACTS
        self.base.mkdir(exist_ok=True)

    def _path(self, key: str) -> Path:
        pure = PurePosixPath(key)
        if not key or pure.is_absolute() or any(p in ("", ".", "..") for p in pure.parts) or "\\" in key \
                or "\x00" in key:
            raise UsageError(f"storage key {key!r} is not a relative path inside the store",
                             hint="use keys like run-1/reports/eval.json")
        path = self.base.joinpath(*pure.parts)
        if not inside(self.base, path):
            raise UsageError(f"storage key {key!r} escapes the experiment store")
        return path

    def put(self, key: str, data: bytes) -> str:
        path = self._path(key)
        atomic_write_bytes(path, data)
        return key

    def get(self, key: str) -> bytes:
        path = self._path(key)
        if not path.is_file():
            raise NotFoundError(f"storage key {key!r} was not found in {self.base}")
        return path.read_bytes()

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str = "") -> list[str]:
        base = self._path(prefix) if prefix else self.base
        if not base.exists():
            return []
        return sorted(str(p.relative_to(self.base).as_posix()) for p in base.rglob("*")
                      if p.is_file() and not p.name.startswith("."))

    def close(self) -> None:
        self.store.close()


class ExperimentStoreSink:
    """Telemetry sink: ``write(records)`` appends ``tau.metrics.scalar.v2`` dicts as metric files."""

    def __init__(self, store: str | os.PathLike[str] | None = None, *, project: str | None = None,
                 source: str = "sink", **_options: Any) -> None:
        self.store = _open_or_init(store, project)
        self.source = source
        self.written: list[str] = []

    def write(self, records: Iterable[dict[str, Any]]) -> dict[str, Any]:
        from .writes import write_records

        result = write_records(self.store, list(records), source=self.source)
        self.written.extend(result["files"])
        return result

    def close(self) -> None:
        self.store.close()
