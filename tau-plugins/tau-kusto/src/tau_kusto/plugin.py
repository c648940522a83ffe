"""Registers the Kusto telemetry sink, history source and fleet source (import-light: the targets are strings)."""

from tau_core.hookspecs import Register, hookimpl


@hookimpl
def tau_register_telemetry_sinks(register: Register) -> None:
    register("kusto", "tau_kusto.sink:KustoSink",
             help="Ship metric points to Azure Data Explorer as typed tau.experiment.metric.v1 events "
                  "(queued ingestion, replay-safe).")


@hookimpl
def tau_register_history_sources(register: Register) -> None:
    register("kusto", "tau_kusto.history:KustoHistory",
             help="Run lifecycle, metric points and container logs read back from Azure Data Explorer.")


@hookimpl
def tau_register_fleet_sources(register: Register) -> None:
    register("kusto", "tau_kusto.fleet:KustoFleet",
             help="GPU health, node utilisation and GPU cost samples read back from Azure Data Explorer.")
