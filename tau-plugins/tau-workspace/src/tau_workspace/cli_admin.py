"""Click wiring for the operator and read verbs: create, adopt, list, status, check, quota.

Thin by design: each command parses flags, calls a module of :mod:`tau_workspace`, and prints.
Only ``create``, ``adopt`` and ``quota request`` write, and only with ``--apply``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import click

from tau_core.cli_options import CONTEXT_SETTINGS

CONTEXT = CONTEXT_SETTINGS
F = TypeVar("F", bound=Callable[..., Any])


def context_option(f: F) -> F:
    return click.option("--context", default=None,
                        help="Kubernetes context (default: $TAU_CONTEXT, the repository descriptor's, or the "
                             "kubeconfig's current context).")(f)


def system_ns_option(f: F) -> F:
    return click.option("-n", "--namespace", "system_namespace", default=None,
                        help="Namespace holding the TauWorkspace objects (default: the TauGrid system namespace, "
                             "tau-system).")(f)


def output_flag(f: F) -> F:
    return click.option("-o", "--output", "output", default="table", show_default=True,
                        help="Output format: table or json.")(f)


def _format(output: str) -> str:
    from tau_core.errors import UsageError

    if output not in ("table", "json"):
        raise UsageError("-o/--output must be one of: table, json")
    return output


def _target(context: str | None, system_namespace: str | None, *, platform_namespace: str | None = None,
            use_descriptor_context: bool = True) -> Any:
    from tau_workspace.target import resolve_target

    return resolve_target(context=context, system_namespace=system_namespace, platform_namespace=platform_namespace,
                          use_descriptor_context=use_descriptor_context)


@click.command("create", context_settings=CONTEXT)
@click.argument("name", required=False, default="taugrid-default")
@click.option("--namespace", default=None, help="Researcher workload Namespace the controller creates (default: NAME).")
@click.option("--system-namespace", default=None, help="Where the TauWorkspace lives (default: tau-system).")
@click.option("--platform-namespace", default=None, hidden=True, help="Deprecated alias of --system-namespace.")
@click.option("--queue", default="jobqueue", show_default=True, help='LocalQueue/ClusterQueue name; v0: "jobqueue".')
@click.option("--principal-provider", default="entra", show_default=True, help="entra or github.")
@click.option("--principal-name", default=None,
              help="External group/team granted access. Omitted: an inert Group binding named after NAME "
                   "(entra + Group only) that grants nobody access until you name the real group.")
@click.option("--subject-kind", default="Group", show_default=True, help="Group, User or ServiceAccount.")
@click.option("--subject-name", default=None, help="Kubernetes RBAC subject (default: --principal-name).")
@click.option("--output-root", default=None, help="Default output root (default: /data/projects/NAME/runs).")
@click.option("--priority", default="normal", show_default=True, help="default, priority or normal.")
@click.option("--service-account", default=None, help="Workload ServiceAccount (with --workload-identity-client-id).")
@click.option("--workload-identity-client-id", "client_id", default=None,
              help="Azure managed identity client ID (with --service-account).")
@context_option
@click.option("--apply", is_flag=True, help="Create the TauWorkspace after preflight and a server dry run.")
def create(name: str, system_namespace: str | None, platform_namespace: str | None, context: str | None,
           apply: bool, **flags: Any) -> None:
    """Create the v0 TauWorkspace NAME (default taugrid-default); preview unless --apply.

    The preview still reads the cluster: at most one workspace may exist and the ClusterQueue
    must be present. --apply repeats those checks, refuses a ClusterQueue replaced meanwhile,
    asks the API server for a dry run, then creates the object (never overwrites it).

    \b
    Examples:
      tau workspace create aurora --principal-name aurora-researchers
      tau workspace create aurora --principal-name aurora-researchers --apply
    """
    from tau_core.kube import run
    from tau_core.output import to_yaml
    from tau_workspace.create import CreateRequest, build_intent
    from tau_workspace.create import create as do_create

    request = CreateRequest(name=name, **flags)
    target = _target(context, system_namespace, platform_namespace=platform_namespace, use_descriptor_context=False)
    intent, inert = build_intent(request, target.system_namespace)
    outcome = run(partial(do_create, inert=inert, apply=apply), target, intent)
    for line in outcome.comments:
        click.echo(line)
    click.echo(outcome.result if outcome.result else to_yaml(intent.manifest()).rstrip("\n"))


@click.command("adopt", context_settings=CONTEXT)
@click.argument("name")
@click.option("-n", "--namespace", default=None, help="Existing workload namespace (default: NAME).")
@click.option("--queue", default="jobqueue", show_default=True, help="Existing LocalQueue in that namespace.")
@click.option("--system-namespace", default=None, help="Where the TauWorkspace lives (default: tau-system).")
@click.option("--platform-namespace", default=None, hidden=True, help="Deprecated alias of --system-namespace.")
@context_option
@click.option("--data-pvc", default="blob-training", show_default=True,
              help="Durable /data PVC that must be Bound ('' skips the check).")
@click.option("--namespace-uid", default=None, help="Expected Namespace UID.")
@click.option("--queue-uid", default=None, help="Expected LocalQueue UID.")
@click.option("--pvc-uid", default=None, help="Expected PVC UID.")
@click.option("--storage-class", default=None, help="Expected StorageClass of the PVC.")
@click.option("--cluster-queue", default=None, help="Expected ClusterQueue behind the LocalQueue.")
@click.option("--output-root", default=None, help="Default output root (default: /data/projects/NAME/runs).")
@click.option("--priority", default="normal", show_default=True, help="default, priority or normal.")
@click.option("--apply", is_flag=True, help="Create the TauWorkspace after preflight and a server dry run.")
def adopt(name: str, system_namespace: str | None, platform_namespace: str | None, context: str | None,
          apply: bool, **flags: Any) -> None:
    """Adopt a platform-provisioned namespace as TauWorkspace NAME (cluster-wide); preview unless --apply.

    Reads the Namespace, its LocalQueue and ClusterQueue, and the Bound data PVC with its
    StorageClass, recording every UID. Creates only the TauWorkspace, never anything else.

    \b
    Example:
      tau workspace adopt aurora --namespace aurora --data-pvc blob-training --apply
    """
    from tau_core.kube import run
    from tau_core.output import to_yaml
    from tau_workspace.adopt import AdoptRequest, build_intent
    from tau_workspace.adopt import adopt as do_adopt

    request = AdoptRequest(name=name, **flags)
    target = _target(context, system_namespace, platform_namespace=platform_namespace, use_descriptor_context=False)
    intent = build_intent(request, target.system_namespace)
    summary, result = run(partial(do_adopt, apply=apply), target, request, intent)
    click.echo(f"# {summary}")
    click.echo(result if result else to_yaml(intent.manifest()).rstrip("\n"))


@click.command("list", context_settings=CONTEXT)
@system_ns_option
@context_option
@output_flag
def list_(system_namespace: str | None, context: str | None, output: str) -> None:
    """List the TauWorkspaces (NAME PHASE NAMESPACE QUEUE)."""
    from tau_core.kube import run
    from tau_core.output import emit
    from tau_workspace.views import list_text, list_workspaces

    output = _format(output)
    views = run(list_workspaces, _target(context, system_namespace))
    emit({"items": [dict(v.obj) for v in views]}, output, table=lambda _: list_text(views))


@click.command("status", context_settings=CONTEXT)
@click.argument("name")
@system_ns_option
@context_option
@output_flag
def status(name: str, system_namespace: str | None, context: str | None, output: str) -> None:
    """Show one TauWorkspace: phase, namespace, queue, conditions."""
    from tau_core.kube import run
    from tau_core.output import emit
    from tau_workspace.views import get_workspace

    output = _format(output)
    view = run(get_workspace, _target(context, system_namespace), name)
    emit(view.document(), output, table=lambda _: view.text())


@click.command("check", context_settings=CONTEXT)
@click.argument("name")
@system_ns_option
@context_option
@output_flag
@click.option("--data-pvc", default=None, help="Also look at this durable /data PVC in the workspace namespace.")
def check(name: str, system_namespace: str | None, context: str | None, output: str, data_pvc: str | None) -> None:
    """Like status, but exit 1 unless the workspace is Ready at its current generation."""
    from tau_core.kube import run
    from tau_core.output import emit, warning
    from tau_workspace.views import check_workspace, not_ready_error

    output = _format(output)
    result = run(check_workspace, _target(context, system_namespace), name, data_pvc)
    emit(result.view.document(), output, table=lambda _: result.view.text())
    for text in result.warnings:
        if output == "json":
            warning(text)
        else:
            click.echo(f"warning: {text}")
    if not result.view.ready:
        raise not_ready_error(result.view)


@click.group("quota", context_settings=CONTEXT)
def quota() -> None:
    """Workspace quota: what the ClusterQueue grants and uses, and requests for more."""


@quota.command("show", context_settings=CONTEXT)
@click.argument("workspace")
@system_ns_option
@context_option
@output_flag
@click.option("--cluster-queue", default=None, help="ClusterQueue to read (default: from the workspace status).")
def quota_show(workspace: str, system_namespace: str | None, context: str | None, output: str,
               cluster_queue: str | None) -> None:
    """Per flavor: nominal, reserved, used, remaining and borrowing limit; placement; workload counts."""
    from tau_core.kube import run
    from tau_core.output import emit
    from tau_workspace.quota import quota_text, show_quota

    output = _format(output)
    doc = run(show_quota, _target(context, system_namespace), workspace, cluster_queue)
    emit(doc, output, table=quota_text)


@quota.command("request", context_settings=CONTEXT)
@click.argument("workspace")
@system_ns_option
@context_option
@click.option("--resource", default="", help="Resource to raise, e.g. h200 (required).")
@click.option("--requested", type=int, default=0, help="Amount requested (> 0).")
@click.option("--current", type=int, default=None, help="Current amount, for the reviewer.")
@click.option("--duration", default=None, help="How long the extra quota is needed, e.g. 14d.")
@click.option("--reason", default="", help="Why (required).")
@click.option("--mutation-mode", default="ReportOnly", show_default=True, help="ReportOnly or ControllerManagedBurst.")
@click.option("--apply", is_flag=True, help="Create the TauQuotaRequest (default: print it; offline).")
def quota_request(workspace: str, system_namespace: str | None, context: str | None, apply: bool,
                  **flags: Any) -> None:
    """Ask the platform team for more quota (a TauQuotaRequest); preview unless --apply."""
    from tau_core.output import to_yaml
    from tau_workspace.quota import QuotaRequest

    target = _target(context, system_namespace)
    request = QuotaRequest(workspace=workspace, system_namespace=target.system_namespace, **flags).validated()
    if not apply:
        click.echo(to_yaml(request.manifest()).rstrip("\n"))
        return
    from tau_core.kube import run
    from tau_workspace.quota import submit_request

    click.echo(run(submit_request, target, request))


COMMANDS = (create, adopt, list_, status, check, quota)
