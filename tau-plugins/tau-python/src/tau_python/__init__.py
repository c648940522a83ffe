"""The ``tau python`` command root (the SDK itself is the ``tau`` package of this distribution)."""
