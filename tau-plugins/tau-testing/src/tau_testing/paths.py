"""Where tau-testing finds shared data (upstream CRDs) and puts downloaded tools."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["cache_dir", "crds_dir", "repo_root", "tools_dir"]

ENV_CRDS_DIR = "TAU_CRDS_DIR"


def repo_root() -> Path:
    """The repository holding this checkout of tau-testing (else the working directory)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "tau-core").is_dir() and (parent / "tau-plugins").is_dir():
            return parent
    return Path.cwd()


def crds_dir(env: Mapping[str, str] | None = None) -> Path:
    """The upstream CRDs: ``$TAU_CRDS_DIR``, else ``<repo>/../shared/crds``."""
    env = os.environ if env is None else env
    value = env.get(ENV_CRDS_DIR)
    if value:
        return Path(value).expanduser()
    return (repo_root() / ".." / "shared" / "crds").resolve()


def tools_dir() -> Path:
    """Downloaded helper binaries (helm, kubectl): ``$TAU_TOOLS_DIR``, else ``<repo>/.tools/bin``."""
    env = os.environ.get("TAU_TOOLS_DIR")
    if env:
        return Path(env).expanduser()
    return repo_root() / ".tools" / "bin"


def cache_dir() -> Path:
    """A cache for parsed CRDs: ``$TAU_TESTING_CACHE``, else ``$XDG_CACHE_HOME/tau-testing``."""
    env = os.environ.get("TAU_TESTING_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tau-testing"
