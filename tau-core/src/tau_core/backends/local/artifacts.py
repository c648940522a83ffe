"""Safe artifact paths for ``tau run get --artifact``: nothing can escape the run's output root."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from tau_core import pathsafe
from tau_core.errors import NotFoundError

MAX_LISTING = 10_000
HINT = "pass a path relative to the run's output directory, as `tau run get RUN` lists it"


def check_relative(artifact: str) -> PurePosixPath:
    """Refuse absolute paths, ``..`` segments, NUL bytes, backslashes, over-long and empty names."""
    return pathsafe.check_relative(artifact, what="--artifact", hint=HINT)


def resolve(root: Path, artifact: str) -> Path:
    """The real path of ``artifact`` under ``root``; refuses anything (symlinks included) that leaves it."""
    candidate = pathsafe.resolve_within(root, artifact, what="--artifact", hint=HINT)
    if not candidate.exists():
        raise NotFoundError(f"artifact {pathsafe.shown(artifact)} not found in {root}",
                            hint="run `tau run get RUN` without --artifact to list the files")
    return candidate


def listing(root: Path, sub: Path | None = None) -> list[dict[str, Any]]:
    """Entries under ``sub`` (default ``root``), relative to ``root``; symlinks are listed, never followed."""
    base = sub or root
    entries: list[dict[str, Any]] = []
    real_root = Path(os.path.realpath(root))
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames.sort()
        here = Path(dirpath)
        for name in dirnames:
            p = here / name
            entries.append({"path": p.relative_to(base).as_posix(), "size": None,
                            "type": "symlink" if p.is_symlink() else "dir"})
        for name in sorted(filenames):
            p = here / name
            if p.is_symlink():
                target = Path(os.path.realpath(p))
                inside = target == real_root or real_root in target.parents
                entries.append({"path": p.relative_to(base).as_posix(), "size": None,
                                "type": "symlink" if inside else "symlink (outside output, not readable)"})
                continue
            try:
                size = p.stat().st_size
            except OSError:
                size = None
            entries.append({"path": p.relative_to(base).as_posix(), "size": size, "type": "file"})
        if len(entries) >= MAX_LISTING:
            break
    entries.sort(key=lambda e: e["path"])
    return entries[:MAX_LISTING]
