"""Pieces shared by the Job and RayJob renderers of this distribution."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from tau_core import rendering as r
from tau_core.errors import ConfigError


def image_of(config: Mapping[str, Any]) -> str | None:
    """``runtime.image`` > ``run.image`` > ``image``."""
    for path in ("runtime.image", "run.image", "image"):
        value = r.get(config, path)
        if value:
            return str(value)
    return None


def entrypoint_of(config: Mapping[str, Any]) -> str | None:
    """``run.entrypoint`` > ``run.script`` > ``entrypoint`` > ``script``."""
    for path in ("run.entrypoint", "run.script", "entrypoint", "script"):
        value = r.get(config, path)
        if value:
            return str(value)
    return None


def local_file(request: r.RenderRequest, rel: str, what: str) -> Path:
    """A config-relative path on the submitting machine, which must be a regular file."""
    path = Path(rel)
    if not path.is_absolute():
        path = (request.config_dir or Path.cwd()) / path
    if not path.is_file():
        raise ConfigError(
            f'{what} "{rel}" was not found at {path}',
            hint="paths in tau.yaml are relative to the config file's directory",
        )
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
