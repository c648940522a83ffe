"""Pieces shared by the Job and RayJob renderers of this distribution."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from tau_core import rendering as r
from tau_core.config.run_model import RunConfig
from tau_core.errors import ConfigError


def image_of(config: RunConfig) -> str | None:
    """``runtime.image`` (the loader folds the ``run.image`` and ``image`` aliases into it)."""
    return str(config.runtime.image) if config.runtime.image else None


def entrypoint_of(config: RunConfig) -> str | None:
    """``entrypoint`` (the loader folds ``run.entrypoint``, ``run.script`` and ``script`` into it)."""
    return str(config.entrypoint) if config.entrypoint else None


def repository_root(request: r.RenderRequest) -> Path:
    """The boundary of files a render may embed: the Git worktree of the config, else its project
    directory (the parent of ``tau/``, or the config's own directory)."""
    from tau_core.config.targets import git_root

    base = (request.config_dir or Path.cwd()).resolve()
    return git_root(base) or (base.parent if base.name == "tau" else base)


def local_file(request: r.RenderRequest, rel: str, what: str) -> Path:
    """A config-relative path on the submitting machine, which must be a regular file inside the repository.

    Host files outside the repository are never embedded into a manifest: an absolute path is
    refused here (the Job renderer treats it as a path inside the pod instead), and so is a
    relative path or symlink that resolves outside the repository.
    """
    from tau_core.pathsafe import ensure_within, shown

    if Path(rel).is_absolute():
        raise ConfigError(f'{what} "{shown(rel)}" is an absolute path; only files inside the repository are '
                          "shipped with a run", hint="use a path relative to the config file's directory")
    path = (request.config_dir or Path.cwd()) / rel
    if not path.is_file():
        raise ConfigError(
            f'{what} "{rel}" was not found at {path}',
            hint="paths in tau.yaml are relative to the config file's directory",
        )
    ensure_within(repository_root(request), path, what=what, error=ConfigError,
                  hint="files shipped with a run must live inside the repository; copy the file in")
    return path


def resources(requests: Mapping[str, Any], limits: Mapping[str, Any], *, limit_follows_request: bool) -> dict[str, Any]:
    req = {k: str(v) for k, v in requests.items() if v not in (None, "")}
    lim = {k: str(v) for k, v in limits.items() if v not in (None, "")}
    if limit_follows_request:
        for k, v in req.items():
            lim.setdefault(k, v)
    out: dict[str, Any] = {}
    if lim:
        out["limits"] = dict(sorted(lim.items()))
    if req:
        out["requests"] = dict(sorted(req.items()))
    return out


def history_paths(output: str, history: list[str]) -> list[str]:
    return [h if h.startswith("/") else str(PurePosixPath(output) / h) for h in history]


def explicit(request: r.RenderRequest, path: str) -> bool:
    """Whether ``path`` was set by someone (config, flag, profile) rather than a built-in default."""
    source = request.sources.get(path)
    return source is not None and source != "default"
