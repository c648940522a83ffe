"""Which Azure credential the Kusto sink and history source sign in with (azure-identity, msal through Tau).

In order, the first that applies:

1. **workload identity** (a pod in the cluster): ``AZURE_FEDERATED_TOKEN_FILE`` is set, and with it the
   webhook's ``AZURE_CLIENT_ID`` and ``AZURE_TENANT_ID``: azure-identity's ``WorkloadIdentityCredential``.
   A token file without the other two is a half-configured pod: a one-line error naming what is missing;
2. **Tau's sign-in** when the tenant is known (``AZURE_TENANT_ID``, or the one account in Tau's msal token
   cache): :func:`tau_core.azure_auth.signed_in_credential`, which reuses an Azure CLI login for that tenant
   and otherwise signs in with an msal device code (``TAU_AUTH_MODE`` selects);
3. **the Azure CLI login** of this machine (``az`` on ``PATH``, tenant unknown): azure-identity's
   ``AzureCliCredential``, in the tenant ``az login`` chose; skipped when ``TAU_AUTH_MODE`` asks for a device
   code or a browser sign-in;
4. nothing: a one-line :class:`~tau_core.errors.ConfigError` saying how to sign in.

Nothing here talks to the network: the credentials ask for tokens only when a client needs one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from typing import Any

from tau_core.errors import ConfigError

WORKLOAD_IDENTITY_ENV = ("AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_ID", "AZURE_TENANT_ID")


def select_credential(env: Mapping[str, str] | None = None,
                      which: Callable[[str], str | None] = shutil.which) -> Any:
    """The credential for Kusto (see the module docstring); ``which`` finds the ``az`` executable."""
    from tau_core.azure_auth import auth_mode, signed_in_credential

    env = os.environ if env is None else env
    if env.get("AZURE_FEDERATED_TOKEN_FILE"):
        missing = [name for name in WORKLOAD_IDENTITY_ENV if not env.get(name)]
        if missing:
            raise ConfigError(f"workload identity is incomplete: AZURE_FEDERATED_TOKEN_FILE is set but "
                              f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not",
                              hint="label the pod azure.workload.identity/use=true and annotate its service "
                                   "account with azure.workload.identity/client-id")
        from azure.identity import WorkloadIdentityCredential

        return WorkloadIdentityCredential(tenant_id=env["AZURE_TENANT_ID"], client_id=env["AZURE_CLIENT_ID"],
                                          token_file_path=env["AZURE_FEDERATED_TOKEN_FILE"])
    signed_in = signed_in_credential(env)
    if signed_in is not None:
        return signed_in
    if auth_mode(env) in ("", "azurecli") and which("az"):
        from azure.identity import AzureCliCredential

        return AzureCliCredential()
    raise ConfigError("no Azure sign-in for Kusto",
                      hint="run `az login` (or `tau workspace connection` to sign in with a device code), "
                           "or use workload identity in the cluster")
