"""``tau workspace``: thin click wiring over ``tau_core.workspace``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tau_core.cli_options import CONTEXT_SETTINGS as CONTEXT
from tau_core.output import emit, output_option


@click.group(context_settings=CONTEXT)
def workspace() -> None:
    """Workspace connection for researchers.

    A repository names its workspace in the checked-in, non-secret descriptor
    tau/workspace.connection.yaml. `tau workspace connection` verifies and pins it;
    `tau run` activates it automatically.
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
    result = connect(descriptor, confirm=stdin_confirm, force_verify=True)
    emit(result.as_dict(), output, table=_online_text)


@workspace.command("init-repo", context_settings=CONTEXT)
@click.argument("name")
@click.option("--local", "local", is_flag=True,
              help="Scaffold a repository whose targets run on this machine (access.method: local).")
@click.option("--output", type=click.Path(path_type=Path), default=None, help="Directory to write (default: ./NAME).")
@click.option("--force", is_flag=True, help="Overwrite the scaffold's own files if they exist.")
def init_repo(name: str, local: bool, output: Path | None, force: bool) -> None:
    """Scaffold a TauGrid-ready repository called NAME.

    With --local the repository runs on this laptop by default: it gets a README,
    tau/train.yaml, tau/smoke.yaml, a small training script that writes metrics,
    a checkpoint and a report, and a workspace descriptor with access.method: local.

    \b
    Examples:
      tau workspace init-repo my-research --local
      cd my-research && tau run smoke && tau run train
    """
    from tau_core.backends.local.scaffold import scaffold_local_repo
    from tau_core.errors import UsageError

    if not local:
        raise UsageError("this release scaffolds local-first repositories only; pass --local",
                         hint="to target a cluster later, edit tau/workspace.connection.yaml (access.method: "
                         "kubeconfig and cluster.contextName)")
    root = output if output is not None else Path(name)
    written = scaffold_local_repo(root, name, force=force)
    for path in written:
        click.echo(f"created {path}")
    click.echo(f"\nNext:\n  cd {root}\n  tau run smoke\n  tau run train\n  tau run status train")
