"""Dispatch helpers for the lifecycle verbs: is NAME a local run, and the local rows for ``tau run list``.

Import-light (the registry only); the lifecycle verbs call these before they resolve a cluster target,
so a local run never needs a kubeconfig.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tau_core.errors import NotFoundError, TauError, UsageError
from tau_core.lifecycle.base import ExecutionBackend, RunRef, RunSummary, backend_for


def local_run(name: str, *, exact: bool = False) -> tuple[ExecutionBackend, RunRef] | None:
    """``(the registered local backend, RunRef)`` when ``name`` is a run in the local registry, else ``None``.

    ``exact=True`` matches run ids only (use it where a cluster run of the same name should win).  A local
    backend without a registry lookup (``find``) owns no names.
    """
    backend = backend_for("local")
    find = getattr(backend, "find", None)
    run = find(name, exact=exact) if find is not None else None
    if run is None:
        return None
    return backend, RunRef(name=run.run_id, backend="local")


def choose_local(name: str, *, cluster_named: bool,
                 cluster_twin: Callable[[], str | None]) -> tuple[ExecutionBackend, RunRef] | None:
    """The local run a lifecycle verb's NAME means, or ``None`` for the cluster.  The rules:

    * a flag that names a cluster (``-n``, ``--workspace``, ``--context``) never resolves to a local run;
    * a local run id resolves to that run;
    * a target name with local runs resolves to the newest of them, unless ``cluster_twin()`` finds a
      cluster run of that name too: then NAME is ambiguous and the error lists both.
    """
    if cluster_named:
        return None
    exact = local_run(name, exact=True)
    if exact is not None:
        return exact
    found = local_run(name)
    if found is None:
        return None
    twin = cluster_twin()
    if twin:
        raise UsageError(f"run {name!r} is ambiguous: local run {found[1].name} and cluster run {twin}",
                         hint=f"name the local run by its id ({found[1].name}), or the cluster run with -n NAMESPACE")
    return found


def cluster_twin_probe(name: str, target_factory: Callable[[], Any]) -> Callable[[], str | None]:
    """A ``cluster_twin`` for :func:`choose_local`: ``namespace/name`` when the repository is connected to a
    cluster (a non-local workspace connection, or ``$TAU_CONTEXT``) that has a run called ``name``."""

    def probe() -> str | None:
        import os
        from pathlib import Path

        from tau_core.workspace.descriptor import find_descriptor, load_descriptor

        if not os.environ.get("TAU_CONTEXT"):
            path = find_descriptor(Path.cwd())
            if path is None or load_descriptor(path).is_local:
                return None
        try:
            target = target_factory()
            st = target.backend().status(target.ref(name))
        except NotFoundError:
            return None
        except TauError:
            return None  # the cluster cannot say: the local run stands
        if st.extra.exists is False:
            return None
        return f"{st.ref.namespace}/{name}" if st.ref.namespace else name

    return probe


def local_runs() -> list[RunSummary]:
    """``tau run list`` rows for local runs, newest first (``kind`` is ``local``, no namespace)."""
    return backend_for("local").list()
