"""Registers the ``serve`` root and the RayService/Deployment renderers. Import-light: targets are strings."""

from tau_core.hookspecs import hookimpl


@hookimpl
def tau_register_roots(register):  # type: ignore[no-untyped-def]
    register("serve", "tau_serve.cli:serve", help="Render and manage serving deployments (RayService or Deployment).")


@hookimpl
def tau_register_renderers(register):  # type: ignore[no-untyped-def]
    register("RayService", "tau_serve.renderers.rayservice:render_rayservice")
    register("Deployment", "tau_serve.renderers.deployment:render_deployment")
