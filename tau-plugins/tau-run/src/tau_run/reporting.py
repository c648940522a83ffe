"""How config problems reach the terminal: one line per problem, hints indented, warnings on stderr."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import NoReturn

import click

from tau_core.config.issues import ConfigIssue, ConfigValidationError
from tau_core.errors import ConfigError
from tau_core.output import error, style, warning


def print_warnings(issues: Iterable[ConfigIssue]) -> None:
    for issue in issues:
        warning(issue.format() + (f" ({issue.hint})" if issue.hint else ""))


def print_messages(messages: Iterable[str]) -> None:
    for message in messages:
        warning(message)


def fail_with_issues(exc: ConfigValidationError) -> NoReturn:
    """Print every issue of ``exc``, one per line with its hint, then fail with a one-line summary."""
    from tau_core.config.issues import MAX_LISTED_ISSUES

    print_warnings(exc.warnings[:MAX_LISTED_ISSUES])
    for issue in exc.issues[:MAX_LISTED_ISSUES]:
        error(issue.format())
        if issue.hint:
            click.echo("  " + style("hint:", sys.stderr, fg="cyan") + " " + issue.hint, err=True)
    count = len(exc.issues)
    if count > MAX_LISTED_ISSUES:  # 10,000 unknown keys must not print megabytes
        error(f"... and {count - MAX_LISTED_ISSUES} more problems (tau run validate -o json lists them all)")
    raise ConfigError(f"{exc.issues[0].file}: {count} problem{'s' if count != 1 else ''} found",
                      hint="fix the lines above, then run tau run validate again")
