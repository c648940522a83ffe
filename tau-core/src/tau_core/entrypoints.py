"""A small, fast reader of installed entry points.

``importlib.metadata`` costs about as much to import as click itself (it pulls in the
``email`` package to parse metadata), which would double the start-up of ``tau --help``.
Entry points only need the ``*.dist-info/entry_points.txt`` files on ``sys.path`` and the
``Name``/``Version`` headers of ``METADATA``, so this module reads exactly those, in
``sys.path`` order, with the first copy of a distribution winning (as ``importlib.metadata``
does).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class EntryPoint:
    name: str
    value: str
    group: str
    dist: str
    version: str

    def load(self) -> object:
        from tau_core.plugins import load_target

        return load_target(self.value)


def _headers(info_dir: str) -> tuple[str, str]:
    name = version = ""
    for filename in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(info_dir, filename), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line.strip():
                        break
                    if line.startswith("Name:"):
                        name = line[5:].strip()
                    elif line.startswith("Version:"):
                        version = line[8:].strip()
                    if name and version:
                        break
            break
        except OSError:
            continue
    return name, version


def _normalize(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def entry_points(group: str, path: list[str] | None = None) -> list[EntryPoint]:
    """Every entry point of ``group`` from distributions on ``path`` (default ``sys.path``)."""
    seen: set[str] = set()
    found: list[EntryPoint] = []
    for directory in path if path is not None else sys.path:
        try:
            names = sorted(os.listdir(directory or "."))
        except OSError:
            continue
        for entry in names:
            if not entry.endswith((".dist-info", ".egg-info")):
                continue
            info_dir = os.path.join(directory or ".", entry)
            stem = entry.rsplit(".", 1)[0]
            key = _normalize(stem.split("-", 1)[0])
            if key in seen:
                continue
            seen.add(key)
            try:
                with open(os.path.join(info_dir, "entry_points.txt"), encoding="utf-8") as fh:
                    text = fh.read()
            except OSError:
                continue
            section = None
            dist = version = None
            for raw in text.splitlines():
                line = raw.strip()
                if not line or line.startswith(("#", ";")):
                    continue
                if line.startswith("[") and line.endswith("]"):
                    section = line[1:-1].strip()
                    continue
                if section != group or "=" not in line:
                    continue
                if dist is None:
                    dist, version = _headers(info_dir)
                    dist = dist or stem.split("-", 1)[0]
                ep_name, _, value = line.partition("=")
                found.append(EntryPoint(ep_name.strip(), value.strip(), group, dist, version or ""))
    return found
