"""The RayService and Deployment renderers (registered through ``tau_register_renderers``)."""
