"""``taugrid-portal portal serve``: the command line of the read-only Portal (reference §1.4).

Import-light: click and the config module only; starlette, uvicorn and the Kubernetes client load when the
command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tau_core.cli_options import CONTEXT_SETTINGS as CONTEXT
from tau_core.errors import UsageError
from taugrid_portal.portal.config import (
    DEFAULT_ADDR,
    SCOPE_MODES,
    SOURCES,
    KueueVizConfig,
    PortalConfig,
    check_kube,
    check_scope_mode,
    check_sources,
    load_policy,
    parse_addr,
    parse_operator_scope,
)
from taugrid_portal.portal.kusto_flags import deprecated_aliases, kusto_config, kusto_options, run_history_config

if TYPE_CHECKING:
    from taugrid_portal.portal.directory import Directory


@click.group("portal", context_settings=CONTEXT)
def portal() -> None:
    """The read-only TauGrid Portal: Overview, Runs, Jobs / Queue, Nodes, Ray and Experiments.

    The Portal aggregates and cross-links the platform's dashboards and hosts Stellar unchanged under
    /stellar. It never writes to the cluster.
    """


@portal.command("serve", epilog="""\b
Examples:
  taugrid-portal portal serve --kubeconfig ~/.kube/config -n aurora --store ./tau-exp
  taugrid-portal portal serve --in-cluster --addr 0.0.0.0:8080 --workspace-directory /etc/tau-portal/workspaces.json \\
      --jobs-scope-mode workspace
  taugrid-portal portal serve --context dev --jobs-scope-mode operator --jobs-operator-scope vision=aurora/jobqueue
