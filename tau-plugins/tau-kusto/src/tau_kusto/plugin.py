"""Registers the Kusto telemetry sink (import-light: the target is a string)."""

from tau_core.hookspecs import Register, hookimpl


@hookimpl
def tau_register_telemetry_sinks(register: Register) -> None:
    register("kusto", "tau_kusto.sink:KustoSink",
             help="Ship metric points to Azure Data Explorer as typed tau.experiment.metric.v1 events "
                  "(queued ingestion, replay-safe).")
