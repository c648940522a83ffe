"""Where tau-testing finds shared data (upstream CRDs) and puts downloaded tools."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The TauGrid repository root: the nearest parent of this file holding ``tau-plugins`` (or the cwd)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "tau-plugins").is_dir() and (parent / "tau-core").is_dir():
            return parent
    return Path.cwd()


def crds_dir() -> Path:
    """Upstream Kueue/KubeRay CRDs: ``$TAU_CRDS_DIR``, else ``<repo>/../shared/crds``."""
    env = os.environ.get("TAU_CRDS_DIR")
    if env:
        return Path(env).expanduser()
    return repo_root().parent / "shared" / "crds"


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
