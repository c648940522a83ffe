"""Azure sign-in for Tau: one credential for AKS access, ``tau data`` and Kusto, so a user signs in once.

:class:`AzureCredential` gives bearer tokens for a tenant:

1. it reuses an existing Azure CLI login when there is one (``azure-identity``'s ``AzureCliCredential``);
2. otherwise it signs in with **msal** as a public client, by device code (the default) or in a browser,
   and keeps msal's token cache under the Tau config directory (``auth/msal-token-cache.json``, mode 0600,
   directory 0700, written atomically), so later commands refresh tokens silently.

``TAU_AUTH_MODE`` selects the mode: unset (Azure CLI login when present, else device code), ``azurecli``
(only the Azure CLI login), ``devicecode`` or ``interactive`` (only msal, by device code or in a browser).

Sovereign clouds and test endpoints: ``AZURE_AUTHORITY_HOST`` (the variable azure-identity reads) names the
Entra host, ``TAU_AZURE_ARM_ENDPOINT`` the Resource Manager endpoint and ``TAU_AZURE_CA_BUNDLE`` a CA file
to trust for both (a TLS-inspecting proxy, or a test CA).

No token is ever logged or written anywhere but the msal cache.  ``msal`` and ``azure-identity`` are
imported only when a token is needed (they stay out of ``tau --help``).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from tau_core.errors import ClusterError, ConfigError, TauError
from tau_core.fsutil import write_json_atomic

if TYPE_CHECKING:
    import msal
    import requests

ENV_AUTH_MODE = "TAU_AUTH_MODE"
ENV_AUTHORITY_HOST = "AZURE_AUTHORITY_HOST"
ENV_ARM_ENDPOINT = "TAU_AZURE_ARM_ENDPOINT"
ENV_CA_BUNDLE = "TAU_AZURE_CA_BUNDLE"
AUTH_MODES = ("azurecli", "devicecode", "interactive")
PUBLIC_AUTHORITY_HOST = "https://login.microsoftonline.com"
PUBLIC_ARM_ENDPOINT = "https://management.azure.com"
#: The public client Tau signs in as: the first-party Azure CLI application, which is also
#: azure-identity's default for developer sign-in; it is pre-authorized for ARM and AKS.
CLIENT_ID = "04b07795-8ddb-461a-bbee-02f9e1bf7b46"
#: The Entra application every Entra-enabled AKS API server accepts tokens for.
AKS_SERVER_APP_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"
#: seconds a browser sign-in may take before Tau gives up waiting for the redirect
INTERACTIVE_TIMEOUT = 300
CACHE_FILE = Path("auth") / "msal-token-cache.json"
#: Where the descriptor names the tenant; fault messages point at it.
TENANT_FIELD = "access.aks.tenantID"

#: prompt(text) shows a sign-in instruction (device code message) to the user.
Prompt = Callable[[str], None]


class SignInRequired(ClusterError):
    """There is no usable sign-in and this command may not start one (or the sign-in failed)."""


@attrs.frozen
class AzureCloud:
    """The Entra and Resource Manager endpoints (and the CA to trust for them)."""

    authority_host: str = PUBLIC_AUTHORITY_HOST
    arm_endpoint: str = PUBLIC_ARM_ENDPOINT
    ca_bundle: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AzureCloud:
        env = os.environ if env is None else env
        host = (env.get(ENV_AUTHORITY_HOST) or PUBLIC_AUTHORITY_HOST).rstrip("/")
        if not host.startswith("https://"):
            host = "https://" + host.split("://", 1)[-1]  # azure-identity accepts a bare host name too
        arm = (env.get(ENV_ARM_ENDPOINT) or PUBLIC_ARM_ENDPOINT).rstrip("/")
        return cls(host, arm, env.get(ENV_CA_BUNDLE) or None)

    @property
    def is_public(self) -> bool:
        return self.authority_host == PUBLIC_AUTHORITY_HOST

    @property
    def arm_scope(self) -> str:
        return f"{self.arm_endpoint}/.default"

    def session(self) -> requests.Session:
        """A requests session for msal and ARM; an explicit CA replaces the environment's trust settings."""
        import requests

        session = requests.Session()
        if self.ca_bundle:
            session.trust_env = False  # requests would let REQUESTS_CA_BUNDLE override session.verify
            session.verify = self.ca_bundle
        return session


