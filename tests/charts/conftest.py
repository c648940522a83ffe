"""Fixtures for the chart tests: real helm, and an umbrella built with local stand-in dependencies."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tau_testing.charts import build_test_umbrella, helm_env, sync_controller_crds
from tau_testing.paths import repo_root

ROOT = repo_root()
CHARTS = ROOT / "deploy" / "charts"


@pytest.fixture(scope="session")
def umbrella(helm_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_test_umbrella(tmp_path_factory.mktemp("umbrella"), helm_bin)


@pytest.fixture(scope="session")
def controller_chart() -> Path:
    sync_controller_crds(CHARTS / "tau-core-controller")
    return CHARTS / "tau-core-controller"


@pytest.fixture(scope="session")
def helm(helm_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., subprocess.CompletedProcess]:
    env = helm_env(tmp_path_factory.mktemp("helm-home"))

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run([str(helm_bin), *args], capture_output=True, text=True, env=env, timeout=120)
        if check:
            assert result.returncode == 0, (args, result.stdout[-2000:], result.stderr[-2000:])
        return result
    return run


@pytest.fixture(scope="session")
def render(helm: Callable[..., subprocess.CompletedProcess], umbrella: Path) -> Callable[..., list[dict[str, Any]]]:
    def go(*args: str, chart: Path | None = None) -> list[dict[str, Any]]:
        out = helm("template", "taugrid", str(chart or umbrella), "--namespace", "tau-system", "--include-crds", *args)
        return [d for d in yaml.safe_load_all(out.stdout) if d]
    return go
