"""What ``tau run history record`` does: connect, start the health server, run the recorder, stop cleanly."""

from __future__ import annotations

import asyncio
from typing import Any

import attrs

from tau_core.output import info, warning

from .derive import Scope
from .health import Address, serve_health
from .loop import Recorder


@attrs.frozen
class RecordOptions:
    scope: Scope
    endpoint: str
    database: str
    table: str
    health: Address | None
    once: bool = False
    watch_timeout: int = 300
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    spool: str | None = None


def _sink(options: RecordOptions, credential: Any) -> Any:
    from tau_core.plugins import get_host

    registry = get_host().registry("telemetry_sinks")
    if "kusto" not in registry:
        from tau_core.errors import ConfigError

        raise ConfigError("the lifecycle recorder writes through the kusto telemetry sink, which is not installed",
                          hint="pip install tau-kusto")
    extra = {"credential": credential} if credential is not None else {}
    return registry["kusto"].load()(endpoint=options.endpoint, database=options.database, spool=options.spool,
                                    lifecycle_table=options.table, **extra)


async def record(options: RecordOptions, credential: Any = None) -> Recorder:
    """Run the recorder until ``--once`` is done or a persistent error raises."""
    session = await _session(options)
    sink = _sink(options, credential)
    runner = None
    try:
        recorder = Recorder(session, options.scope, sink.write_lifecycle, once=options.once,
                            watch_timeout=options.watch_timeout, say=info)
        if options.health is not None:
            if not options.health.loopback:
                warning(f"health server listens on {options.health.host}:{options.health.port}, not only on "
                     "127.0.0.1 (as the Deployment's probes need)")
            runner = await serve_health(options.health, recorder.health)
        await recorder.run()
        return recorder
    finally:
        if runner is not None:
            await runner.cleanup()
        await session.close()
        sink.close()


async def _session(options: RecordOptions) -> Any:
    """The pod's ServiceAccount with ``--in-cluster`` (no kubeconfig is written), else the kubeconfig."""
    from tau_core.kube import KubeSession

    if not options.in_cluster:
        return await KubeSession.connect(kubeconfig=options.kubeconfig, context=options.context)
    return await KubeSession.require_in_cluster()


def run(options: RecordOptions, credential: Any = None) -> Recorder:
    return asyncio.run(record(options, credential))
