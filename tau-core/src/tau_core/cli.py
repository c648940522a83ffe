"""The ``tau`` entry point: a click group whose sub-commands are plugin-provided roots.

Root names and their one-line help come from the ``tau_register_roots`` hook, so
``tau --help`` imports no root implementation.  A root's click command is imported only
when it is invoked.  Errors are turned into ``error:``/``hint:`` lines and exit codes here,
at the edge, and nowhere else.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from tau_core import __version__
from tau_core.cli_options import CONTEXT_SETTINGS
from tau_core.envvars import EXIT_INTERRUPTED, EXIT_USAGE
from tau_core.errors import PluginError, TauError, UsageError, interrupted
from tau_core.output import error, terminal_guard
from tau_core.plugins import ENV_BLOCK, Host, get_host

#: Where an unexpected error points: no tracker URL is invented (see SECURITY.md, "Reporting").
BUG_HINT = ("this is a bug in tau; please report it to the maintainers with the command and the traceback "
            "TAU_DEBUG=1 prints (SECURITY.md, 'Reporting')")


class RootGroup(click.Group):
    """A group whose commands are the host's registered roots, loaded on demand."""

    def __init__(self, *args: Any, host_factory: Any = get_host, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.host_factory = host_factory

    @property
    def host(self) -> Host:
        return self.host_factory()  # type: ignore[no-any-return]

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.host.roots())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        roots = self.host.roots()
        entry = roots.get(cmd_name)
        if entry is None:
            for info in self.host.failed():
                if cmd_name in (info.name, info.dist, info.dist.removeprefix("tau-")):
                    raise PluginError(
                        f"command root '{cmd_name}' is unavailable: plugin '{info.name}' from {info.dist} "
                        f"failed to load ({info.error})",
                        hint=f"reinstall {info.dist} (pip install --force-reinstall {info.dist}) "
                        f"or disable it with {ENV_BLOCK}={info.name}",
                    )
            return None
        command = entry.load()
        if not isinstance(command, click.Command):
            raise PluginError(
                f"command root '{cmd_name}' from {entry.dist} is not a click command ({entry.target!r})",
                hint=f"report this to the maintainers of {entry.dist}",
            )
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        roots = self.host.roots()
        rows = [(name, str(roots[name].meta.get("help", ""))) for name in roots]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
        failed = self.host.failed()
        if failed:
            with formatter.section("Plugins that failed to load"):
                formatter.write_dl([(p.name, f"{p.dist}: {p.error}") for p in failed])


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"tau version {__version__}")
        ctx.exit(0)


def build_cli(host_factory: Any = get_host) -> click.Group:
    @click.group(
        cls=RootGroup,
        host_factory=host_factory,
        context_settings=CONTEXT_SETTINGS,
        help="Repository-first AI workloads on Kubernetes.\n\n"
        "Describe a run in tau.yaml, then submit and follow it with `tau run`. "
        "Every command root below is a plugin; `tau version` lists them.",
    )
    @click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
                  help="Print the tau version and exit.")
    def tau() -> None:
        pass

    return tau


cli = build_cli()


def run(command: click.Command, args: Sequence[str] | None = None, prog_name: str = "tau") -> int:
    """Invoke ``command`` and turn every outcome into an exit code (the CLI edge).

    Everything the command writes to stdout/stderr passes the terminal guard (no raw control bytes).
    """
    with terminal_guard():
        return _run(command, args, prog_name)


def _os_error(exc: OSError) -> TauError:
    """An operating-system failure as a typed error naming the file (the command's own wording is better)."""
    from tau_core.output import clip

    reason = exc.strerror or type(exc).__name__
    where = f": {clip(exc.filename, 160)}" if exc.filename else ""
    hints = {errno.EROFS: ("the file system is read-only; point TAU_DATA_DIR (or --output/--store) "
                          "at a writable directory"),
             errno.EACCES: "check the permissions, or point TAU_DATA_DIR (or --output/--store) elsewhere",
             errno.ENOSPC: "the disk is full; free some space and run the command again",
             errno.ENAMETOOLONG: "use a shorter name or path"}
    return TauError(f"{reason}{where}", hint=hints.get(exc.errno or 0, "check the path and its permissions"))


def _run(command: click.Command, args: Sequence[str] | None, prog_name: str) -> int:
    try:
        # In non-standalone mode click *returns* the code of ctx.exit()/click.exceptions.Exit.
        result = command.main(args=list(args) if args is not None else None, prog_name=prog_name,
                              standalone_mode=False)
        if isinstance(result, int) and not isinstance(result, bool):
            return result
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort as exc:
        if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):  # click's wrapping of Ctrl-C
            error("interrupted")
            return EXIT_INTERRUPTED
        error("aborted")
        return 1
    except click.UsageError as exc:
        exc.show()
        return EXIT_USAGE
    except click.ClickException as exc:
        error(exc.format_message())
        return 1
    except UsageError as exc:
        error(exc.message, exc.hint)
        return exc.exit_code
    except TauError as exc:
        error(exc.message, exc.hint)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("", err=True)
        error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    except OSError as exc:
        typed = _os_error(exc)
        error(typed.message, typed.hint)
        return typed.exit_code
    except Exception as exc:
        if interrupted(exc):  # an error raised while Ctrl-C unwound (see tau_core.errors.interrupted)
            click.echo("", err=True)
            error("interrupted")
            return EXIT_INTERRUPTED
        if os.environ.get("TAU_DEBUG", "") not in ("", "0"):
            import traceback

            traceback.print_exc()
        error(
            f"internal error: {type(exc).__name__}: {exc}",
            BUG_HINT,
        )
        return 1
    return 0


def main(args: Sequence[str] | None = None) -> None:
    sys.exit(run(cli, args))


if __name__ == "__main__":  # `python -m tau_core.cli`: the same CLI without the console script on PATH
    main()
