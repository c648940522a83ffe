"""The tau_cli / tau_plugins / tau_env fixtures that plugin authors use."""

from __future__ import annotations

import os

import click

from tau_core.hookspecs import hookimpl


@click.command()
def show_env() -> None:
    click.echo(os.environ.get("TAU_CONFIG_DIR", ""))
    click.echo(os.environ.get("EXTRA", "-"))
    click.echo("err line", err=True)


class EnvRoot:
    @hookimpl
    def tau_register_roots(self, register):
        register("show-env", show_env, help="Print the isolated environment.")


def test_cli_runs_in_process_with_isolated_env(tau_cli, tau_plugins, tau_env):
    tau_plugins.register(EnvRoot(), name="env-root")
    result = tau_cli("show-env", env={"EXTRA": "yes"})
    assert result.exit_code == 0, result
    assert result.stdout.splitlines() == [tau_env["TAU_CONFIG_DIR"], "yes"]
    assert result.stderr == "err line\n"
    assert os.environ.get("EXTRA") is None  # restored after the call
    assert os.environ.get("TAU_CONFIG_DIR") != tau_env["TAU_CONFIG_DIR"]


def test_inline_plugins_are_gone_after_unregister(tau_cli, tau_plugins):
    tau_plugins.register(EnvRoot(), name="env-root")
    assert tau_cli("show-env").exit_code == 0
    tau_plugins.unregister("env-root")
    assert tau_cli("show-env").exit_code == 2


def test_entry_points_can_be_hidden(tau_cli, tau_plugins):
    tau_plugins.entry_points = False
    tau_plugins.register(EnvRoot(), name="env-root")
    result = tau_cli("--help")
    commands = result.stdout.split("Commands:")[1].split()
    assert commands[0] == "show-env"
    assert "version" not in commands


def test_each_call_builds_a_fresh_host(tau_cli, tau_plugins):
    calls = []

    class Counting:
        @hookimpl
        def tau_register_roots(self, register):
            calls.append(1)
            register("count", click.command(name="count")(lambda: None), help="Count.")

    tau_plugins.register(Counting(), name="counting")
    tau_cli("count")
    tau_cli("count")
    assert len(calls) == 2


def test_usage_errors_exit_2_and_tau_errors_exit_1(tau_cli, tau_plugins):
    from tau_core.errors import NotFoundError

    @click.command()
    def fail() -> None:
        raise NotFoundError("run 'x' not found", hint="run `tau run list`")

    class P:
        @hookimpl
        def tau_register_roots(self, register):
            register("fail", fail, help="Fail.")

    tau_plugins.register(P(), name="failing")
    result = tau_cli("fail")
    assert (result.exit_code, result.stderr) == (1, "error: run 'x' not found\nhint: run `tau run list`\n")
    result = tau_cli("fail", "--bogus")
    assert result.exit_code == 2
    assert "No such option '--bogus'" in result.stderr