""")
@click.option("--addr", default=DEFAULT_ADDR, show_default=True, metavar="HOST:PORT",
              help="Listen address. The Portal has no authentication of its own: keep it on loopback, or put it "
                   "behind an authenticated proxy.")
@click.option("--kubeconfig", metavar="FILE", help="Kubeconfig to read the cluster with (default: $KUBECONFIG).")
@click.option("--context", metavar="NAME", help="Kubeconfig context (default: the current context).")
@click.option("--in-cluster", is_flag=True, help="Use the pod's service account instead of a kubeconfig.")
@click.option("--no-kubernetes", is_flag=True, help="Serve without Kubernetes access (its boards answer 503).")
@click.option("-n", "--namespace", help="Namespace of the Runs and Ray boards (default: every namespace).")
@click.option("--workspace", default="default", show_default=True, help="Workspace id of the legacy single scope.")
@click.option("--cluster", "cluster_name", default="", help="Cluster name reported in scopes and runs.")
@click.option("--jobs-scope-mode", type=click.Choice(SCOPE_MODES), default="disabled", show_default=True)
@click.option("--jobs-operator-scope", "operator_scopes", multiple=True, metavar="TEAM=NS/QUEUE",
              help="A queue of the operator-mode Jobs board; repeatable.")
@click.option("--workspace-directory", type=click.Path(dir_okay=False), metavar="FILE",
              help="Workspace directory JSON; enables managed mode with trusted identity headers.")
@click.option("--workspace-user-header", default="X-MS-CLIENT-PRINCIPAL-NAME", show_default=True)
@click.option("--workspace-groups-header", default="X-MS-CLIENT-PRINCIPAL-GROUPS", show_default=True)
@click.option("--store", metavar="DIR", help="Experiment store the mounted Stellar serves.")
@click.option("--source", type=click.Choice(SOURCES), default="local", show_default=True)
@click.option("--kueueviz", is_flag=True, help="Proxy the KueueViz board under /api/portal/kueueviz/.")
@click.option("--kueueviz-namespace", default="kueue-system", show_default=True)
@click.option("--kueueviz-backend-service", default="kueue-kueueviz-backend", show_default=True)
@click.option("--kueueviz-frontend-service", default="kueue-kueueviz-frontend", show_default=True)
@click.option("--default-target", metavar="TARGET", help="What the mounted Stellar's / opens.")
@click.option("--metric", metavar="NAME", help="Primary chart metric of the mounted Stellar.")
@click.option("--policy", "policy_file", metavar="FILE", help="Queue policy file of the Jobs board (YAML/JSON).")
@kusto_options
@click.option("--refresh", type=click.FloatRange(0, 3600), default=5.0, show_default=True,
              help="Seconds between the pages' automatic refreshes (0: off).")
def serve(**p: Any) -> None:
    """Serve the Portal (read-only) until interrupted."""
    config, directory = build_config(p)
    run(config, directory)


def build_config(p: dict[str, Any]) -> tuple[PortalConfig, Directory | None]:
    """Every flag validated into one typed :class:`PortalConfig` (and the loaded workspace directory)."""
    deprecated_aliases(p, lambda line: click.echo(line, err=True))
    host, port = parse_addr(p["addr"])
    check_kube(p["kubeconfig"], p["context"], p["in_cluster"])
    scopes = tuple(parse_operator_scope(s, i) for i, s in enumerate(p["operator_scopes"]))
    directory_path = Path(p["workspace_directory"]) if p["workspace_directory"] else None
    check_scope_mode(p["jobs_scope_mode"], scopes, directory_path)
    store_path = Path(p["store"]).expanduser() if p["store"] else None
    check_sources(p["source"], store_path, p["kusto_query_command"], p["kusto_endpoint"])
    if p["no_kubernetes"] and (p["kubeconfig"] or p["context"] or p["in_cluster"]):
        raise UsageError("--no-kubernetes cannot be combined with --kubeconfig, --context or --in-cluster")
    kusto = kusto_config(p)
    history = run_history_config(p, kusto, managed=directory_path is not None, cluster=p["cluster_name"])
    policy = load_policy(Path(p["policy_file"]).expanduser()) if p["policy_file"] else None
    directory: Directory | None = None
    if directory_path is not None:
        from taugrid_portal.portal.directory import load_directory

        directory = load_directory(directory_path, require_queue=p["jobs_scope_mode"] == "workspace")
    viz = KueueVizConfig(p["kueueviz_namespace"], p["kueueviz_backend_service"],
                         p["kueueviz_frontend_service"]) if p["kueueviz"] else None
    config = PortalConfig(
        host=host, port=port, use_kubernetes=not p["no_kubernetes"], kubeconfig=p["kubeconfig"],
        context=p["context"], in_cluster=p["in_cluster"], namespace=p["namespace"] or None,
        workspace=p["workspace"], cluster=p["cluster_name"], jobs_scope_mode=p["jobs_scope_mode"],
        operator_scopes=scopes, workspace_directory=directory_path, user_header=p["workspace_user_header"],
        groups_header=p["workspace_groups_header"], store=store_path, source=p["source"],
        kusto_query_command=p["kusto_query_command"], kueueviz=viz, refresh_seconds=p["refresh"],
        kusto=kusto, run_history=history, policy=policy, default_target=p["default_target"],
        metric=p["metric"])
    return config, directory


def run(config: PortalConfig, directory: Directory | None) -> None:
    import uvicorn

    from taugrid_portal.portal.app import create_app
    from taugrid_portal.stellar.server import bind, url_for

    if not config.loopback:
        click.echo(f"warning: listening on {config.host}: the Portal has no authentication of its own; expose it "
                   "only through an authenticated HTTPS proxy", err=True)
    if not config.use_kubernetes:
        click.echo("warning: Jobs, Ray, Nodes, and Runs boards disabled (no Kubernetes access)", err=True)
    if not config.kusto.configured:
        click.echo("note: Cluster Health, Cost, and Node Utilization boards disabled (no Kusto query command)",
                   err=True)
    elif not config.kusto.endpoint:
        click.echo("note: Cluster Health, Cost, and Node Utilization boards disabled (they read through "
                   "--kusto-endpoint, not --kusto-query-command)", err=True)
    else:
        click.echo(f"note: Cluster Health, Cost, and Node Utilization boards read Kusto at {config.kusto.endpoint} "
                   f"({config.kusto.database}, cost in {config.kusto.cost_database})", err=True)
    sock = bind(config.host, config.port)
    app = create_app(config, directory=directory)
    click.echo(f"serving taugrid-portal portal at {url_for(sock, '/portal')}", err=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                           server_header=False, timeout_graceful_shutdown=5))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
    finally:
        sock.close()
