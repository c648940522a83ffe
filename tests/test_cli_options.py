"""Shared click settings (tau_core.cli_options): every command takes -h, and both log commands the same flags."""

from __future__ import annotations

import click
from click.testing import CliRunner

from tau_core.cli import build_cli, run

LOG_FLAGS = {"--follow", "--tail", "--container", "--all-containers", "--previous", "--timestamps", "--prefix"}


def _walk(ctx: click.Context, command: click.Command, path: tuple[str, ...] = ()):
    yield path, command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                yield from _walk(ctx, sub, (*path, name))


def test_every_command_of_every_root_answers_dash_h():
    cli = build_cli()
    ctx = click.Context(cli)
    commands = list(_walk(ctx, cli))
    assert len(commands) > 20
    runner = CliRunner()
    for path, _command in commands:
        result = runner.invoke(cli, [*path, "-h"])
        assert result.exit_code == 0 and "Usage:" in result.output, (path, result.output)


def test_tau_logs_and_tau_run_logs_declare_the_same_log_flags():
    cli = build_cli()
    ctx = click.Context(cli)
    found = dict(_walk(ctx, cli))

    def flags(command: click.Command) -> dict[str, tuple[object, str | None]]:
        return {o: (p.default, p.help) for p in command.params if isinstance(p, click.Option) for o in p.opts
                if o in LOG_FLAGS}

    assert set(flags(found[("logs",)])) == LOG_FLAGS
    assert flags(found[("logs",)]) == flags(found[("run", "logs")])


def test_the_log_flags_are_validated_once_for_both_commands(capsys):
    for path in (["logs"], ["run", "logs"]):
        assert run(build_cli(), [*path, "train-1", "-c", "main", "--all-containers"]) == 2, path
        assert "-c/--container and --all-containers cannot be combined" in capsys.readouterr().err
        assert run(build_cli(), [*path, "train-1", "--tail", "-2"]) == 2, path
        assert "--tail must be -1" in capsys.readouterr().err
