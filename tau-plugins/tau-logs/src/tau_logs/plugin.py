"""Registers the ``logs`` root. Import-light: the command lives in ``tau_logs.cli``."""

from tau_core.hookspecs import hookimpl


@hookimpl
def tau_register_roots(register):  # type: ignore[no-untyped-def]
    register("logs", "tau_logs.cli:logs", help="Find a run through configured Tau workspaces and stream its logs.")
