"""Registers the ``cluster`` root. Kept import-light: the commands live in ``tau_cluster.cli``."""

from tau_core.hookspecs import hookimpl


@hookimpl
def tau_register_roots(register):  # type: ignore[no-untyped-def]
    register("cluster", "tau_cluster.cli:cluster",
             help="Install, upgrade, validate and uninstall the TauGrid distribution.")
