"""Cross-distribution checks of the installed CLI surface.

* `--help` succeeds for every command of every installed root (and of taugrid-portal).
* `tau --help`, `tau version` and `tau <root> [<verb>] --help` import no heavy library.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import click
import pytest

from tau_core.plugins import Host

HEAVY = ("kubernetes_asyncio", "polars", "pyarrow", "starlette", "uvicorn", "jinja2", "azure", "msal", "ray")


def _walk(command: click.Command, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from _walk(sub, (*path, name))


def _all_tau_commands() -> list[tuple[str, ...]]:
    host = Host.create(env={})
    paths: list[tuple[str, ...]] = [()]
    for name in host.roots():
        paths.extend(_walk(host.roots()[name].load(), (name,)))
    return paths


TAU_COMMANDS = _all_tau_commands()


@pytest.mark.parametrize("path", TAU_COMMANDS, ids=lambda p: " ".join(("tau", *p)))
def test_help_succeeds_for_every_command(tau_cli, path):
    result = tau_cli(*path, "--help")
    assert result.exit_code == 0, result
    assert "Usage:" in result.stdout
    assert result.stderr == ""


def _portal_commands() -> list[tuple[str, ...]]:
    try:
        from taugrid_portal.cli import cli as portal
    except ImportError:
        return []
    return list(_walk(portal, ()))


@pytest.mark.parametrize("path", _portal_commands(), ids=lambda p: " ".join(("taugrid-portal", *p)))
def test_help_succeeds_for_every_portal_command(path):
    from click.testing import CliRunner

    from taugrid_portal.cli import cli as portal

    result = CliRunner().invoke(portal, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


PROBE = """
import json, os, sys
from tau_core.cli import cli, run
code = run(cli, sys.argv[1:])
heavy = sorted({m.split('.')[0] for m in sys.modules} & set(os.environ['HEAVY'].split(',')))
with open(os.environ['PROBE_OUT'], 'w') as fh:
    json.dump({'code': code, 'heavy': heavy}, fh)
"""


def _lazy_cases() -> list[tuple[str, ...]]:
    cases = [("--help",), ("version",), ("version", "-o", "json"), ("--version",)]
    cases += [(*p, "--help") for p in TAU_COMMANDS if 1 <= len(p) <= 2]
    return cases


@pytest.mark.parametrize("args", _lazy_cases(), ids=lambda a: " ".join(("tau", *a)))
def test_fast_paths_import_no_heavy_library(tmp_path, args):
    out = tmp_path / "probe.json"
    env = {**os.environ, "HEAVY": ",".join(HEAVY), "PROBE_OUT": str(out), "NO_COLOR": "1"}
    subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True, timeout=60,
                   check=False)
    report = json.loads(out.read_text())
    assert report["code"] == 0
    assert report["heavy"] == [], f"`tau {' '.join(args)}` imported {report['heavy']}"


def test_version_reports_every_installed_distribution(tau_cli):
    result = tau_cli("version", "-o", "json")
    assert result.exit_code == 0, result
    doc = json.loads(result.stdout)
    roots = {root for p in doc["plugins"] for root in p["roots"]}
    assert set(Host.create(env={}).roots()) == roots
    assert all(p["status"] == "loaded" for p in doc["plugins"]), doc
