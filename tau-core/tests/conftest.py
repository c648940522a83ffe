"""Helpers for tau-core's own tests: fake installed distributions on a private sys.path."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tau_core.backends.local.backend import LocalBackend


def make_dist(root: Path, dist: str, modules: dict[str, str], entry_points: dict[str, str], version: str = "1.0") -> None:
    """Write an importable module set plus a ``*.dist-info`` declaring ``tau`` entry points."""
    for name, source in modules.items():
        path = root / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    eps = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[tau]\n{eps}\n")


class FakeSite:
    """A directory of fake distributions and a way to run ``tau`` with it on the path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def add(self, dist: str, modules: dict[str, str], entry_points: dict[str, str], version: str = "1.0") -> None:
        make_dist(self.root, dist, modules, entry_points, version)

    def run(self, *args: str, env: dict[str, str] | None = None, code: str | None = None) -> subprocess.CompletedProcess[str]:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("TAU_")}
        full_env["PYTHONPATH"] = str(self.root) + os.pathsep + full_env.get("PYTHONPATH", "")
        full_env["NO_COLOR"] = "1"
        full_env.update(env or {})
        program = code or "from tau_core.cli import main; main()"
        return subprocess.run([sys.executable, "-c", program, *args], capture_output=True, text=True,
                              env=full_env, timeout=60)


@pytest.fixture
def fake_site(tmp_path: Path) -> FakeSite:
    return FakeSite(tmp_path / "site")


# The local backend on a private data directory (test_local_backend*.py).
@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tau-home"
    monkeypatch.setenv("TAU_DATA_DIR", str(root))
    monkeypatch.setenv("TAU_EXP_STORE", str(root / "expstore"))
    return root


@pytest.fixture
def backend(home: Path) -> LocalBackend:
    return LocalBackend()