@attrs.frozen
class AccessToken:
    token: str = attrs.field(repr=False)
    expires_on: int
    source: str  # "azurecli" or "msal"


def aks_scope(server_app_id: str = AKS_SERVER_APP_ID) -> str:
    return f"{server_app_id}/.default"


def auth_mode(env: Mapping[str, str] | None = None) -> str:
    """The validated ``TAU_AUTH_MODE`` ("" when unset)."""
    env = os.environ if env is None else env
    mode = (env.get(ENV_AUTH_MODE) or "").strip().lower()
    if mode and mode not in AUTH_MODES:
        raise ConfigError(f"{ENV_AUTH_MODE}={mode!r} is not a credential mode",
                          hint=f"use one of {', '.join(AUTH_MODES)}, or unset it")
    return mode


def _require_extra() -> None:
    import importlib.util

    missing = [m for m in ("msal", "azure.identity", "requests") if importlib.util.find_spec(m.split(".")[0]) is None]
    if missing:
        raise TauError(f"Azure sign-in needs {', '.join(missing)}, which are not installed",
                       hint="pip install 'tau-core[azure]' (the `tau` package includes it)")


def cache_path(env: Mapping[str, str] | None = None) -> Path:
    from tau_core.workspace.connection import config_dir

    return config_dir(env) / CACHE_FILE


