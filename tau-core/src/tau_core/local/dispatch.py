"""Dispatch helpers for the lifecycle verbs: is NAME a local run, and the local rows for ``tau run list``.

Import-light (the registry only); the lifecycle verbs call these before they resolve a cluster target,
so a local run never needs a kubeconfig.
"""

from __future__ import annotations

from typing import Any

from tau_core.lifecycle.base import RunRef


def local_run(name: str, *, exact: bool = False) -> tuple[Any, RunRef] | None:
    """``(LocalBackend, RunRef)`` when ``name`` is a run in the local registry, else ``None``.

    ``exact=True`` matches run ids only (use it where a cluster run of the same name should win).
    """
    from tau_core.local.backend import LocalBackend

    backend = LocalBackend()
    run = backend.find(name, exact=exact)
    if run is None:
        return None
    return backend, RunRef(name=run.run_id, backend="local")


def local_rows() -> list[dict[str, Any]]:
    """``tau run list`` rows for local runs, newest first (``kind`` is ``local``, ``namespace`` empty)."""
    from tau_core.local.backend import LocalBackend

    return [{"name": r.ref.name, "namespace": None, "kind": r.kind, "status": r.state, "queue": None,
             "created": r.created, "source": "local"} for r in LocalBackend().list()]
