"""A loopback Entra ID (Microsoft identity platform v2.0) for msal: OpenID configuration, device code, token.

It speaks the wire protocol msal uses against ``https://127.0.0.1:PORT/{tenant}``: the tenant's
``v2.0/.well-known/openid-configuration``, ``oauth2/v2.0/devicecode``, ``oauth2/v2.0/authorize`` (redirecting
straight back with a code) and ``oauth2/v2.0/token`` with the device-code, authorization-code (PKCE) and
refresh-token grants.  Access tokens are opaque random strings that the fake remembers
(audience, identity, expiry), so a stand-in resource server (the ARM fake, the simulated AKS API server)
can check them through :meth:`EntraFake.verify`.  See ``README.md`` for what it leaves out.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
OIDC_SCOPES = frozenset({"openid", "profile", "offline_access"})
#: device-code outcomes a test can choose
APPROVE, DECLINE, EXPIRE = "approve", "decline", "expire"


@dataclass(frozen=True)
class Identity:
    """The signed-in user: object id, user principal name, home tenant and group claims (plain names here)."""

    oid: str
    upn: str
    tenant: str
    groups: tuple[str, ...] = ()


@dataclass
class Issued:
    identity: Identity
    audience: str
    tenant: str
    expires_at: float


@dataclass
class EntraFake:
    """Tenants it knows, the user who approves device codes, and every token it has issued."""

    tenants: set[str]
    identity: Identity
    device_outcome: str = APPROVE
    token_lifetime: int = 3600
    url: str = ""
    issued: dict[str, Issued] = field(default_factory=dict)
    refresh_tokens: dict[str, Identity] = field(default_factory=dict)
    device_scopes: dict[str, str] = field(default_factory=dict)
    codes: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # code -> scope, PKCE challenge, nonce
    #: (tenant, grant or endpoint) of every request, in order
    requests: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- test controls ------------------------------------------------------------------------------------
    def revoke_refresh_tokens(self) -> None:
        """Every refresh token stops working (an expired or revoked sign-in)."""
        with self._lock:
            self.refresh_tokens.clear()

    def expire_all(self) -> list[str]:
        """Every access token issued so far expires now (as time passing would); returns them."""
        with self._lock:
            for issued in self.issued.values():
                issued.expires_at = 0.0
            return list(self.issued)

    def expire(self, token: str) -> None:
        with self._lock:
            if token in self.issued:
                self.issued[token].expires_at = 0.0

    def grants(self, name: str) -> int:
        return sum(1 for _, what in self.requests if what == name)

    def verify(self, token: str, audience: str) -> Issued | None:
        """The issued, unexpired token for ``audience`` (None otherwise)."""
        with self._lock:
            found = self.issued.get(token)
        if found is None or found.audience != audience or found.expires_at <= time.time():
            return None
        return found

    # -- wire protocol ------------------------------------------------------------------------------------
    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/{tenant}/v2.0/.well-known/openid-configuration", self._openid),
            Route("/{tenant}/oauth2/v2.0/devicecode", self._devicecode, methods=["POST"]),
            Route("/{tenant}/oauth2/v2.0/authorize", self._authorize),
            Route("/{tenant}/oauth2/v2.0/token", self._token, methods=["POST"]),
        ])

    def _unknown_tenant(self, tenant: str) -> JSONResponse | None:
        if tenant in self.tenants:
            return None
        return _error(400, "invalid_tenant", f"AADSTS90002: Tenant '{tenant}' not found. Check to make sure you "
                      "have the correct tenant ID and are signing into the correct cloud.", 90002)

    async def _openid(self, request: Request) -> JSONResponse:
        tenant = request.path_params["tenant"]
        self.requests.append((tenant, "openid-configuration"))
        refused = self._unknown_tenant(tenant)
        if refused is not None:
            return refused
        base = f"{self.url}/{tenant}"
        return JSONResponse({
            "issuer": f"{base}/v2.0",
            "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
            "token_endpoint": f"{base}/oauth2/v2.0/token",
            "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode",
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "tenant_region_scope": "WW",
        })

    async def _devicecode(self, request: Request) -> JSONResponse:
        tenant = request.path_params["tenant"]
        self.requests.append((tenant, "devicecode"))
        refused = self._unknown_tenant(tenant)
        if refused is not None:
            return refused
        code, device_code = secrets.token_hex(4).upper(), f"device-{secrets.token_urlsafe(16)}"
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        with self._lock:
            self.device_scopes[device_code] = str(form.get("scope") or "")
        return JSONResponse({
            "device_code": device_code, "user_code": code,
            "verification_uri": f"{self.url}/devicelogin", "expires_in": 900, "interval": 1,
            "message": f"To sign in, use a web browser to open the page {self.url}/devicelogin and enter the "
                       f"code {code} to authenticate.",
        })

    async def _authorize(self, request: Request) -> Response:
        """The browser leg of the authorization-code flow: the user is already signed in and consents, so the
        fake redirects straight back to the client's loopback listener with a code (PKCE S256 remembered)."""
        tenant, query = request.path_params["tenant"], request.query_params
        self.requests.append((tenant, "authorize"))
        refused = self._unknown_tenant(tenant)
        if refused is not None:
            return refused
        redirect = query.get("redirect_uri") or ""
        if not redirect.startswith(("http://localhost", "http://127.0.0.1")):
            return _error(400, "invalid_request", "AADSTS50011: the redirect URI is not a loopback address.", 50011)
        code = f"code-{secrets.token_urlsafe(16)}"
        with self._lock:
            self.codes[code] = (query.get("scope") or "", query.get("code_challenge") or "", query.get("nonce") or "")
        fields = {"code": code, "state": query.get("state") or ""}
        if query.get("response_mode") == "form_post":  # what msal asks for: the browser posts the code back
            inputs = "".join(f'<input type="hidden" name="{k}" value="{html.escape(v)}">' for k, v in fields.items())
            return HTMLResponse(f'<html><body onload="document.forms[0].submit()"><form method="post" '
                                f'action="{html.escape(redirect)}">{inputs}</form></body></html>')
        return RedirectResponse(f"{redirect}?{urlencode(fields)}", status_code=302)

    async def _token(self, request: Request) -> JSONResponse:
        tenant = request.path_params["tenant"]
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}  # form-urlencoded
        grant = str(form.get("grant_type") or "")
        self.requests.append((tenant, grant))
        refused = self._unknown_tenant(tenant)
        if refused is not None:
            return refused
        scopes = str(form.get("scope") or "").split()
        client_id = str(form.get("client_id") or "")
        if grant == DEVICE_GRANT:
            if self.device_outcome == DECLINE:
                return _error(400, "authorization_declined", "AADSTS70000: The user declined the consent.", 70000)
            if self.device_outcome == EXPIRE:
                return _error(400, "expired_token", "AADSTS70020: The provided value for the input parameter "
                              "'device_code' is not valid. This device code has expired.", 70020)
            identity = self.identity
            with self._lock:
                scopes = scopes or self.device_scopes.get(str(form.get("device_code") or ""), "").split()
        elif grant == "authorization_code":
            with self._lock:
                scope, challenge, nonce = self.codes.pop(str(form.get("code") or ""), ("", "", ""))
            verifier = str(form.get("code_verifier") or "").encode()
            expected = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).decode().rstrip("=")
            if not scope or (challenge and challenge != expected):
                return _error(400, "invalid_grant", "AADSTS70008: The provided authorization code or PKCE "
                              "verifier is invalid.", 70008)
            identity, scopes = self.identity, scopes or scope.split()
            return JSONResponse(self._issue(identity, tenant, scopes, client_id, nonce))
        elif grant == "refresh_token":
            with self._lock:
                found = self.refresh_tokens.get(str(form.get("refresh_token") or ""))
            if found is None:
                return _error(400, "invalid_grant", "AADSTS700082: The refresh token has expired due to "
                              "inactivity.", 700082)
            identity = found
        else:
            return _error(400, "unsupported_grant_type", f"AADSTS70003: grant type {grant!r} is not supported "
                          "by this fake.", 70003)
        return JSONResponse(self._issue(identity, tenant, scopes, client_id))

    def _issue(self, identity: Identity, tenant: str, scopes: list[str], client_id: str,
               nonce: str = "") -> dict[str, Any]:
        resource = [s for s in scopes if s not in OIDC_SCOPES]
        audience = resource[0].removesuffix("/.default") if resource else ""
        access, refresh = f"fake-at-{secrets.token_urlsafe(24)}", f"fake-rt-{secrets.token_urlsafe(24)}"
        now = time.time()
        with self._lock:
            self.issued[access] = Issued(identity, audience, tenant, now + self.token_lifetime)
            self.refresh_tokens[refresh] = identity
        claims = {"iss": f"{self.url}/{tenant}/v2.0", "sub": identity.oid, "aud": client_id, "oid": identity.oid,
                  "tid": tenant, "preferred_username": identity.upn, "name": identity.upn,
                  "iat": int(now), "nbf": int(now) - 1, "exp": int(now) + 3600}
        if nonce:
            claims["nonce"] = nonce
        return {
            "token_type": "Bearer", "scope": " ".join(resource), "expires_in": self.token_lifetime,
            "ext_expires_in": self.token_lifetime, "access_token": access, "refresh_token": refresh,
            "id_token": _unsigned_jwt(claims),
            "client_info": _b64({"uid": identity.oid, "utid": identity.tenant}),
        }


def _b64(doc: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def _unsigned_jwt(claims: dict[str, Any]) -> str:
    """msal reads the ID token's claims without checking a signature; real Entra signs it (RS256)."""
    return f"{_b64({'typ': 'JWT', 'alg': 'none'})}.{_b64(claims)}."


def _error(status: int, code: str, description: str, number: int) -> JSONResponse:
    return JSONResponse({"error": code, "error_description": description, "error_codes": [number],
                         "timestamp": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime()),
                         "trace_id": secrets.token_hex(8), "correlation_id": secrets.token_hex(8)},
                        status_code=status)
