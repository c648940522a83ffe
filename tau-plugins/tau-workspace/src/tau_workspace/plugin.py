"""Registers the ``workspace`` root; the commands live in ``tau_workspace.cli``."""

from tau_core.hookspecs import hookimpl


@hookimpl
def tau_register_roots(register):  # type: ignore[no-untyped-def]
    register("workspace", "tau_workspace.cli:workspace",
             help="Connect this repository to its TauGrid workspace, and scaffold new repositories.")
