"""``taugrid-portal`` as the sidecar runs it, with one test-only plugin: the ``kusto`` sink and history source get
the loopback endpoint's token credential (a cluster uses workload identity; nothing else differs)."""

from __future__ import annotations

import sys
from typing import Any

from tau_core.hookspecs import Register, hookimpl
from tau_core.plugins import Host, set_host


class LoopbackToken:
    @hookimpl
    def tau_register_telemetry_sinks(self, register: Register) -> None:
        def factory(*args: Any, **options: Any) -> Any:
            from tau_kusto.sink import KustoSink
            from tau_testing.kusto import StaticToken

            return KustoSink(*args, credential=StaticToken(), **options)

        register("kusto", factory, priority=10)

    @hookimpl
    def tau_register_history_sources(self, register: Register) -> None:
        def factory(**options: Any) -> Any:
            from tau_kusto.history import KustoHistory
            from tau_testing.kusto import StaticToken

            return KustoHistory(credential=StaticToken(), **options)

        register("kusto", factory, priority=10)


if __name__ == "__main__":
    set_host(Host.create(extra_plugins=[("kusto-loopback-token", LoopbackToken())]))
    from taugrid_portal.cli import main

    main(sys.argv[1:])
