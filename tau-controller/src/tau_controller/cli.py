"""``tau-controller run``: the controller's command line (thin; the work is in :mod:`tau_controller.runtime`)."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from tau_core import keys
from tau_core.cli_options import CONTEXT_SETTINGS
from tau_core.errors import TauError


@click.group(context_settings=CONTEXT_SETTINGS)
def main() -> None:
    """The Tau controller: reconciles TauCluster, TauWorkspace and TauQuotaRequest objects."""


@main.command()
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="kubeconfig file (default: in-cluster "
              "ServiceAccount, else $KUBECONFIG or ~/.kube/config)")
@click.option("--context", help="kubeconfig context (default: the current context)")
@click.option("--system-namespace", default=keys.SYSTEM_NAMESPACE_DEFAULT, show_default=True,
              help="namespace holding TauWorkspaces and TauQuotaRequests")
@click.option("--platform-namespace", hidden=True, help="deprecated alias of --system-namespace")
@click.option("--namespace-scope", multiple=True, help="watch namespaced objects only in these namespaces "
              "(repeatable; default: cluster-wide)")
@click.option("--leader-elect", is_flag=True, help="acquire the leader Lease before reconciling")
@click.option("--health-probe-bind-address", default="127.0.0.1:8081", show_default=True,
              help="/healthz and /readyz (':8081' binds every interface; '0' disables)")
@click.option("--metrics-bind-address", default="127.0.0.1:8080", show_default=True,
              help="Prometheus /metrics (':8080' binds every interface; '0' disables)")
@click.option("--lease-duration", type=float, default=15.0, show_default=True, hidden=True)
@click.option("--renew-deadline", type=float, default=10.0, show_default=True, hidden=True)
@click.option("--retry-period", type=float, default=2.0, show_default=True, hidden=True)
@click.option("-v", "--verbose", is_flag=True, help="log every reconcile")
def run(kubeconfig: str | None, context: str | None, system_namespace: str, platform_namespace: str | None,
        namespace_scope: tuple[str, ...], leader_elect: bool, health_probe_bind_address: str,
        metrics_bind_address: str, lease_duration: float, renew_deadline: float, retry_period: float,
        verbose: bool) -> None:
    """Run the controller until interrupted."""
    import asyncio
    import logging

    from tau_controller.addresses import bind_address

    try:  # a malformed address is refused before kopf and aiohttp load
        bind_address(health_probe_bind_address, "--health-probe-bind-address")
        bind_address(metrics_bind_address, "--metrics-bind-address")
    except TauError as exc:
        _fail(exc)
    from tau_controller.runtime import Controller, Options

    default = keys.SYSTEM_NAMESPACE_DEFAULT
    if platform_namespace and platform_namespace != system_namespace and system_namespace != default:
        raise click.UsageError(f"--system-namespace {system_namespace!r} conflicts with deprecated "
                               f"--platform-namespace {platform_namespace!r}")
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = Options(kubeconfig=kubeconfig, context=context,
                      system_namespace=platform_namespace or system_namespace, namespace_scope=namespace_scope,
                      leader_elect=leader_elect, health_address=health_probe_bind_address,
                      metrics_address=metrics_bind_address, lease_duration=lease_duration,
                      renew_deadline=renew_deadline, retry_period=retry_period)
    controller = Controller(options)
    try:
        asyncio.run(controller.run())
    except TauError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        pass
    if controller.lost_leadership:
        sys.exit(1)


def _fail(exc: TauError) -> NoReturn:
    click.echo(f"error: {exc}" + (f"\nhint: {exc.hint}" if getattr(exc, "hint", None) else ""), err=True)
    sys.exit(exc.exit_code)
