"""Shared fixtures for taugrid-portal tests: real stores on disk, JSONL writers, the CLI."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tau_core.cli import run


@dataclass
class PortalResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


@pytest.fixture
def portal(monkeypatch: pytest.MonkeyPatch,
           tmp_path_factory: pytest.TempPathFactory) -> Callable[..., PortalResult]:
    """Run ``taugrid-portal`` in-process through the same edge as the console script."""
    for var in ("TAU_EXP_STORE", "TAU_EXP_STORE_ROOT", "TAU_CONTEXT", "TAU_TEAM", "TAU_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    # the local runs' store is the last fallback: point it at a place with no store
    monkeypatch.setenv("TAU_DATA_DIR", str(tmp_path_factory.mktemp("no-local-store")))

    def invoke(*args: Any, env: dict[str, str] | None = None) -> PortalResult:
        from taugrid_portal.cli import PROG, cli

        runner = CliRunner()
        with runner.isolation(env=env or {}) as (out, err, _):
            try:
                code = run(cli, [str(a) for a in args], prog_name=PROG)
            except SystemExit as exc:  # pragma: no cover - commands never call sys.exit
                code = int(exc.code or 0)
            return PortalResult(code, out.getvalue().decode(), err.getvalue().decode())

    return invoke


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(store_dir: Path) -> Iterator[Any]:
    from taugrid_portal.store import ExperimentStore

    s, _ = ExperimentStore.init(store_dir, project="demo")
    yield s
    s.close()


def _write_history(path: Path, steps: int = 100, metrics: tuple[str, ...] = ("loss", "accuracy"),
                   start: int = 0, ts0: float = 1760000000.0, **extra: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for i in range(start, start + steps):
            row: dict[str, Any] = {"_step": i, "_timestamp": ts0 + i}
            for j, m in enumerate(metrics):
                row[m] = 1.0 / (i + 1 + j) if m == "loss" else (i + j) / (steps + start)
            row.update(extra)
            fh.write(json.dumps(row) + "\n")
    return path


@pytest.fixture
def write_history() -> Callable[..., Path]:
    return _write_history


def store_files(root: Path) -> list[str]:
    """Every visible file under metrics/ and artifacts/ (relative)."""
    out = []
    for base in ("metrics", "artifacts"):
        for dirpath, _dirs, files in os.walk(root / base):
            out.extend(os.path.relpath(os.path.join(dirpath, f), root) for f in files)
    return sorted(out)


@pytest.fixture
def visible_files() -> Callable[[Path], list[str]]:
    return store_files
