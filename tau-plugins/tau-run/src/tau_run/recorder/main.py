"""What ``tau run history record`` does: connect, start the health server, run the recorder, stop cleanly."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

import attrs

from tau_core.output import info, warning

from .derive import Scope
from .health import Address, serve_health
from .loop import Recorder

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


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


def in_cluster_kubeconfig(sa_dir: Path = SA_DIR) -> Path:
    """A private (0600) kubeconfig for the pod's service account: the API server at kubernetes.default.svc."""
    import yaml

    token = (sa_dir / "token").read_text().strip()
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "in-cluster",
           "clusters": [{"name": "in-cluster", "cluster": {"server": "https://kubernetes.default.svc",
                                                           "certificate-authority": str(sa_dir / "ca.crt")}}],
           "users": [{"name": "sa", "user": {"token": token}}],
           "contexts": [{"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "sa"}}]}
    fd, name = tempfile.mkstemp(prefix="tau-recorder-", suffix=".kubeconfig")
    with os.fdopen(fd, "w") as fh:  # mkstemp creates it 0600
        yaml.safe_dump(doc, fh)
    return Path(name)


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
    from tau_core.kube import KubeSession

    kubeconfig = str(in_cluster_kubeconfig()) if options.in_cluster else options.kubeconfig
    sink = _sink(options, credential)
    runner = None
    session = await KubeSession.connect(kubeconfig=kubeconfig, context=options.context)
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
        if options.in_cluster and kubeconfig:
            Path(kubeconfig).unlink(missing_ok=True)


def run(options: RecordOptions, credential: Any = None) -> Recorder:
    return asyncio.run(record(options, credential))
