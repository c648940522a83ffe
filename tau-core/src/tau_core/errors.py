"""Typed, user-facing errors.

A command that fails raises a :class:`TauError` (or a subclass). The CLI edge turns it
into ``error: <message>`` and, when present, ``hint: <next step>`` on stderr, and exits
with the error's exit code. Anything else that escapes a command is a bug.
"""

from __future__ import annotations

from tau_core.envvars import EXIT_FAILURE, EXIT_USAGE


class TauError(Exception):
    """A failure the user can act on: a one-line message plus an optional hint."""

    exit_code: int = EXIT_FAILURE

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class UsageError(TauError):
    """The command line itself is wrong (bad flag combination, missing argument)."""

    exit_code = EXIT_USAGE


class ConfigError(TauError):
    """A configuration or descriptor file is invalid."""


class PluginError(TauError):
    """The plugin set is inconsistent (for example two distributions claim one root)."""


class NotFoundError(TauError):
    """A named object (run, workspace, artifact, store) does not exist."""


class ConflictError(TauError):
    """The request conflicts with existing state."""


class ClusterError(TauError):
    """The cluster could not be reached or refused the request."""


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is Ctrl-C, or an error raised while Ctrl-C was unwinding.

    A KeyboardInterrupt that lands inside ``threading.Condition.wait`` (a thread waiting on an event loop's
    answer) can leave the condition's lock released, and leaving the ``with`` block then raises
    ``RuntimeError: cannot release un-acquired lock`` in place of the interrupt.  The interrupt stays on the
    error's context chain, which is what this looks for.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
