"""``tau workspace``: thin click wiring over ``tau_core.workspace``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tau_core.cli_options import CONTEXT_SETTINGS as CONTEXT
from tau_core.output import emit, output_option


@click.group(context_settings=CONTEXT)
def workspace() -> None:
    """Workspaces: administration for the platform team, connection for researchers.

    Platform team: create (or adopt) the TauWorkspace, then list, status and check it,
    and read its quota. Only create, adopt and quota request write to the cluster, and
    each only previews unless given --apply.

    Researchers: a repository names its workspace in the checked-in, non-secret
    descriptor tau/workspace.connection.yaml (init-repo writes one).
    `tau workspace connection` verifies and pins it; `tau run` activates it automatically.
    """


def _offline_text(doc: dict[str, Any]) -> str:
    return "\n".join([
        "Workspace connection configuration is valid.",
        f"  Descriptor:    {doc['descriptor']}",
        f"  Workspace:     {doc['workspace']}",
        f"  Access:        {doc['access']}",
        f"  Context:       {doc['context'] or '-'}",
        f"  Authorization: {doc['authorization'] or '-'}",
        "Cluster access was not checked.",
    ])


def _online_text(doc: dict[str, Any]) -> str:
    return "\n".join([
        "Connected." + (" (verified within the last 5 minutes; cached)" if doc["cached"] else ""),
        f"  Workspace:     {doc['workspace']}",
        f"  Descriptor:    {doc['descriptor_path']}",
        "  Status:        Ready",
        f"  Namespace:     {doc['namespace']}",
        f"  Queue:         {doc['queue']}",
        f"  Authorization: {doc['authorization_mode']}",
        "Ready: tau run can now use this workspace.",
    ])


@workspace.command("connection", context_settings=CONTEXT)
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--offline", is_flag=True, help="Validate only the descriptor; use no credentials or network.")
@output_option("table", "json")
def connection(path: Path | None, offline: bool, output: str) -> None:
    """Verify and pin this repository's workspace connection.

    Finds tau/workspace.connection.yaml from PATH (default: the current directory) up to
    the Git repository boundary. Online, it isolates the descriptor's kubectl context
    into a private kubeconfig, asks for approval on first use, checks that the
    TauWorkspace is Ready, its LocalQueue readable and your verbs allowed, then pins the
    workspace. A verified connection is reused for 5 minutes.

    \b
    Examples:
      tau workspace connection --offline
      tau workspace connection
      echo y | tau workspace connection services/trainer
    """
    from tau_core.workspace import connect, load_descriptor, require_descriptor
    from tau_core.workspace.connection import stdin_confirm

    start = path if path is None or path.is_dir() else path.parent
    descriptor = load_descriptor(path if path is not None and path.is_file() else require_descriptor(start))
    if offline:
        emit(descriptor.summary(), output, table=_offline_text)
        return
    result = connect(descriptor, confirm=stdin_confirm, force_verify=True, sign_in=True)
    emit(result.as_dict(), output, table=_online_text)


@workspace.command("init-repo", context_settings=CONTEXT)
@click.argument("name")
@click.option("--local", "local", is_flag=True,
              help="Scaffold a repository whose targets run on this machine (access.method: local).")
@click.option("--output", type=click.Path(path_type=Path), default=None, help="Directory to write (default: ./NAME).")
@click.option("--image", default=None, help="Image the targets run (required unless --local).")
@click.option("--template", default="python", show_default=True,
              help="Scaffold template: python, external-github (needs --upstream and --ref) or dpr "
                   "(facebookresearch/DPR@main unless --upstream/--ref say otherwise).")
@click.option("--python-version", default="3.12", show_default=True)
@click.option("--package", default=None, help="Python package name (default: NAME sanitized).")
@click.option("--tau-rev", default="main", show_default=True, help="Tau revision recorded in the scaffold.")
@click.option("--workspace", default=None, help="TauWorkspace name for tau/workspace.connection.yaml.")
@click.option("--kube-context", default=None,
              help="Kubernetes context for a provider-neutral descriptor (AKS: defaults to --aks-cluster).")
@click.option("--azure-subscription-id", default=None, help="AKS descriptor: subscription (UUID).")
@click.option("--azure-tenant-id", default=None, help="AKS descriptor: Entra tenant (UUID).")
@click.option("--aks-resource-group", default=None, help="AKS descriptor: resource group.")
@click.option("--aks-cluster", default=None, help="AKS descriptor: cluster name.")
@click.option("--acr-name", default=None, help="Container registry used by scripts/setup-azure.sh.")
@click.option("--upstream", default=None, help="Upstream templates: the GitHub repository OWNER/REPO to run.")
@click.option("--ref", default=None, help="Upstream templates: the branch, tag or full commit SHA to check out.")
@click.option("--package-import", default=None,
              help="Upstream templates: the module the smoke target imports (default: the repository name).")
@click.option("--smoke-command", default=None, help="Upstream templates: what `tau run smoke` runs in the checkout.")
@click.option("--train-command", default=None, help="Upstream templates: what `tau run train` runs in the checkout.")
@click.option("--force", is_flag=True, help="Overwrite the scaffold's own files if they exist.")
def init_repo(name: str, output: Path | None, force: bool, **flags: Any) -> None:
    """Scaffold a TauGrid-ready repository called NAME.

    The descriptor tau/workspace.connection.yaml is written only when enough is known:
    --workspace with --kube-context (access.method: kubeconfig), or --workspace with the four
    Azure flags (access.method: aks). --local makes a repository that runs on this laptop.
    The same flags always produce the same bytes.

    \b
    Examples:
      tau workspace init-repo my-research --local
      tau workspace init-repo my-research --image ghcr.io/acme/train:1.0 --workspace aurora --kube-context research
      tau workspace init-repo dpr-research --template dpr --image ghcr.io/acme/dpr:1.0
      tau workspace init-repo my-port --template external-github --upstream acme/lib --ref v1.2.0 --image <tag>
    """
    from tau_workspace.scaffold import ScaffoldRequest, plan, write

    files = plan(ScaffoldRequest(name=name, **flags))
    root = output if output is not None else Path(name)
    for path in write(root, files, force=force):
        click.echo(f"created {path}")
    if flags["local"]:
        click.echo(f"\nNext:\n  cd {root}\n  tau run smoke\n  tau run train\n  tau run status train")
        return
    has_descriptor = any(f.path == "tau/workspace.connection.yaml" for f in files)
    steps = [f"cd {root}", "./scripts/configure.sh --image <registry>/<repository>:<immutable-tag>"]
    steps += (["tau workspace connection", "tau run smoke", "tau run train"] if has_descriptor else
              ["# no descriptor yet: rerun with --workspace and --kube-context (or the Azure flags), --force"])
    click.echo("\nNext:\n" + "\n".join(f"  {s}" for s in steps))


def _attach() -> None:
    from tau_workspace.cli_admin import COMMANDS
    from tau_workspace.token import token  # the AKS exec credential plugin

    for command in (*COMMANDS, token):
        workspace.add_command(command)


_attach()
