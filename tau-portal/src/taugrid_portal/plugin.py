"""Registers the experiment store with the tau plugin host (import-light: targets are strings).

* storage backend ``experiment-store``: ``factory(root=..., **options)`` -> an object that stores
  and reads bytes under keys relative to the store's ``artifacts/`` directory and exposes the
  :class:`~taugrid_portal.store.ExperimentStore` as ``.store``;
* telemetry sink ``experiment-store``: ``factory(store=..., **options)`` -> ``write(records)`` /
  ``close()`` for ``tau.metrics.scalar.v2`` records (idempotent for repeated batches).
"""

from tau_core.hookspecs import hookimpl


@hookimpl
def tau_register_storage_backends(register):  # type: ignore[no-untyped-def]
    register("experiment-store", "taugrid_portal.store.backend:ExperimentStoreBackend",
             help="The local experiment store (SQLite index + Parquet metrics) as a storage backend.")


@hookimpl
def tau_register_telemetry_sinks(register):  # type: ignore[no-untyped-def]
    register("experiment-store", "taugrid_portal.store.backend:ExperimentStoreSink",
             help="Write run metrics into the local experiment store.")
