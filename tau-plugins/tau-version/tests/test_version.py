"""`tau version`: the version, the installed plugin set, and its machine-readable forms."""

from __future__ import annotations

import json

import click
from ruamel.yaml import YAML

from tau_core import __version__
from tau_core.hookspecs import hookimpl


def test_short_prints_the_bare_version(tau_cli):
    result = tau_cli("version", "--short")
    assert (result.exit_code, result.stdout, result.stderr) == (0, f"{__version__}\n", "")


def test_root_version_flag(tau_cli):
    result = tau_cli("--version")
    assert (result.exit_code, result.stdout) == (0, f"tau version {__version__}\n")


def test_table_lists_distribution_roots_hooks_and_status(tau_cli):
    result = tau_cli("version")
    assert result.exit_code == 0, result
    lines = result.stdout.splitlines()
    assert lines[0] == f"tau {__version__}"
    header = lines[2].split()
    assert header == ["DISTRIBUTION", "VERSION", "ROOTS", "HOOKS", "STATUS"]
    row = next(line.split() for line in lines[3:] if line.startswith("tau-version"))
    assert row == ["tau-version", __version__, "version", "roots", "loaded"]


def test_json_and_yaml_documents_agree(tau_cli):
    as_json = json.loads(tau_cli("version", "-o", "json").stdout)
    as_yaml = YAML(typ="safe").load(tau_cli("version", "-o", "yaml").stdout)
    assert as_json == as_yaml
    assert as_json["version"] == __version__
    entry = next(p for p in as_json["plugins"] if p["distribution"] == "tau-version")
    assert entry == {"plugin": "version", "distribution": "tau-version", "version": __version__,
                     "status": "loaded", "roots": ["version"], "hooks": ["tau_register_roots"]}


class _Extra:
    @hookimpl
    def tau_register_roots(self, register):
        register("extra", click.command(name="extra")(lambda: None), help="Extra root.")

    @hookimpl
    def tau_register_gpu_class_rules(self, register):
        register("extra-rule", lambda value: None)


class _Unknown:
    @hookimpl
    def tau_not_a_hook(self):
        return None


def test_inline_plugins_and_failures_are_reported(tau_cli, tau_plugins):
    tau_plugins.register(_Extra(), name="extra-plugin")
    tau_plugins.register(_Unknown(), name="bad-plugin")
    result = tau_cli("version", "-o", "json")
    assert result.exit_code == 0, result
    plugins = {p["plugin"]: p for p in json.loads(result.stdout)["plugins"]}
    assert plugins["extra-plugin"]["roots"] == ["extra"]
    assert plugins["extra-plugin"]["hooks"] == ["tau_register_gpu_class_rules", "tau_register_roots"]
    assert plugins["bad-plugin"]["status"] == "failed"
    assert "tau_not_a_hook" in plugins["bad-plugin"]["error"]
    assert "bad-plugin" in result.stderr  # the one-line warning


def test_disabled_plugins_are_listed_as_disabled(tau_cli):
    result = tau_cli("version", "-o", "json", env={"TAU_DISABLE_PLUGINS": "nonexistent,version"})
    # the version root itself is disabled, so the command is unknown
    assert result.exit_code == 2
    result = tau_cli("--help", env={"TAU_PLUGINS": ""})
    assert result.exit_code == 0
    assert "Commands:" not in result.stdout  # no root loaded at all


def test_every_row_shows_the_version_its_distribution_carries(tau_cli):
    """The numbers are the installed wheels' metadata (tau-core's own hooks included), all equal to tau's."""
    from importlib.metadata import version

    doc = json.loads(tau_cli("version", "-o", "json").stdout)
    rows = [p for p in doc["plugins"] if p["status"] == "loaded"]
    assert {p["distribution"] for p in rows} >= {"tau-core", "tau-version"}
    for row in rows:
        assert row["version"] == version(row["distribution"]) == doc["version"], row
