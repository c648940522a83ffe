"""The route families of the simulated API server (``tau_testing.sim.server.ApiApp``)."""
