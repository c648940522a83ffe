"""Registers the experiment store with the tau plugin host (import-light: targets are strings).

* storage backend ``experiment-store``: ``factory(root=..., **options)`` -> an object that stores
  and reads bytes under keys relative to the store's ``artifacts/`` directory and exposes the
  :class:`~taugrid_portal.store.ExperimentStore` as ``.store``;
* telemetry sink ``experiment-store``: ``factory(store=..., **options)`` -> the whole
  :class:`tau_core.telemetry.TelemetrySink`: ``write(records)`` for ``tau.metrics.scalar.v2``
  records (idempotent for repeated batches), ``register_run(run)`` (``experiment track``, in-process),
  ``update_status(update)``, ``render_evidence(run_id, out)`` (the run's static Stellar page) and ``close()``.
"""

from tau_core.hookspecs import Register, hookimpl


@hookimpl
def tau_register_storage_backends(register: Register) -> None:
    register("experiment-store", "taugrid_portal.store.backend:ExperimentStoreBackend",
             help="The local experiment store (SQLite index + Parquet metrics) as a storage backend.")


@hookimpl
def tau_register_telemetry_sinks(register: Register) -> None:
    register("experiment-store", "taugrid_portal.store.backend:ExperimentStoreSink",
             help="Record runs, metrics and their Stellar pages in the local experiment store.")
