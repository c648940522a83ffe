"""Registers the ``version`` root. Kept import-light: the command lives in ``tau_version.cli``."""

from tau_core.hookspecs import hookimpl


@hookimpl
def tau_register_roots(register):  # type: ignore[no-untyped-def]
    register("version", "tau_version.cli:version", help="Print the tau version and the installed plugins.")
