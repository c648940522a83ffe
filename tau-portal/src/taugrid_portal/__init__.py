"""TauGrid portal: the local experiment store, Stellar dashboards and the ``taugrid-portal`` CLI."""

__version__ = "0.5.0"
