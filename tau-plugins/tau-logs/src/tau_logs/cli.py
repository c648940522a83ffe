"""``tau logs RUN``: find the run across workspaces, then print or follow its logs.

Thin: routing comes from :mod:`tau_core.backends.discovery` and :mod:`tau_core.backends.targeting`,
the logs themselves from the kubernetes execution backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tau_core.cli_options import CONTEXT_SETTINGS, kusto_log_options, log_options, logs_options, print_logs
from tau_core.output import info

if TYPE_CHECKING:
    from tau_core.lifecycle.base import ExecutionBackend, RunRef


@click.command("logs", context_settings=CONTEXT_SETTINGS)
@click.argument("run_name", metavar="RUN")
@logs_options
@click.option("-n", "--namespace", default=None, help="Namespace of the run (skips the workspace search).")
@click.option("--workspace", default=None, help="Search only this configured workspace.")
@click.option("--context", default=None,
              help="kubectl context (default: $TAU_CONTEXT; either skips the workspace search).")
@click.option("--system-namespace", default=None, envvar="TAU_SYSTEM_NAMESPACE",
              help="Namespace containing TauGrid system objects (default: tau-system).")
@click.option("--path", "archive_path", default=None,
              help="Output directory of a deleted run (with --pvc): read the logs it archived under logs/.")
@click.option("--pvc", "archive_pvc", default=None, help="PVC holding --path.")
@kusto_log_options
def logs(run_name: str, follow: bool, tail: int, container: str | None, all_containers: bool, previous: bool,
         timestamps: bool, prefix: bool, namespace: str | None, workspace: str | None, context: str | None,
         system_namespace: str | None, archive_path: str | None, archive_pvc: str | None,
         kusto_cluster: str | None, kusto_endpoint: str | None, kusto_database: str | None) -> None:
    """Print a run's logs, finding it across your configured workspaces.

    The connected workspace of the current repository is searched first, then every workspace
    connection configured on this machine.  For a RayJob the output is the Ray driver's; for a
    batch Job it is the pod logs.  Use the native --tail instead of piping through tail.

    \b
    Examples:
      tau logs train-7f2c
      tau logs train-7f2c -f
      tau logs train-7f2c --workspace aurora
      tau logs train-7f2c --context prod -n aurora --tail -1 --timestamps
      tau logs train-7f2c -n aurora --path /data/projects/aurora/runs/train-7f2c --pvc blob-training
      tau logs train-7f2c -n aurora --kusto-cluster aks-prod --kusto-database Logs --kusto-endpoint https://adx...

    Live pods come first; when they are gone (TTL, cancel, node loss) the logs the entrypoint
    wrapper archived under the run's output directory (logs/<pod>-<container>.log) are read
    through a helper pod, and a note on stderr says so.  Last come the container logs the platform
    kept in Kusto (adx-mon's Logs.ContainerLogs), with --kusto-cluster/--kusto-endpoint/--kusto-database
    or the tau-log-connection ConfigMap (needs the tau-kusto plugin).
    """
    import dataclasses

    from tau_core.backends.targeting import check_name
    from tau_core.errors import UsageError

    if (archive_path is None) != (archive_pvc is None):
        raise UsageError("pass both --path and --pvc (for a deleted run's archived logs), or neither")
    options = dataclasses.replace(log_options(follow, tail, container, all_containers, previous, timestamps, prefix),
                                  archive_path=archive_path, archive_pvc=archive_pvc, kusto_cluster=kusto_cluster,
                                  kusto_endpoint=kusto_endpoint, kusto_database=kusto_database)
    check_name(run_name)
    backend, ref = _route(run_name, namespace, workspace, context, system_namespace)
    print_logs(backend, ref, options)


def _route(run_name: str, namespace: str | None, workspace: str | None, context: str | None,
           system_namespace: str | None) -> tuple[ExecutionBackend, RunRef]:
    """Where RUN lives: a local run, the named or ambient cluster target, else the workspace search."""
    import os

    from tau_core.backends.local.dispatch import choose_local, cluster_twin_probe
    from tau_core.backends.targeting import lifecycle_target
    from tau_core.lifecycle.base import RunRef, backend_for

    found = choose_local(run_name, cluster_named=bool(context or namespace or workspace),
                         cluster_twin=cluster_twin_probe(run_name, lambda: lifecycle_target(
                             system_namespace=system_namespace)))
    if found is not None:
        return found
    if context or namespace or os.environ.get("TAU_CONTEXT"):
        target = lifecycle_target(context=context, namespace=namespace, workspace=workspace,
                                  system_namespace=system_namespace)
        return backend_for(target, progress=info), target.ref(run_name)
    from tau_core.backends.discovery import ambient_routes, find_run, routes_for

    routes = routes_for(cwd=Path.cwd())
    if not routes:
        routes = ambient_routes(system_namespace)
    route, kind = find_run(run_name, routes, workspace=workspace)
    info(f"found {kind} {route.namespace}/{run_name} in workspace {route.workspace}")
    ref = RunRef(run_name, "kubernetes", route.namespace, route.context, route.workspace)
    backend = backend_for(ref, kubeconfig=route.kubeconfig, context=route.context,
                          system_namespace=system_namespace or route.system_namespace, progress=info)
    return backend, ref
