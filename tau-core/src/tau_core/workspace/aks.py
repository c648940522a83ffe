"""AKS access for descriptors with ``access.method: aks``.

The cluster's user kubeconfig comes from Azure Resource Manager
(``POST {resourceID}/listClusterUserCredential``).  Tau keeps its cluster entry (server and CA) and
replaces the user with an ``exec`` credential plugin that is Tau itself (``tau workspace token``), which
prints a ``client.authentication.k8s.io/v1`` ExecCredential holding an Entra token for the AKS server
application.  No kubelogin is needed, and no token is ever written into the kubeconfig: it references
only the plugin.  A cluster that hands out static credentials (local accounts) is refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import attrs

from tau_core.azure_auth import AKS_SERVER_APP_ID, AzureCredential
from tau_core.errors import ClusterError, ConfigError, TauError

ARM_API_VERSION = "2024-05-01"
EXEC_API_VERSION = "client.authentication.k8s.io/v1"
RESOURCE_FIELD = "access.aks.resourceID"
TENANT_FIELD = "access.aks.tenantID"
ARM_TIMEOUT = 30.0
_STATIC_USER_KEYS = ("token", "tokenFile", "client-certificate", "client-certificate-data", "client-key",
                     "client-key-data", "password", "username", "auth-provider")


@attrs.frozen
class AksTarget:
    """The cluster entry ARM returned (server and CA), and the audience its API server accepts."""

    server: str
    cluster: dict[str, Any] = attrs.field(eq=False)
    server_app_id: str

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.cluster, sort_keys=True).encode()).hexdigest()


def tau_command() -> str:
    """The ``tau`` executable the kubeconfig's exec plugin runs (the one beside this interpreter first)."""
    beside = Path(sys.executable).parent / ("tau.exe" if os.name == "nt" else "tau")
    if beside.is_file():
        return str(beside)
    return shutil.which("tau") or "tau"


def user_credential_url(arm_endpoint: str, resource_id: str) -> str:
    return (f"{arm_endpoint}{resource_id}/listClusterUserCredential"
            f"?api-version={ARM_API_VERSION}&format=exec")


def fetch_target(resource_id: str, credential: AzureCredential, *, interactive: bool) -> AksTarget:
    """Ask ARM for the cluster's user kubeconfig and keep only its cluster entry."""
    import requests

    token = credential.get_token(credential.cloud.arm_scope, interactive=interactive)
    url = user_credential_url(credential.cloud.arm_endpoint, resource_id)
    try:
        response = credential.session.post(url, headers={"Authorization": f"Bearer {token.token}"},
                                           timeout=ARM_TIMEOUT)
    except requests.RequestException as exc:
        raise ClusterError(f"cannot reach Azure Resource Manager at {credential.cloud.arm_endpoint}: "
                           f"{type(exc).__name__}", hint="check the network, then run the command again") from exc
    if response.status_code != 200:
        raise _arm_error(response.status_code, _arm_code(response), resource_id, credential.tenant_id)
    try:
        values = [k["value"] for k in response.json().get("kubeconfigs") or [] if k.get("value")]
        config = _parse_kubeconfig(base64.b64decode(values[0]).decode()) if values else None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ClusterError(f"Azure Resource Manager returned no usable kubeconfig for {resource_id} "
                           f"({RESOURCE_FIELD})", hint="run the command again; report it if it persists") from exc
    if not isinstance(config, dict):
        raise ClusterError(f"Azure Resource Manager returned no kubeconfig for {resource_id} ({RESOURCE_FIELD})",
                           hint="check that the cluster is running: az aks show --ids <resourceID>")
    return _target_from(config, resource_id)


def _parse_kubeconfig(text: str) -> Any:
    from tau_core.kubeconfig import parse_yaml

    return parse_yaml(text)


def _arm_code(response: Any) -> str:
    try:
        return str((response.json().get("error") or {}).get("code") or "")
    except (ValueError, AttributeError):
        return ""


