"""The ``tau logs`` command root."""
