"""Workspace connection: the repository descriptor and its verified, pinned activation."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tau_core.workspace.connection import Confirm, Connection, ConnectionStore, config_dir, connect
from tau_core.workspace.descriptor import (
    ConnectionDescriptor,
    find_descriptor,
    load_descriptor,
    require_descriptor,
)

__all__ = [
    "Confirm",
    "Connection",
    "ConnectionDescriptor",
    "ConnectionStore",
    "activate",
    "config_dir",
    "connect",
    "find_descriptor",
    "load_descriptor",
    "require_descriptor",
]


def activate(start: Path | None, *, confirm: Confirm, env: Mapping[str, str] | None = None) -> Connection | None:
    """The verified connection of the repository around ``start``; None when it has no descriptor
    or declares a local workspace."""
    path = find_descriptor(start)
    if path is None:
        return None
    descriptor = load_descriptor(path)
    if descriptor.is_local:
        return None
    return connect(descriptor, confirm=confirm, env=env)
