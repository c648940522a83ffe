"""Host files never reach a manifest (issue 19, B9): entrypoints are repository files or pod paths."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tau_core.config import load_config
from tau_core.errors import ConfigError
from tau_core.rendering import RenderRequest
from tau_run.renderers.job import render_job
from tau_run.renderers.rayjob import render_rayjob

SECRET = "root:*:19000:0:99999:7:::"


def _render(repo: Path, entry: str, *, engine: str = "job") -> list[dict[str, Any]]:
    launcher, compute = ("python", "gpus: 0") if engine == "job" else ("ray-train", "gpus_per_worker: 0")
    (repo / "tau").mkdir(parents=True, exist_ok=True)
    (repo / "tau" / "t.yaml").write_text(textwrap.dedent(f"""
        name: t
        engine: {engine}
        entrypoint: {json.dumps(entry)}
        execution:
          launcher: {launcher}
        runtime:
          image: python:3.12
        compute:
          {compute}
        policy:
          namespace: research
          queue: team-q
        """))
    cfg = load_config(repo / "tau" / "t.yaml")
    request = RenderRequest(name="t", config=cfg.normalized, context={}, sources=cfg.sources,
                            config_hash=cfg.config_hash, submission_id="0" * 24, config_dir=repo / "tau", env={})
    return (render_job if engine == "job" else render_rayjob)(request)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "outside.py").write_text(f"# {SECRET}\n")
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "train.py").write_text("print('ok')\n")
    return root


def test_absolute_entrypoint_is_a_pod_path_and_embeds_nothing(repo: Path, tmp_path: Path) -> None:
    objects = _render(repo, str(tmp_path / "outside.py"))
    text = json.dumps(objects)
    assert "TAU_SCRIPT_B64" not in text and SECRET not in text
    assert str(tmp_path / "outside.py") in text  # run inside the pod, by its path


@pytest.mark.parametrize("engine", ["job", "rayjob"])
def test_relative_entrypoint_outside_the_repository_is_refused(repo: Path, engine: str) -> None:
    with pytest.raises(ConfigError, match="resolves outside"):
        _render(repo, "../../outside.py", engine=engine)


@pytest.mark.parametrize("engine", ["job", "rayjob"])
def test_symlinked_entrypoint_leaving_the_repository_is_refused(repo: Path, tmp_path: Path, engine: str) -> None:
    (repo / "link.py").symlink_to(tmp_path / "outside.py")
    with pytest.raises(ConfigError, match="resolves outside") as info:
        _render(repo, "../link.py", engine=engine)
    assert SECRET not in info.value.message


def test_repository_entrypoint_is_still_embedded(repo: Path) -> None:
    assert "TAU_SCRIPT_B64" in json.dumps(_render(repo, "../train.py"))


def test_rayjob_refuses_an_absolute_host_entrypoint(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="absolute path"):
        _render(repo, str(tmp_path / "outside.py"), engine="rayjob")
