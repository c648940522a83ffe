"""Click settings and options that more than one command declares: one definition each.

* :data:`CONTEXT_SETTINGS`: the ``context_settings`` of every tau command and group (``-h`` as
  well as ``--help``, help text up to 100 columns).
* :func:`logs_options`, :func:`log_options` and :func:`print_logs`: the seven log flags of
  ``tau logs`` and ``tau run logs``, their validation, and the print loop (Ctrl-C ends a follow
  with exit 130 and says the run keeps running).

Cheap to import: click and :mod:`tau_core.output` are loaded by every command anyway.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tau_core.errors import UsageError, interrupted
from tau_core.output import info

if TYPE_CHECKING:
    from tau_core.lifecycle.base import ExecutionBackend, LogOptions, RunRef

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def logs_options(fn: F) -> F:
    """Add ``--follow --tail --container --all-containers --previous --timestamps --prefix`` to a command."""
    options = [
        click.option("-f", "--follow", is_flag=True, help="Stream new log lines until the run ends."),
        click.option("--tail", type=int, default=200, show_default=True,
                     help="Lines from the end; -1 = all; 0 prints nothing unless following."),
        click.option("-c", "--container", default=None, help="Container or init container (batch Jobs only)."),
        click.option("--all-containers", is_flag=True, help="Every container (batch Jobs only)."),
        click.option("--previous", is_flag=True, help="The previous container instance (batch Jobs only)."),
        click.option("--timestamps", is_flag=True, help="Prefix lines with timestamps (batch Jobs only)."),
        click.option("--prefix", is_flag=True, help="Prefix lines with pod/container (batch Jobs only)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def kusto_log_options(fn: F) -> F:
    """Add ``--kusto-cluster --kusto-endpoint --kusto-database``: where the platform keeps container logs."""
    options = [
        click.option("--kusto-cluster", default=None,
                     help="Cluster value in ADX Logs.ContainerLogs (for a run whose pods and archive are gone)."),
        click.option("--kusto-endpoint", default=None, help="ADX endpoint (absolute https, no path or query)."),
        click.option("--kusto-database", default=None, help="ADX database holding ContainerLogs."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def log_options(follow: bool, tail: int, container: str | None, all_containers: bool, previous: bool,
                timestamps: bool, prefix: bool) -> LogOptions:
    """The validated :class:`~tau_core.lifecycle.base.LogOptions` of the :func:`logs_options` flags."""
    from tau_core.lifecycle.base import LogOptions

    if container and all_containers:
        raise UsageError("-c/--container and --all-containers cannot be combined")
    if tail < -1:
        raise UsageError("--tail must be -1 (all lines) or a number of lines >= 0")
    return LogOptions(follow=follow, tail=None if tail == -1 else tail, container=container,
                      all_containers=all_containers, previous=previous, timestamps=timestamps, prefix=prefix)


def print_logs(backend: ExecutionBackend, ref: RunRef, options: LogOptions) -> None:
    """Print ``backend.logs(ref, options)`` line by line (flushed while following)."""
    if options.tail == 0 and not options.follow:
        return
    try:
        for line in backend.logs(ref, options):
            click.echo(line)
            if options.follow:
                sys.stdout.flush()
    except BaseException as exc:
        if not interrupted(exc):
            raise
        click.echo("", err=True)
        info(f"stopped following; {ref.name} keeps running")
        sys.exit(130)
