"""TauGrid core: the plugin host and the shared layers every command root builds on."""

__version__ = "0.5.0"