def _arm_error(status: int, code: str, resource_id: str, tenant_id: str) -> TauError:
    if status == 401 and "tenant" in code.lower():
        return ConfigError(f"the AKS cluster {resource_id} belongs to a different tenant than {tenant_id} "
                           f"({TENANT_FIELD})", hint=f"set {TENANT_FIELD} to the tenant of the cluster's "
                           "subscription (az account show --query tenantId)")
    if status == 401:
        return ClusterError(f"Azure Resource Manager rejected the sign-in for tenant {tenant_id} ({TENANT_FIELD})",
                            hint="sign in again with `tau workspace connection`")
    if status == 403:
        return ClusterError(f"you may not read user credentials of the AKS cluster {resource_id} "
                            f"({RESOURCE_FIELD}){f': {code}' if code else ''}",
                            hint="ask your platform team for the 'Azure Kubernetes Service Cluster User Role' "
                            "on this cluster")
    if status == 404:
        return ConfigError(f"the AKS cluster {resource_id} ({RESOURCE_FIELD}) was not found",
                           hint=f"check {RESOURCE_FIELD} in tau/workspace.connection.yaml (subscription, "
                           "resource group and cluster name)")
    return ClusterError(f"Azure Resource Manager answered HTTP {status}{f' ({code})' if code else ''} for "
                        f"{resource_id} ({RESOURCE_FIELD})", hint="run the command again; report it if it persists")


def _target_from(config: dict[str, Any], resource_id: str) -> AksTarget:
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or [] if isinstance(c, dict)}
    chosen = contexts.get(config.get("current-context")) or next(iter(contexts.values()), {})
    clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or [] if isinstance(c, dict)}
    users = {u.get("name"): u.get("user") or {} for u in config.get("users") or [] if isinstance(u, dict)}
    cluster = clusters.get(chosen.get("cluster")) or next(iter(clusters.values()), None)
    user = users.get(chosen.get("user")) or next(iter(users.values()), {})
    if not cluster or not cluster.get("server"):
        raise ClusterError(f"the kubeconfig of AKS cluster {resource_id} ({RESOURCE_FIELD}) names no API server",
                           hint="run the command again; report it if it persists")
    if "exec" not in user and any(k in user for k in _STATIC_USER_KEYS):
        raise ClusterError(f"the AKS cluster {resource_id} ({RESOURCE_FIELD}) handed out static credentials "
                           "(a local account); Tau only connects through Entra ID",
                           hint="ask your platform team to enable Entra ID integration and disable local "
                           "accounts on the cluster")
    args = [str(a) for a in (user.get("exec") or {}).get("args") or []]
    server_app = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--server-id"), AKS_SERVER_APP_ID)
    return AksTarget(str(cluster["server"]), dict(cluster), server_app)


def exec_kubeconfig(target: AksTarget, context: str, tenant_id: str) -> dict[str, Any]:
    """The isolated kubeconfig: ARM's cluster entry and Tau's exec plugin (no credential in the file)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": context,
        "contexts": [{"name": context, "context": {"cluster": context, "user": f"{context}-tau"}}],
        "clusters": [{"name": context, "cluster": dict(target.cluster)}],
        "users": [{"name": f"{context}-tau", "user": {"exec": {
            "apiVersion": EXEC_API_VERSION,
            "command": tau_command(),
            "args": ["workspace", "token", "--tenant-id", tenant_id, "--server-id", target.server_app_id],
            "interactiveMode": "IfAvailable",
            "provideClusterInfo": False,
        }}}],
        "preferences": {},
    }


def exec_credential(token: str, expires_on: int) -> dict[str, Any]:
    """A ``client.authentication.k8s.io/v1`` ExecCredential (printed on stdout only)."""
    from datetime import UTC, datetime

    stamp = datetime.fromtimestamp(expires_on, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": EXEC_API_VERSION, "kind": "ExecCredential", "spec": {"interactive": False},
            "status": {"token": token, "expirationTimestamp": stamp}}