class TokenCacheFile:
    """msal's ``SerializableTokenCache`` persisted at mode 0600 (directory 0700), written atomically."""

    def __init__(self, path: Path) -> None:
        import msal

        self.path = path
        self.cache = msal.SerializableTokenCache()
        try:
            self.cache.deserialize(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            pass
        except (OSError, ValueError):
            pass  # a damaged cache only means signing in again; it is rewritten on the next sign-in

    def save(self) -> None:
        if self.cache.has_state_changed:
            write_json_atomic(self.path, json.loads(self.cache.serialize()), mode=0o600, durable=True,
                              dir_mode=0o700)
            self.cache.has_state_changed = False


def _result_error(result: Mapping[str, Any]) -> tuple[str, str]:
    return str(result.get("error") or ""), str(result.get("error_description") or "").split("\r\n")[0].strip()


class AzureCredential:
    """Tokens for ``tenant_id``; see the module docstring for the order in which sources are tried."""

    def __init__(self, tenant_id: str, *, env: Mapping[str, str] | None = None, cloud: AzureCloud | None = None,
                 prompt: Prompt | None = None, tenant_field: str = TENANT_FIELD) -> None:
        self.env = dict(os.environ if env is None else env)
        self.tenant_id = tenant_id
        self.cloud = cloud or AzureCloud.from_env(self.env)
        self.mode = auth_mode(self.env)
        self.prompt = prompt
        self.tenant_field = tenant_field
        self._session: requests.Session | None = None
        self._cache: TokenCacheFile | None = None
        self._app: msal.PublicClientApplication | None = None

    @property
    def session(self) -> requests.Session:
        if self._session is None:
            self._session = self.cloud.session()
        return self._session

    def where(self) -> str:
        return f"tenant {self.tenant_id} ({self.tenant_field})"

    # -- public -----------------------------------------------------------------------------------------------
    def get_token(self, scope: str, *, interactive: bool) -> AccessToken:
        """A token for ``scope``; signs in only when ``interactive`` (else :class:`SignInRequired`)."""
        _require_extra()
        if self.mode in ("", "azurecli"):
            token = self._from_azure_cli(scope)
            if token is not None:
                return token
            if self.mode == "azurecli":
                raise SignInRequired(f"no Azure CLI login can give a token for {self.where()}",
                                     hint=f"run `az login --tenant {self.tenant_id}`, or unset {ENV_AUTH_MODE} "
                                     "to let Tau sign you in")
        return self._from_msal(scope, interactive=interactive)

    # -- Azure CLI --------------------------------------------------------------------------------------------
    def _from_azure_cli(self, scope: str) -> AccessToken | None:
        if not self.cloud.is_public:
            return None  # an az login belongs to its own cloud; never send it to another authority
        from azure.core.exceptions import ClientAuthenticationError
        from azure.identity import AzureCliCredential, CredentialUnavailableError

        quiet = logging.getLogger("azure.identity")  # it logs each miss as a warning; a miss is normal here
        level, quiet.level = quiet.level, logging.ERROR
        try:
            found = AzureCliCredential(tenant_id=self.tenant_id).get_token(scope)
        except (CredentialUnavailableError, ClientAuthenticationError):
            return None  # no az, not logged in, or not into this tenant: Tau signs in itself
        finally:
            quiet.level = level
        return AccessToken(found.token, int(found.expires_on), "azurecli")

    # -- msal -------------------------------------------------------------------------------------------------
    def _msal_app(self) -> msal.PublicClientApplication:
        if self._app is None:
            import msal

            self._cache = TokenCacheFile(cache_path(self.env))
            custom = not self.cloud.is_public
            try:
                self._app = msal.PublicClientApplication(
                    CLIENT_ID, authority=f"{self.cloud.authority_host}/{self.tenant_id}",
                    token_cache=self._cache.cache, http_client=self.session,
                    instance_discovery=False if custom else None, validate_authority=not custom)
            except ValueError as exc:  # msal could not read the tenant's OpenID configuration
                raise self._tenant_error("") from exc
            except OSError as exc:  # requests' ConnectionError is an OSError
                raise self._unreachable(exc) from exc
        return self._app

    def _from_msal(self, scope: str, *, interactive: bool) -> AccessToken:
        app = self._msal_app()
        accounts = [a for a in app.get_accounts() if a.get("realm") == self.tenant_id] or app.get_accounts()
        expired = False
        for account in accounts[:1]:
            result = app.acquire_token_silent_with_error([scope], account)
            if result and "access_token" in result:
                return self._done(result)
            expired = result is not None  # the refresh token was refused (expired or revoked)
        if not interactive:
            what = "has expired; sign in again" if expired else "is needed and this command may not start one"
            raise SignInRequired(f"an Azure sign-in to {self.where()} {what}",
                                 hint="run `tau workspace connection` in a terminal to sign in "
                                 f"(or `az login --tenant {self.tenant_id}`)")
        if self.mode == "interactive":
            result = self._call(lambda: app.acquire_token_interactive(
                [scope], prompt="select_account", timeout=INTERACTIVE_TIMEOUT))
        else:
            result = self._device_code(app, scope)
        if "access_token" not in result:
            raise self._flow_error(result)
        return self._done(result)

    def _device_code(self, app: msal.PublicClientApplication, scope: str) -> dict[str, Any]:
        flow = self._call(lambda: app.initiate_device_flow(scopes=[scope]))
        if "user_code" not in flow:
            raise self._flow_error(flow)
        if self.prompt is not None:
            self.prompt(str(flow.get("message") or f"Sign in at {flow.get('verification_uri')} with code "
                                                     f"{flow['user_code']}"))
        return self._call(lambda: app.acquire_token_by_device_flow(flow))

    def _call(self, fn: Callable[[], Any]) -> dict[str, Any]:
        from msal.exceptions import MsalError

        try:
            result = fn()
        except (MsalError, RuntimeError) as exc:  # an HTTP error without an OAuth body, or a response msal refused
            raise ClusterError(f"Entra ID could not complete the sign-in to {self.where()}: {exc}",
                               hint="run the command again; check the service health if it persists") from exc
        except ValueError as exc:
            raise self._tenant_error("") from exc
        except OSError as exc:
            raise self._unreachable(exc) from exc
        return dict(result or {})

    def _done(self, result: Mapping[str, Any]) -> AccessToken:
        if self._cache is not None:
            self._cache.save()
        expires_in = int(result.get("expires_in") or 0)
        return AccessToken(str(result["access_token"]), int(time.time()) + expires_in, "msal")

    # -- faults -----------------------------------------------------------------------------------------------
    def _flow_error(self, result: Mapping[str, Any]) -> TauError:
        code, description = _result_error(result)
        if code == "authorization_declined":
            return SignInRequired(f"the Azure sign-in to {self.where()} was declined",
                                  hint="sign in again and accept the consent prompt, or ask your tenant "
                                  "administrator to grant consent for your organisation")
        if code == "expired_token":
            return SignInRequired(f"the device-code sign-in to {self.where()} expired before it was completed",
                                  hint="run the command again and finish signing in before the code expires")
        if code in ("invalid_tenant", "invalid_request") and "tenant" in description.lower():
            return self._tenant_error(description)
        if code == "invalid_grant":
            return SignInRequired(f"the Azure sign-in to {self.where()} was refused: {description or code}",
                                  hint="sign in again with `tau workspace connection`")
        return SignInRequired(f"Azure sign-in to {self.where()} failed: {code or 'no token'}"
                              + (f" ({description})" if description else ""),
                              hint="sign in again with `tau workspace connection`")

    def _tenant_error(self, detail: str) -> TauError:
        detail = detail.strip().split(". ")[0] if detail.strip().startswith("AADSTS") else ""
        return ConfigError(f"Entra ID does not know {self.where()}" + (f": {detail}" if detail else ""),
                           hint=f"check {self.tenant_field} in tau/workspace.connection.yaml against the "
                           "cluster's tenant (az aks show --query aadProfile.tenantId)")

    def _unreachable(self, exc: BaseException) -> TauError:
        return ClusterError(f"cannot reach Entra ID at {self.cloud.authority_host} for {self.where()}: "
                            f"{type(exc).__name__}",
                            hint=f"check the network (and {ENV_AUTHORITY_HOST} / {ENV_CA_BUNDLE} if set)")


def device_code_prompt(text: str) -> None:
    """Show a sign-in instruction on stderr (stdout stays clean for JSON and ExecCredentials)."""
    import click

    click.echo(text, err=True)


class TokenCredentialAdapter:
    """:class:`AzureCredential` as an azure-core ``TokenCredential`` (``get_token(*scopes)``), for SDK clients
    (Blob storage in ``tau data``, Kusto) so they use the same sign-in; never prompts."""

    def __init__(self, credential: AzureCredential) -> None:
        self.credential = credential

    def get_token(self, *scopes: str, claims: str | None = None, tenant_id: str | None = None,
                  **_kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken as SdkToken
        from azure.core.exceptions import ClientAuthenticationError

        try:
            found = self.credential.get_token(scopes[0], interactive=False)
        except TauError as exc:
            raise ClientAuthenticationError(message=exc.message) from exc
        return SdkToken(found.token, found.expires_on)


def signed_in_credential(env: Mapping[str, str] | None = None) -> TokenCredentialAdapter | None:
    """Tau's sign-in as an SDK credential, or None when Tau holds none.  The tenant is ``AZURE_TENANT_ID``, else
    the one account in Tau's token cache (the tenant `tau workspace connection` signed in to)."""
    env = os.environ if env is None else env
    tenant = env.get("AZURE_TENANT_ID") or ""
    if not tenant:
        try:
            accounts = json.loads(cache_path(env).read_text(encoding="utf-8")).get("Account") or {}
        except (OSError, ValueError):
            return None
        realms = {str(a.get("realm")) for a in accounts.values() if isinstance(a, dict) and a.get("realm")}
        if len(realms) != 1:
            return None
        tenant = realms.pop()
    return TokenCredentialAdapter(AzureCredential(tenant, env=env))
