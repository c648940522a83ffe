"""Built-in execution backends (registered through :mod:`tau_core.builtin_plugins`)."""
