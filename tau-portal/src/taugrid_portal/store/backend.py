"""The experiment store seen through the plugin host's storage-backend and telemetry-sink hooks."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from tau_core.errors import NotFoundError, UsageError
from tau_core.telemetry import RunRegistration, RunStatusUpdate, ScalarRecord

from ._util import atomic_write_bytes, inside
from .core import ExperimentStore
from .layout import ARTIFACTS
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
    """The ``experiment-store`` telemetry sink (:class:`tau_core.telemetry.TelemetrySink`).

    ``write`` appends scalar records as metric files, ``register_run`` records a run's identity and
    metadata (idempotent by its key), ``update_status`` closes a run, ``render_evidence`` writes the
    run's static Stellar page.
    """

    def __init__(self, store: str | os.PathLike[str] | None = None, *, project: str | None = None,
                 source: str = "sink", **_options: Any) -> None:
        self.store = _open_or_init(store, project)
        self.source = source
        self.written: list[str] = []

    def write(self, records: Iterable[ScalarRecord | Mapping[str, Any]]) -> dict[str, Any]:
        from .sink import write_records

        result = write_records(self.store, records, source=self.source)
        self.written.extend(result["files"])
        return result

    def register_run(self, run: RunRegistration) -> dict[str, Any]:
        """Record ``run`` as ``experiment track`` would (config file, tags, log URI, idempotency key)."""
        from ._util import normalize_time
        from .track import load_config, record_run

        configs = [load_config(Path(run.config_path))] if run.config_path else []
        return record_run(
            self.store, run.run_id, project=run.project, group=run.run_group_id,
            experiment=run.experiment_id or None, state=run.state, owner=run.owner,
            created_at=normalize_time(run.created_at, what="created_at"),
            started_at=normalize_time(run.started_at, what="started_at"), config_hash=run.config_hash,
            command=run.tau_command, result_uri=run.result_uri, configs=configs, tags=run.tags,
            context={"log_uri": run.log_uri} if run.log_uri else None, idempotency_key=run.idempotency_key)

    def update_status(self, update: RunStatusUpdate) -> bool:
        """Close the run in its final state; True when it moved (a final state is never rewritten)."""
        from .sink import update_run_state

        return update_run_state(self.store, update.run_id, update.state, update.completed_at)

    def render_evidence(self, run_id: str, out: str | os.PathLike[str]) -> Path:
        """Write the run's self-contained Stellar page to ``out`` atomically; returns its path."""
        from taugrid_portal.stellar.html import render_html, vendor_assets
        from taugrid_portal.stellar.snapshot import build_snapshot

        vendor_assets()  # fail before any work when the chart bundle is missing
        page = Path(out)
        atomic_write_bytes(page, render_html(build_snapshot(self.store, run_id)).encode("utf-8"))
        return page

    def close(self) -> None:
        self.store.close()
