"""TauGrid's Kusto (Azure Data Explorer) telemetry sink; see :mod:`tau_kusto.sink`."""
