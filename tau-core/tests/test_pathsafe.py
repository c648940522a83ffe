"""Path safety (issue 19, group B): one module decides, and targets, scaffold and artifacts use it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tau_core import pathsafe
from tau_core.backends.local import artifacts
from tau_core.backends.local.scaffold import scaffold_local_repo
from tau_core.config.targets import resolve_target
from tau_core.errors import ConfigError, ConflictError, TauError, UsageError


@pytest.mark.parametrize("bad", ["", "/etc/passwd", "~/x", "a/../../b", "..", "a\\b", "C:x", "a\0b", "a\x1b]0;x\x07",
                                 "a" * 300, "a/" * 2100])
def test_check_relative_refuses(bad: str) -> None:
    with pytest.raises(UsageError) as info:
        pathsafe.check_relative(bad, what="--artifact")
    assert len(info.value.message) < 400
    assert "\x1b" not in info.value.message and "\x07" not in info.value.message


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_resolve_within_never_escapes(tmp_path_factory: pytest.TempPathFactory, rel: str) -> None:
    root = tmp_path_factory.mktemp("root")
    (root / "inside").mkdir()
    (root / "link").symlink_to(root.parent)
    try:
        got = pathsafe.resolve_within(root, rel)
    except TauError:
        return
    assert pathsafe.is_within(root, got)


def test_long_artifact_name_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="too long"):
        artifacts.resolve(tmp_path, "a" * 5000)


def test_target_symlink_out_of_the_repository_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root:*:19000:0:99999:7:::\n")
    repo = tmp_path / "repo"
    (repo / "tau").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "tau" / "shadow.yaml").symlink_to(secret)
    with pytest.raises(ConfigError) as info:
        resolve_target("shadow", cwd=repo)
    assert "root:*" not in info.value.message and "outside" in info.value.message


def test_default_config_symlink_out_of_the_repository_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text("name: x\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".git").mkdir()
    (repo / "tau.yaml").symlink_to(outside)
    with pytest.raises(ConfigError, match="outside"):
        resolve_target(None, cwd=repo)


def test_target_symlink_inside_the_repository_is_fine(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "tau").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "configs").mkdir()
    (repo / "configs" / "train.yaml").write_text("name: train\n")
    (repo / "tau" / "train.yaml").symlink_to(repo / "configs" / "train.yaml")
    assert resolve_target("train", cwd=repo).config_path.name == "train.yaml"


@pytest.mark.parametrize("link", ["tau", "README.md", "tau/train.yaml"])
def test_scaffold_never_writes_through_a_symlink(tmp_path: Path, link: str) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "tau").mkdir(parents=True) if link != "tau" else out.mkdir()
    target = elsewhere if link == "tau" else elsewhere / "file"
    if link != "tau":
        target.write_text("precious\n")
    (out / link).symlink_to(target)
    with pytest.raises(ConflictError, match="outside"):
        scaffold_local_repo(out, "r2", force=True)
    assert sorted(p.name for p in elsewhere.iterdir()) == ([] if link == "tau" else ["file"])
    if link != "tau":
        assert target.read_text() == "precious\n"


def test_write_inside_refuses_a_symlinked_parent(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "d").symlink_to(elsewhere)
    with pytest.raises(UsageError):
        pathsafe.write_inside(root, "d/x.txt", "data")
    assert not (elsewhere / "x.txt").exists()
    assert pathsafe.write_inside(root, "e/x.txt", "data").read_text() == "data"
