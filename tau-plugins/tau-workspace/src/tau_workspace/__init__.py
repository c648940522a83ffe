"""The ``tau workspace`` command root."""
