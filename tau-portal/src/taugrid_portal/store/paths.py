"""Store resolution: ``--store``, then ``TAU_EXP_STORE``, then ``TAU_EXP_STORE_ROOT`` + context/team/project,
then the store that local runs write to (``tau run --local``), when it exists."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tau_core.errors import UsageError

ENV_STORE = "TAU_EXP_STORE"
ENV_ROOT = "TAU_EXP_STORE_ROOT"
ROOT_PARTS = ("TAU_CONTEXT", "TAU_TEAM", "TAU_PROJECT")


def _segment(name: str, value: str) -> str:
    if value != value.strip() or value in (".", "..") or "/" in value or "\\" in value or "\x00" in value:
        raise UsageError(
            f"{name}={value!r} must be a single path segment (no '/', '\\', '.', '..' or surrounding spaces)"
        )
    return value


def resolve_store(explicit: str | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The store root for this invocation (see the module docstring for the order)."""
    env = os.environ if env is None else env
    if explicit:
        return Path(explicit).expanduser().absolute()
    if env.get(ENV_STORE):
        return Path(env[ENV_STORE]).expanduser().absolute()
    root = env.get(ENV_ROOT)
    if root:
        missing = [n for n in ROOT_PARTS if not env.get(n)]
        if missing:
            raise UsageError(
                f"{ENV_ROOT} requires {', '.join(ROOT_PARTS)} (missing {', '.join(missing)})",
                hint="export the missing variables, or pass --store DIR",
            )
        parts = [_segment(n, env[n]) for n in ROOT_PARTS]
        return Path(root).expanduser().absolute().joinpath(*parts)
    from tau_core.backends.local.paths import exp_store_root

    local = exp_store_root(env)
    if (local / "manifest.json").is_file():
        return local.absolute()
    raise UsageError(
        f"--store is required (or set {ENV_STORE}, or set {ENV_ROOT} with {', '.join(ROOT_PARTS)})",
        hint="for example: taugrid-portal experiment init my-exp --store ./tau-exp",
    )
