"""``tau run history record``: the in-cluster lifecycle recorder (logic in :mod:`tau_run.recorder`)."""

from __future__ import annotations

import click

from tau_core.cli_options import CONTEXT_SETTINGS


@click.group("history", context_settings=CONTEXT_SETTINGS)
def history() -> None:
    """Durable run history (Azure Data Explorer)."""


@history.command("record", context_settings=CONTEXT_SETTINGS)
@click.option("--kusto-endpoint", required=True, help="ADX cluster URI (https; plain http on loopback only).")
@click.option("--kusto-database", default="Metrics", show_default=True, help="ADX database.")
@click.option("--kusto-table", default="TauExpRunLifecycle", show_default=True, help="Lifecycle table.")
@click.option("-n", "--namespace", required=True, help="Namespace whose runs are recorded.")
@click.option("--cluster", required=True, help="This cluster's name in the rows (the observability identity).")
@click.option("--workspace-id", default="", help="Workspace id when a workload carries none.")
@click.option("--result-scope", default="", help="Result scope when a workload carries none.")
@click.option("--interval", default="5m", show_default=True,
              help="Longest a watch runs before it is renewed (the recorder watches; it does not poll).")
@click.option("--once", is_flag=True, help="List once, write, and exit.")
@click.option("--health-addr", default="127.0.0.1:8080", show_default=True,
              help="/healthz and /readyz address (HOST:PORT or :PORT); '' turns the server off.")
@click.option("--spool", default=None, help="Directory that keeps unsent batches across restarts.")
@click.option("--in-cluster", is_flag=True, help="Use the pod's service account instead of a kubeconfig.")
@click.option("--context", default=None, help="kubectl context (default: the current one).")
def record(kusto_endpoint: str, kusto_database: str, kusto_table: str, namespace: str, cluster: str,
           workspace_id: str, result_scope: str, interval: str, once: bool, health_addr: str, spool: str | None,
           in_cluster: bool, context: str | None) -> None:
    """Record every run's lifecycle in a namespace into Kusto (TauExpRunLifecycle).

    Watches Jobs, RayJobs, Kueue Workloads and Pods, derives each run's state (with the failing pod's
    reason and exit code, never its spec, env or logs) and writes idempotent observations by queued
    ingestion.  Exits non-zero on a persistent error, so Kubernetes restarts it.

    \b
    Examples:
      tau run history record -n team-a --cluster aks-prod --kusto-endpoint https://adx.westeurope.kusto.windows.net
      tau run history record -n team-a --cluster aks-prod --kusto-endpoint https://... --once
    """
    from tau_core.errors import UsageError
    from tau_core.exptelemetry import is_identifier
    from tau_core.retry import parse_duration

    from .recorder.derive import Scope
    from .recorder.health import parse_address
    from .recorder.main import RecordOptions, run

    if not is_identifier(kusto_table):
        raise UsageError("--kusto-table must be a Kusto identifier")
    seconds = parse_duration(interval, "--interval")
    if seconds <= 0:
        raise UsageError("--interval must be positive")
    options = RecordOptions(scope=Scope(cluster, namespace, workspace_id, result_scope), endpoint=kusto_endpoint,
                            database=kusto_database, table=kusto_table,
                            health=parse_address(health_addr) if health_addr else None, once=once,
                            watch_timeout=max(1, int(seconds)), context=context, in_cluster=in_cluster, spool=spool)
    run(options)
