"""Registers the ``python`` root. Import-light: the target is a string."""

from tau_core.hookspecs import hookimpl


@hookimpl
def tau_register_roots(register):  # type: ignore[no-untyped-def]
    register("python", "tau_python.cli:python",
             help="Inspect, build and submit @tau.train / @tau.eval workflows written with the Python SDK.")
