"""``tau cluster``: thin click commands over install, uninstall, readiness, profiles and the values reference."""

from __future__ import annotations

import os
from typing import Any

import click

from tau_cluster import options as o
from tau_core.cli_options import CONTEXT_SETTINGS as CONTEXT
from tau_core.output import emit, to_json

context_option = click.option("--context", default=lambda: os.environ.get("TAU_CONTEXT", ""),
                              help="kubectl context (default: $TAU_CONTEXT or the current context).")
release_option = click.option("--release", default=o.DEFAULT_RELEASE, show_default=True, help="Helm release name.")
namespace_option = click.option("--namespace", default=o.DEFAULT_NAMESPACE, show_default=True,
                                help="Namespace for every TauGrid system workload and the TauWorkspace objects.")


@click.group(context_settings=CONTEXT)
def cluster() -> None:
    """Install, upgrade, validate and uninstall the TauGrid distribution (Helm)."""


@cluster.command(context_settings=CONTEXT)
@context_option
@release_option
@namespace_option
@click.option("--chart", default=o.DEFAULT_CHART, show_default=True, help="Chart reference or local chart path.")
@click.option("--version", "version", default=o.DEFAULT_VERSION, show_default=True, help="Chart version.")
@click.option("--timeout", default=o.DEFAULT_TIMEOUT, show_default=True,
              help="Limit for each Helm pass and for the readiness wait.")
@click.option("-f", "--values", "values", multiple=True, help="Values file (repeatable).")
@click.option("--set", "sets", multiple=True, help="Value override KEY=VALUE (repeatable).")
@click.option("--set-string", "set_strings", multiple=True, help="String value override (repeatable).")
@click.option("--create-namespace/--no-create-namespace", default=True, show_default=True)
@click.option("--wait/--no-wait", default=False, show_default=True, help="Also run Helm's wait on the second pass.")
@click.option("--atomic", is_flag=True, help="Roll back when Helm fails (implies Helm's wait).")
@click.option("--dry-run", is_flag=True, help="Render offline and count objects; the cluster is not contacted.")
@click.option("--dependency-update/--no-dependency-update", default=True, show_default=True)
@click.option("-o", "--output", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def install(output: str, **kwargs: Any) -> None:
    """Install or upgrade TauGrid, then report readiness."""
    from tau_cluster.commands import run_install

    run_install(o.InstallOptions(**kwargs), output)


@cluster.command(context_settings=CONTEXT)
@context_option
@release_option
@namespace_option
@click.option("--chart", default=o.DEFAULT_CHART, show_default=True,
              help="Chart used to render the queue drain (its name must match the release's chart).")
@click.option("--timeout", default=o.DEFAULT_TIMEOUT, show_default=True)
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until release resources are gone.")
@click.option("--dry-run", is_flag=True, help="Show what Helm would remove; change nothing.")
@click.option("--keep-history", is_flag=True)
@click.option("--no-hooks", is_flag=True)
@click.option("--yes", is_flag=True, help="Confirm the removal of the control plane.")
@click.option("--drain-queue/--no-drain-queue", default=True, show_default=True,
              help="Remove the queue policy while Kueue still runs, before removing the release.")
def uninstall(**kwargs: Any) -> None:
    """Remove the TauGrid release (queue policy first)."""
    from tau_cluster.commands import run_uninstall

    run_uninstall(o.UninstallOptions(**kwargs))


@cluster.group(context_settings=CONTEXT)
def validate() -> None:
    """Read-only checks of an installation."""


@validate.command("installation", context_settings=CONTEXT)
@context_option
@release_option
@namespace_option
@click.option("--timeout", default="5m", show_default=True)
@click.option("--poll-interval", default="5s", show_default=True)
@click.option("-o", "--output", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def validate_installation(context: str, release: str, namespace: str, timeout: str, poll_interval: str,
                          output: str) -> None:
    """Run the eight readiness checks until they pass or the timeout ends."""
    from tau_cluster.commands import run_validate

    run_validate(context, release, namespace, timeout, poll_interval, output)


@validate.command("nodes", context_settings=CONTEXT)
@context_option
@click.option("--gpu-class", default=None, help="Only nodes labelled with this GPU class (any: no constraint).")
@click.option("--selector", default=None, help="Label selector for the nodes to probe.")
@click.option("--min-healthy", type=click.IntRange(min=0), default=0, show_default=True,
              help="Pass when at least this many nodes are healthy (0: every node must be).")
@click.option("--timeout", default="2m", show_default=True, help="Limit per probe pod (at least 10s).")
def validate_nodes(context: str, gpu_class: str | None, selector: str | None, min_healthy: int, timeout: str) -> None:
    """Probe every GPU node with a privileged pod (nvidia-smi, NVLink, ECC, InfiniBand)."""
    from tau_cluster.commands import run_validate_nodes

    run_validate_nodes(context, gpu_class, selector, min_healthy, timeout)


@validate.command("topology", context_settings=CONTEXT)
@context_option
@click.option("--profile", default=None, help="One ready workload profile (default: every ready profile).")
def validate_topology(context: str, profile: str | None) -> None:
    """Check each ready workload profile's queues, priority classes and GPU flavor contract."""
    from tau_cluster.commands import run_validate_topology

    run_validate_topology(context, profile)


@cluster.group(context_settings=CONTEXT)
def profiles() -> None:
    """Workload-profile snapshots."""


@profiles.command("export", context_settings=CONTEXT)
@context_option
@click.option("-o", "--output", "path", default=None, help="File to write (default: stdout).")
def profiles_export(context: str, path: str | None) -> None:
    """Export the ready workload profiles as a TauWorkloadProfileSnapshot."""
    from tau_cluster.commands import run_profiles_export

    run_profiles_export(context, path)


@cluster.command("explain-values", context_settings=CONTEXT)
def explain_values() -> None:
    """Print the reference of the install values (Markdown)."""
    from tau_cluster.explain import packaged_reference

    click.echo(packaged_reference(), nl=False)


__all__ = ["cluster", "emit", "to_json"]
