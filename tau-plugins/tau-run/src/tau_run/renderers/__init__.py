"""Workload renderers registered through ``tau_register_renderers``: ``Job`` and ``RayJob``."""
