"""Typed options of the ``tau cluster`` commands, their defaults and validation."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from tau_core import __version__, keys
from tau_core.errors import UsageError

DEFAULT_RELEASE = "taugrid"
DEFAULT_NAMESPACE = keys.SYSTEM_NAMESPACE_DEFAULT
DEFAULT_CHART = "oci://mcr.microsoft.com/aks/ai-runtime/helm/taugrid"
DEFAULT_VERSION = __version__  # the chart is released with the same version as tau (tests/tools/release.py)
DEFAULT_TIMEOUT = "15m"

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, flag: str) -> float:
    """Seconds in a Go-style duration (``15m``, ``1h30m``, ``90s``); > 0 or a usage error naming ``flag``."""
    value = text.strip()
    pos, total = 0, 0.0
    for match in _DURATION.finditer(value):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not value or pos != len(value):
        raise UsageError(f"invalid {flag}: {text!r} is not a duration", hint="use a value such as 90s, 15m or 1h")
    if total <= 0:
        raise UsageError(f"invalid {flag}: {text!r} must be greater than zero")
    return total


def require(value: str, flag: str) -> str:
    if not value.strip():
        raise UsageError(f"{flag} must not be empty")
    return value.strip()


def is_local_chart(chart: str) -> bool:
    return "://" not in chart and Path(chart).expanduser().exists()


@attrs.frozen
class InstallOptions:
    release: str = DEFAULT_RELEASE
    namespace: str = DEFAULT_NAMESPACE
    chart: str = DEFAULT_CHART
    version: str = DEFAULT_VERSION
    timeout: str = DEFAULT_TIMEOUT
    values: tuple[str, ...] = ()
    sets: tuple[str, ...] = ()
    set_strings: tuple[str, ...] = ()
    create_namespace: bool = True
    wait: bool = False
    atomic: bool = False
    dry_run: bool = False
    dependency_update: bool = True
    context: str | None = None

    def validated(self) -> InstallOptions:
        for value, flag in ((self.release, "--release"), (self.namespace, "--namespace"), (self.chart, "--chart"),
                            (self.version, "--version"), (self.timeout, "--timeout")):
            require(value, flag)
        parse_duration(self.timeout, "--timeout")
        for path in self.values:
            if not Path(path).expanduser().is_file():
                raise UsageError(f"--values {path}: no such file")
        return self

    @property
    def timeout_seconds(self) -> float:
        return parse_duration(self.timeout, "--timeout")

    @property
    def default_chart(self) -> bool:
        return self.chart == DEFAULT_CHART

    def chart_args(self) -> list[str]:
        """The chart reference plus ``--version`` (a local chart directory has no version to select)."""
        return [self.chart] if is_local_chart(self.chart) else [self.chart, "--version", self.version]

    def value_args(self) -> list[str]:
        args: list[str] = []
        for path in self.values:
            args += ["-f", path]
        for item in self.sets:
            args += ["--set", item]
        for item in self.set_strings:
            args += ["--set-string", item]
        return args


@attrs.frozen
class UninstallOptions:
    release: str = DEFAULT_RELEASE
    namespace: str = DEFAULT_NAMESPACE
    chart: str = DEFAULT_CHART
    timeout: str = DEFAULT_TIMEOUT
    wait: bool = True
    dry_run: bool = False
    keep_history: bool = False
    no_hooks: bool = False
    yes: bool = False
    drain_queue: bool = True
    context: str | None = None

    def validated(self) -> UninstallOptions:
        require(self.release, "--release")
        require(self.namespace, "--namespace")
        if self.drain_queue and not self.dry_run:
            require(self.chart, "--chart")
        parse_duration(self.timeout, "--timeout")
        return self
