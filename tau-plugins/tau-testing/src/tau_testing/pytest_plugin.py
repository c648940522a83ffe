"""pytest fixtures for TauGrid plugin authors (registered through the ``pytest11`` entry point)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tau_testing.runner import TauCli


@pytest.fixture
def tau_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str | None]:
    """An isolated environment for ``tau_cli`` calls: private config, data and home directories."""
    root: Path = tmp_path_factory.mktemp("tau-home")
    env: dict[str, str | None] = {
        "HOME": str(root),
        "TAU_CONFIG_DIR": str(root / "config"),
        "TAU_DATA_DIR": str(root / "data"),
        "XDG_CONFIG_HOME": str(root / ".config"),
        "XDG_DATA_HOME": str(root / ".local" / "share"),
        "TAU_PLUGINS": None,
        "TAU_DISABLE_PLUGINS": None,
        "TAU_TRACE_HOOKS": None,
        "TAU_DEBUG": None,
        "TAU_CONTEXT": None,
        "KUBECONFIG": str(root / "no-kubeconfig"),
        "NO_COLOR": "1",
    }
    return env


@pytest.fixture
def _tau_runner(tau_env: dict[str, str | None]) -> Iterator[TauCli]:
    yield TauCli(env=tau_env)


@pytest.fixture
def tau_plugins(_tau_runner: TauCli) -> TauCli:
    """Register inline plugins for this test: ``tau_plugins.register(obj, name=...)``."""
    return _tau_runner


@pytest.fixture
def tau_cli(_tau_runner: TauCli) -> TauCli:
    """Run ``tau`` in-process: ``tau_cli("version", "-o", "json")`` returns a ``CliResult``."""
    return _tau_runner
