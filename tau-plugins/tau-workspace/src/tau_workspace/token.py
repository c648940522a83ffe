"""``tau workspace token``: the exec credential plugin of AKS kubeconfigs that Tau writes."""

from __future__ import annotations

import json
import os
import sys

import click

from tau_core.cli_options import CONTEXT_SETTINGS

CONTEXT = CONTEXT_SETTINGS
#: the AKS server application (kept in step with tau_core.azure_auth.AKS_SERVER_APP_ID; no import for --help)
DEFAULT_SERVER_APP = "6dae42f8-4368-4678-94ff-3960e28e3630"


def _interactive() -> bool:
    """Sign in only when the caller says a user is present and the prompt can reach a terminal."""
    try:
        info = json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "{}")
    except ValueError:
        info = {}
    spec = info.get("spec") if isinstance(info, dict) else None
    wanted = bool(spec.get("interactive")) if isinstance(spec, dict) else False
    return wanted and sys.stderr.isatty() and sys.stdin is not None and sys.stdin.isatty()


@click.command("token", context_settings=CONTEXT)
@click.option("--tenant-id", required=True, help="Entra tenant of the cluster (the descriptor's access.aks.tenantID).")
@click.option("--server-id", default=DEFAULT_SERVER_APP, show_default=True,
              help="Entra application of the AKS API server (the token's audience).")
def token(tenant_id: str, server_id: str) -> None:
    """Print a Kubernetes ExecCredential holding an Entra token for an AKS cluster.

    The kubeconfig that `tau workspace connection` writes for access.method: aks runs this
    command as its exec credential plugin, so no kubelogin is needed. It reuses your Azure
    CLI login or Tau's own sign-in, refreshing tokens silently; when a new sign-in is
    needed it fails with a message saying so (run `tau workspace connection` to sign in).
    The token goes to stdout only, never to a file or a log.
    """
    from tau_core.azure_auth import AzureCredential, aks_scope, device_code_prompt
    from tau_core.workspace.aks import exec_credential

    credential = AzureCredential(tenant_id, prompt=device_code_prompt)
    found = credential.get_token(aks_scope(server_id), interactive=_interactive())
    click.echo(json.dumps(exec_credential(found.token, found.expires_on)))
