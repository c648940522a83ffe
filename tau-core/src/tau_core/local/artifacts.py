"""Safe artifact paths for ``tau run get --artifact``: nothing can escape the run's output root."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from tau_core.errors import NotFoundError, UsageError

MAX_LISTING = 10_000


def check_relative(artifact: str) -> PurePosixPath:
    """Refuse absolute paths, ``..`` segments, NUL bytes, backslashes and empty names."""
    hint = "pass a path relative to the run's output directory, as `tau run get RUN` lists it"
    if artifact is None or not str(artifact).strip():
        raise UsageError("--artifact must not be empty", hint=hint)
    if "\0" in artifact:
        raise UsageError("--artifact must not contain a NUL byte", hint=hint)
    if "\\" in artifact:
        raise UsageError(f"--artifact {artifact!r} must use '/' separators", hint=hint)
    rel = PurePosixPath(artifact)
    if rel.is_absolute() or artifact.startswith("~"):
        raise UsageError(f"--artifact {artifact!r} must be a relative path inside the run's output", hint=hint)
    if any(part == ".." for part in rel.parts):
        raise UsageError(f"--artifact {artifact!r} must not contain '..' segments", hint=hint)
    return rel


def resolve(root: Path, artifact: str) -> Path:
    """The real path of ``artifact`` under ``root``; refuses anything (symlinks included) that leaves it."""
    rel = check_relative(artifact)
    real_root = Path(os.path.realpath(root))
    candidate = Path(os.path.realpath(real_root.joinpath(*rel.parts)))
    if candidate != real_root and real_root not in candidate.parents:
        raise UsageError(f"--artifact {artifact!r} resolves outside the run's output (through a symlink)",
                         hint="tau run get only reads files inside the run's output directory")
    if not candidate.exists():
        raise NotFoundError(f"artifact {artifact!r} not found in {root}",
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
