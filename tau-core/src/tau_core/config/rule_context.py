"""The rule machinery of the direct run config: the context every rule reads and reports through,
the rule registry, lazily compiled patterns and small path helpers."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tau_core.config.issues import ConfigIssue, PathKey
from tau_core.config.loader import Document
from tau_core.config.reserved import (
    MAX_LITERAL_ENV_TOTAL_BYTES,
    MAX_LITERAL_ENV_VALUE_BYTES,
)


class _Lazy:
    """A regular expression compiled on first use (most rules never run for a given config)."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._compiled: re.Pattern[str] | None = None

    def _get(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern)
        return self._compiled

    def match(self, text: str) -> re.Match[str] | None:
        return self._get().match(text)

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self._get().fullmatch(text)

    def search(self, text: str) -> re.Match[str] | None:
        return self._get().search(text)


DNS1123_LABEL = _Lazy(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = _Lazy(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = _Lazy(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = _Lazy(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
ENV_NAME = _Lazy(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
SECRET_KEY = _Lazy(r"^[-._a-zA-Z0-9]+$")
PINNED_IMAGE = _Lazy(
    r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127})?@sha256:[0-9a-f]{64}$"
)
TELEMETRY_ID = _Lazy(r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")
SHAPE = _Lazy(r"^([0-9]+)x([a-z0-9][-a-z0-9]*)$")
CONFIG_KEY = _Lazy(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

MAX_ENV_VALUE_BYTES = MAX_LITERAL_ENV_VALUE_BYTES
MAX_ENV_TOTAL_BYTES = MAX_LITERAL_ENV_TOTAL_BYTES
MAX_IMAGE_ASSETS = 8
PINNED_MESSAGE = "must be a complete lowercase OCI image reference pinned by an @sha256:<64 lowercase hex> digest"
PINNED_HINT = "resolve the digest once (docker buildx imagetools inspect) and write <repo>@sha256:<digest>"


@dataclass
class RuleContext:
    doc: Document
    values: dict[str, Any]
    origins: dict[str, tuple[PathKey, ...]]
    engine: str
    base_dir: Path | None = None
    check_files: bool = True
    name_from_flag: bool = False
    issues: list[ConfigIssue] = field(default_factory=list)
    warnings: list[ConfigIssue] = field(default_factory=list)

    def get(self, path: str, default: Any = None) -> Any:
        return self.values.get(path, default)

    def has(self, path: str) -> bool:
        return path in self.values

    def where(self, path: str) -> tuple[PathKey, ...]:
        if path in self.origins:
            return self.origins[path]
        head = path.split(".")[0]
        for canonical, origin in self.origins.items():
            if path.startswith(canonical + "."):
                rest = path[len(canonical) + 1:]
                return (*origin, *rest.split("."))
        return tuple(path.split(".")) if head else ()

    def shown(self, path: str) -> str:
        where = self.where(path)
        out = ""
        for part in where:
            out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
        return out or path

    def error(self, path: str, message: str, hint: str | None = None, *, at: tuple[PathKey, ...] | None = None,
              shown: str | None = None) -> None:
        from tau_core.config.catalog import hint_for

        where = at if at is not None else self.where(path)
        self.issues.append(self.doc.issue(where, shown or self.shown(path), message, hint or hint_for(shown or path)))

    def warn(self, path: str, message: str, hint: str | None = None) -> None:
        self.warnings.append(self.doc.issue(self.where(path), self.shown(path), message, hint, severity="warning"))


Rule = Callable[[RuleContext], None]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def run_all(ctx: RuleContext) -> None:
    for fn in RULES:
        fn(ctx)


# -- helpers ----------------------------------------------------------------------------------

def clean_absolute(value: str) -> bool:
    return (
        value == value.strip() and value.startswith("/") and not value.startswith("//") and "\\" not in value
        and "\x00" not in value and posixpath.normpath(value) == value
    )


def under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def overlaps(a: str, b: str) -> bool:
    return under(a, b) or under(b, a)


def pinned(image: str) -> bool:
    return bool(PINNED_IMAGE.match(image))


def intent(ctx: RuleContext) -> str:
    from tau_core.config.validate import workload_kind

    kind, _ = workload_kind(ctx.values)
    if ctx.has("engine") and kind:
        return f"engine={ctx.get('engine')}/workload_kind={kind}"
    if ctx.has("engine"):
        return f"engine={ctx.get('engine')}"
    if kind:
        return f"workload_kind={kind}"
    return f"implicit dispatch (engine {ctx.engine})"


def has_pvc(ctx: RuleContext) -> bool:
    return bool(ctx.get("storage.data_pvc") or ctx.get("storage.result_pvc") or ctx.get("storage.volumes"))


def mount_roots(ctx: RuleContext) -> list[str]:
    roots = []
    if ctx.get("storage.data_pvc") or ctx.get("storage.result_pvc"):
        roots.append("/data")
    volumes = ctx.get("storage.volumes") or []
    mounts = ctx.get("storage.mounts") or []
    if volumes and not mounts:
        roots.append("/data")
    for spec in mounts:
        parts = spec.split(":")
        if len(parts) >= 2 and parts[1].startswith("/") and (len(parts) < 3 or parts[2] != "ro"):
            roots.append(parts[1])
    return roots
