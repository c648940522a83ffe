"""The ``tau version`` command root."""
