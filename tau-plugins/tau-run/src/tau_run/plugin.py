"""Registers the ``run`` root and the Job/RayJob renderers. Import-light: targets are strings."""

from tau_core.hookspecs import hookimpl


@hookimpl
def tau_register_roots(register):  # type: ignore[no-untyped-def]
    register("run", "tau_run.cli:run", help="Validate, render and submit tau.yaml run configs, and follow runs.")


@hookimpl
def tau_register_renderers(register):  # type: ignore[no-untyped-def]
    register("Job", "tau_run.renderers.job:render_job")
    register("RayJob", "tau_run.renderers.rayjob:render_rayjob")
