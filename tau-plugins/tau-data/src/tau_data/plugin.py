"""Registers the ``data`` root and the ``az`` and ``https`` storage backends.

Targets are strings (import-light); the ``file`` and ``pvc`` backends are built into tau-core.
"""

from tau_core.hookspecs import hookimpl


@hookimpl
def tau_register_roots(register):  # type: ignore[no-untyped-def]
    register("data", "tau_data.cli:data", help="Inspect and manage dataset and model registries.")


@hookimpl
def tau_register_storage_backends(register):  # type: ignore[no-untyped-def]
    register("az", "tau_data.azure:AzureBlobStore",
             help="az://<account>/<container>[/prefix]: Azure Blob Storage with your Azure login")
    register("https", "tau_data.https:HttpsSource",
             help="https://host/path: a public read-only source for ingest")
