"""Resolve the scope of one request: legacy (one configured workspace) or managed (directory + identity).

:func:`resolve` returns a :class:`Scope` or raises :class:`ScopeError` carrying the HTTP status and body.
The identity headers are trusted only because a platform-owned auth proxy sets them; their size is bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

import attrs

from taugrid_portal.portal.config import PortalConfig
from taugrid_portal.portal.directory import Directory, Scope, scope_of

USER_LIMIT = 1024
GROUPS_LIMIT = 16 * 1024
GROUPS_MAX = 256
SCOPED_PARAMS = ("namespace", "cluster", "team", "queue", "workspace")
STRIPPED_ON_REDIRECT = ("namespace", "cluster", "endpoint", "portalEndpoint", "experimentsUrl")


@attrs.frozen
class Viewer:
    user: str
    groups: frozenset[str]


class ScopeError(Exception):
    def __init__(self, status: int, body: dict[str, object]) -> None:
        super().__init__(str(body))
        self.status = status
        self.body = body


def _unavailable(status: int, reason: str) -> ScopeError:
    return ScopeError(status, {"reason": reason, "state": "unavailable"})


def viewer(headers: Mapping[str, str], config: PortalConfig) -> Viewer:
    user = headers.get(config.user_header.lower(), "")
    raw_groups = headers.get(config.groups_header.lower(), "")
    parts = [g.strip().lower() for g in raw_groups.replace(";", ",").split(",") if g.strip()]
    if len(user.encode()) > USER_LIMIT or len(raw_groups.encode()) > GROUPS_LIMIT or len(parts) > GROUPS_MAX:
        raise _unavailable(431, "authenticated viewer claims exceed supported limits")
    if not user.strip():
        raise _unavailable(401, "authenticated viewer identity is required")
    return Viewer(user.strip().lower(), frozenset(parts))


def legacy_scope(config: PortalConfig) -> Scope:
    return Scope(workspace=config.workspace, name="Default", cluster=config.cluster,
                 namespace=config.namespace or "", experiments_url="/stellar")


def authorized(directory: Directory, who: Viewer) -> list[Scope]:
    """The workspaces whose users or groups include the viewer.  The authorization mode does not widen this:
    ``cluster-wide`` says what a workspace's viewers may see (e.g. DaemonSets), not who may view it, which is
    why the directory requires a user or group in both modes."""
    allowed = [w for w in directory.workspaces if w.authorizes(who.user, who.groups)]
    return [scope_of(w, directory) for w in sorted(allowed, key=lambda w: (w.name, w.id))]


def _check_conflicts(query: Mapping[str, str], scope: Scope) -> None:
    expected = {"namespace": scope.namespace, "cluster": scope.cluster, "team": scope.team,
                "queue": scope.local_queue, "workspace": scope.workspace}
    for key in SCOPED_PARAMS:
        value = query.get(key)
        if value is not None and value != expected[key]:
            raise ScopeError(400, {"error": f"{key} query conflicts with resolved workspace scope",
                                   "state": "invalid"})


def resolve(query: Mapping[str, str], headers: Mapping[str, str], config: PortalConfig,
            directory: Directory | None, *, allow_override: tuple[str, ...] = ()) -> Scope:
    """The scope of one request.  Legacy mode lets ``?namespace=``/``?cluster=`` narrow the scope."""
    if directory is None:
        scope = legacy_scope(config)
        ws = query.get("workspace")
        if ws is not None and ws != scope.workspace:
            raise ScopeError(400, {"error": "workspace query conflicts with configured workspace",
                                   "state": "invalid"})
        if config.namespace and query.get("namespace") not in (None, config.namespace):
            raise ScopeError(400, {"error": "namespace query conflicts with the Portal's --namespace",
                                   "state": "invalid"})
        if query.get("namespace") and "namespace" in allow_override:
            scope = attrs.evolve(scope, namespace=query["namespace"])
        return scope
    who = viewer(headers, config)
    mine = authorized(directory, who)
    requested = query.get("workspace")
    if requested:
        match = next((s for s in mine if s.workspace == requested), None)
        if match is None:
            known = any(w.id == requested for w in directory.workspaces)
            if known:
                raise _unavailable(403, "viewer is not authorized for this workspace")
            raise _unavailable(404, "workspace not found")
        scope = match
    else:
        defaults = [s for s in mine if any(w.id == s.workspace and w.default for w in directory.workspaces)]
        if not (defaults or mine):
            raise _unavailable(403, "viewer is not authorized for any workspace")
        scope = (defaults or mine)[0]
    _check_conflicts(query, scope)
    return scope


def redirect_url(scope: Scope, path: str, query: Mapping[str, str]) -> str | None:
    """Where a workspace served by another Portal lives: only a registered https Portal endpoint."""
    if scope.availability != "redirect" or not scope.portal_endpoint.startswith("https://"):
        return None
    params = {k: v for k, v in query.items() if k not in STRIPPED_ON_REDIRECT}
    params["workspace"] = scope.workspace
    return f"{scope.portal_endpoint}{path}?{urlencode(sorted(params.items()))}"
