"""Run the ``tau`` CLI in-process with an isolated plugin host and environment."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from click.testing import CliRunner

from tau_core.cli import cli, run
from tau_core.plugins import Host, set_host


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str
    args: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return (
            f"CliResult(args={self.args!r}, exit_code={self.exit_code}, "
            f"stdout={self.stdout[-2000:]!r}, stderr={self.stderr[-2000:]!r})"
        )


@dataclass
class TauCli:
    """Builds a fresh host per invocation from installed entry points plus inline plugins."""

    env: dict[str, str | None] = field(default_factory=dict)
    entry_points: bool = True
    inline: list[tuple[str, object]] = field(default_factory=list)

    def register(self, plugin: object, name: str | None = None) -> None:
        self.inline.append((name or str(getattr(plugin, "__name__", type(plugin).__name__)), plugin))

    def unregister(self, name: str) -> None:
        self.inline = [(n, p) for n, p in self.inline if n != name]

    def host(self) -> Host:
        return Host.create(entry_points=self.entry_points, extra_plugins=self.inline, env=dict(os.environ))

    def __call__(self, *args: str, input: str | None = None, env: Mapping[str, str | None] | None = None,
                 **_: Any) -> CliResult:
        argv: Sequence[str] = [str(a) for a in args]
        runner = CliRunner()
        merged = {**self.env, **(env or {})}
        with runner.isolation(input=input, env=merged) as (out, err, _mixed):
            previous = set_host(None)
            try:
                set_host(self.host())
                code = run(cli, argv)
            except SystemExit as exc:  # a command calling sys.exit directly
                code = exc.code if isinstance(exc.code, int) else 1
            finally:
                set_host(previous)
                sys.stdout.flush()
                sys.stderr.flush()
            stdout = out.getvalue().decode("utf-8", "replace")
            stderr = err.getvalue().decode("utf-8", "replace")
        return CliResult(code, stdout, stderr, tuple(argv))
