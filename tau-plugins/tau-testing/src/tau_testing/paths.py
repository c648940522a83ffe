"""Where tau-testing finds shared data (upstream CRDs) and puts downloaded tools."""

from __future__ import annotations

import os
from pathlib import Path

# One lookup of the repository and of the upstream CRDs ($TAU_CRDS_DIR, else <repo>/../shared/crds),
# shared with the schema checks in tau_core.
from tau_core.k8s_schema import crds_dir, repo_root

__all__ = ["cache_dir", "crds_dir", "repo_root", "tools_dir"]


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
