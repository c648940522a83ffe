"""Repository discovery, defined once: the Git worktree root above a path and its HEAD commit.

Nothing runs ``git``: the root is the nearest directory holding a ``.git`` directory or file,
and the HEAD commit is read from ``.git/HEAD`` and the ref it names (worktrees and packed refs
included).
"""

from __future__ import annotations

from pathlib import Path


def git_root(start: Path) -> Path | None:
    """The Git worktree root containing ``start`` (a ``.git`` directory or file), or None."""
    start = start.resolve()
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def head_sha(start: Path) -> str | None:
    """``git rev-parse HEAD`` of the repository containing ``start``, without a subprocess (None outside one)."""
    root = git_root(start)
    if root is None:
        return None
    try:
        return _read_head(_git_dir(root))
    except OSError:
        return None


def _git_dir(root: Path) -> Path:
    git = root / ".git"
    if git.is_file():
        text = git.read_text(encoding="utf-8").strip()
        if text.startswith("gitdir:"):
            git = (root / text.split(":", 1)[1].strip()).resolve()
    return git


def _read_head(git: Path) -> str | None:
    head = (git / "HEAD").read_text(encoding="utf-8").strip()
    if not head.startswith("ref:"):
        return head or None
    ref = head.split(":", 1)[1].strip()
    ref_file = git / ref
    if ref_file.is_file():
        return ref_file.read_text(encoding="utf-8").strip() or None
    common = git / "commondir"
    base = (git / common.read_text(encoding="utf-8").strip()).resolve() if common.is_file() else git
    if (base / ref).is_file():
        return (base / ref).read_text(encoding="utf-8").strip() or None
    packed = base / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8").splitlines():
            if line.endswith(" " + ref):
                return line.split(" ", 1)[0]
    return None
