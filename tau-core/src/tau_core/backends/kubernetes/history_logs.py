"""The last resort of ``tau logs``: the container logs the platform kept in Kusto (adx-mon's
``Logs.ContainerLogs``), read through the history source registered as ``kusto``
(``tau_register_history_sources``), for a run whose pods and archived logs are gone.

The connection comes from ``--kusto-cluster/--kusto-endpoint/--kusto-database``; what they leave out comes
from the ConfigMap ``tau-log-connection`` (``data["connection.json"]``, schema ``tau.logs.connection.v1``,
fields ``endpoint``, ``database``, ``cluster``) in the system namespace.  The ``Cluster`` value is never
guessed from the kube context.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from urllib.parse import urlparse

import anyio
import attrs

from tau_core.errors import ConfigError, NotFoundError
from tau_core.history import LogQuery, history_source
from tau_core.kube import KubeApiError, KubeSession, api_path
from tau_core.lifecycle.base import LogOptions

Emit = Callable[[str], Awaitable[None]]
CONNECTION_CONFIGMAP = "tau-log-connection"
CONNECTION_KEY = "connection.json"
CONNECTION_SCHEMA = "tau.logs.connection.v1"
FLAGS_HINT = "supply --kusto-cluster, --kusto-endpoint, --kusto-database"


@attrs.frozen
class LogConnection:
    endpoint: str = ""
    database: str = ""
    cluster: str = ""

    @property
    def complete(self) -> bool:
        return bool(self.endpoint and self.database and self.cluster)

    @property
    def any(self) -> bool:
        return bool(self.endpoint or self.database or self.cluster)


def check_endpoint(endpoint: str) -> str:
    """An absolute https endpoint without path, query or credentials (plain http only on loopback)."""
    parsed = urlparse(endpoint)
    loopback = parsed.hostname in ("127.0.0.1", "localhost", "::1")
    if (parsed.scheme != "https" and not (parsed.scheme == "http" and loopback)) or not parsed.netloc \
            or parsed.username or parsed.password or parsed.query or parsed.path.strip("/"):
        raise ConfigError(f"--kusto-endpoint {endpoint!r} must be an absolute https URL without path, query or "
                          "credentials", hint="for example https://mycluster.westeurope.kusto.windows.net")
    return endpoint.rstrip("/")


async def log_connection(session: KubeSession, system_namespace: str, options: LogOptions) -> LogConnection:
    """The flags, completed from the ``tau-log-connection`` ConfigMap when one is readable."""
    flags = LogConnection(options.kusto_endpoint or "", options.kusto_database or "", options.kusto_cluster or "")
    if flags.complete:
        return flags
    try:
        cm = await session.get(api_path("v1", "configmaps", namespace=system_namespace, name=CONNECTION_CONFIGMAP),
                               missing_ok=True)
    except KubeApiError as exc:
        if exc.status not in (401, 403, 404):
            raise
        cm = None  # unreadable (RBAC) or absent: the flags alone decide
    raw = ((cm or {}).get("data") or {}).get(CONNECTION_KEY)
    if not raw:
        return flags
    try:
        doc = json.loads(raw)
    except ValueError:
        raise ConfigError(f"configmap {system_namespace}/{CONNECTION_CONFIGMAP}: {CONNECTION_KEY} is not JSON",
                          hint=FLAGS_HINT) from None
    if not isinstance(doc, dict) or doc.get("schema", CONNECTION_SCHEMA) != CONNECTION_SCHEMA:
        raise ConfigError(f"configmap {system_namespace}/{CONNECTION_CONFIGMAP}: expected schema {CONNECTION_SCHEMA}",
                          hint=FLAGS_HINT)
    return LogConnection(flags.endpoint or str(doc.get("endpoint") or ""),
                         flags.database or str(doc.get("database") or ""),
                         flags.cluster or str(doc.get("cluster") or ""))


async def kusto_logs(conn: LogConnection, ns: str, name: str, options: LogOptions, emit: Emit,
                     say: Callable[[str], None]) -> None:
    """Print the run's lines from Kusto; ``NotFoundError`` when it kept none."""
    endpoint = check_endpoint(conn.endpoint)
    source = history_source("kusto", endpoint=endpoint, logs_database=conn.database)
    query = LogQuery(conn.cluster, ns, name, container=options.container or "", tail=options.tail)
    try:
        lines = await anyio.to_thread.run_sync(source.container_logs, query)
    finally:
        source.close()
    where = f"Kusto {conn.database}.ContainerLogs at {endpoint} (Cluster {conn.cluster!r})"
    if not lines:
        raise NotFoundError(f"{name}: no live pods, no archived logs, and no lines in {where} for namespace {ns}",
                            hint="check --kusto-cluster (the exact Cluster value adx-mon writes) and the namespace")
    pods = sorted({f"{x.pod}/{x.container}" for x in lines})
    say(f"{name}: no live pods or archived logs; showing {len(lines)} line(s) kept in {where} "
        f"({', '.join(pods)})" + ("; --follow does not apply to history" if options.follow else ""))
    for line in lines:
        stamp = f"{line.timestamp.isoformat().replace('+00:00', 'Z')} " if options.timestamps and line.timestamp else ""
        prefix = f"[kusto/{line.pod}/{line.container}] " if options.prefix else ""
        await emit(f"{prefix}{stamp}{line.message}")


async def recorded_location(conn: LogConnection, ns: str, name: str) -> tuple[str, str] | None:
    """``(output dir, pvc)`` of a deleted run as the lifecycle recorder kept it (``result_path`` and
    ``result_pvc`` of its latest ``TauExpRunLifecycle`` row in the ``Metrics`` database at the connection's
    endpoint); ``None`` without an endpoint, without a recorded location, or when Kusto cannot be read (the
    callers fall back to the next source)."""
    from tau_core.errors import TauError
    from tau_core.history import RunQuery

    if not conn.endpoint:
        return None
    try:
        source = history_source("kusto", endpoint=check_endpoint(conn.endpoint))
    except TauError:
        return None
    try:
        rows = await anyio.to_thread.run_sync(source.run_history, RunQuery(name, namespace=ns))
    except TauError:
        return None
    finally:
        source.close()
    for row in reversed(rows):  # oldest first: the latest attempt's location wins
        if row.result_path and row.result_pvc:
            return row.result_path, row.result_pvc
    return None
