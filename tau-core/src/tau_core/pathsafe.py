"""Path safety: the one place that decides whether a path stays inside its root.

Every user- or file-supplied path that tau reads or writes under a root (a repository's
``tau/`` targets, a scaffold's output directory, a run's artifacts, an entrypoint) goes
through here, so the rules are the same everywhere:

* :func:`check_relative` - a relative POSIX path: no NUL or control characters, no backslash,
  not absolute, no ``~``, no ``..``, no component over 255 bytes and no more than 4096 bytes
  in all (the limits of Linux file systems, so the OS never answers "File name too long");
* :func:`is_within` / :func:`ensure_within` - after resolving every symlink, the path is the
  root or below it;
* :func:`resolve_within` - both at once: the real path of ``rel`` under ``root``;
* :func:`write_inside` - create a file under a root without following a symlink out of it.

Errors name the path (clipped, control characters escaped) and never echo file content.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from tau_core.errors import TauError, UsageError

MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 4096


def shown(path: object, limit: int = 120) -> str:
    """``path`` as it may appear in a message: escaped control characters, at most ``limit`` characters."""
    text = str(path).encode("unicode_escape", "backslashreplace").decode("ascii")
    return text if len(text) <= limit else f"{text[:limit]}... ({len(str(path))} characters)"


def check_lengths(path: str, *, what: str = "path", error: type[TauError] = UsageError) -> None:
    """Refuse a path the file system could not hold (too long in all or in one component)."""
    encoded = path.encode("utf-8", "surrogateescape")
    if len(encoded) > MAX_PATH_BYTES:
        raise error(f"{what} {shown(path)!s} is too long ({len(encoded)} bytes; at most {MAX_PATH_BYTES})",
                    hint="use a shorter path")
    for part in path.split("/"):
        if len(part.encode("utf-8", "surrogateescape")) > MAX_COMPONENT_BYTES:
            raise error(f"{what} {shown(path)} has a name longer than {MAX_COMPONENT_BYTES} bytes",
                        hint="use shorter file and directory names")


def check_relative(path: str, *, what: str = "path", hint: str | None = None,
                   error: type[TauError] = UsageError) -> PurePosixPath:
    """A relative path that cannot leave its root by its spelling alone (symlinks: see :func:`resolve_within`)."""
    hint = hint or "use a path relative to its root, with '/' separators"
    if path is None or not str(path).strip():
        raise error(f"{what} must not be empty", hint=hint)
    if "\0" in path:
        raise error(f"{what} must not contain a NUL byte", hint=hint)
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise error(f"{what} {shown(path)} contains control characters", hint=hint)
    check_lengths(path, what=what, error=error)
    if "\\" in path:
        raise error(f"{what} {shown(path)} must use '/' separators", hint=hint)
    rel = PurePosixPath(path)
    if rel.is_absolute() or path.startswith("~") or (len(path) > 1 and path[1] == ":" and path[0].isalpha()):
        raise error(f"{what} {shown(path)} must be a relative path", hint=hint)
    if any(part == ".." for part in rel.parts):
        raise error(f"{what} {shown(path)} must not contain '..' segments", hint=hint)
    return rel


def real(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(path))


def is_within(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether ``path``, every symlink resolved, is ``root`` (resolved) or below it."""
    real_root, target = real(root), real(path)
    return target == real_root or real_root in target.parents


def ensure_within(root: str | os.PathLike[str], path: str | os.PathLike[str], *, what: str = "path",
                  error: type[TauError] = UsageError, hint: str | None = None) -> Path:
    """The real path of ``path``; refuses it when it resolves outside ``root``."""
    if not is_within(root, path):
        raise error(f"{what} {shown(path)} resolves outside {shown(root)} (after '..' and symbolic links)",
                    hint=hint or "tau never follows a symbolic link out of its root; replace the link with a file")
    return real(path)


def resolve_within(root: str | os.PathLike[str], rel: str, *, what: str = "path",
                   error: type[TauError] = UsageError, hint: str | None = None) -> Path:
    """The real path of the relative ``rel`` under ``root``, refused when it escapes (by spelling or symlink)."""
    parts = check_relative(rel, what=what, hint=hint, error=error).parts
    return ensure_within(root, Path(root).joinpath(*parts), what=what, error=error, hint=hint)


def write_inside(root: str | os.PathLike[str], rel: str, data: str | bytes, *, what: str = "file",
                 mode: int | None = None) -> Path:
    """Write ``data`` to ``root/rel``, creating directories, never through a symlink that leaves ``root``."""
    target = Path(root).joinpath(*check_relative(rel, what=what).parts)
    ensure_within(root, existing_ancestor(target.parent), what=what)
    target.parent.mkdir(parents=True, exist_ok=True)
    ensure_within(root, target.parent, what=what)
    if target.is_symlink():
        raise UsageError(f"{what} {shown(target)} is a symbolic link; tau does not write through it",
                         hint="remove the link and run the command again")
    if isinstance(data, bytes):
        target.write_bytes(data)
    else:
        target.write_text(data)
    if mode is not None:
        target.chmod(mode)
    return target


def existing_ancestor(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (what a write there would go through)."""
    p = path
    while not (p.exists() or p.is_symlink()) and p != p.parent:
        p = p.parent
    return p
