"""The ``tau run`` command root: config-first validation, rendering and submission."""
