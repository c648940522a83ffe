"""The workspace directory (managed mode) and the scope a request resolves to.

The directory is a metadata-only JSON file (Helm mounts it at ``/etc/tau-portal/workspaces.json``).  It is
read strictly: unknown fields, wrong types and every rule of reference §4.4 are refused at start-up with the
JSON path of the offending field.  A :class:`Scope` is what one request may see.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs

from tau_core.errors import ConfigError

AVAILABILITY = ("available", "unreachable", "unsupported")
AUTH_MODES = ("workspace-rbac", "cluster-wide")
SOURCES = ("local", "kusto", "auto")
_TOP = {"localCluster", "endpoints", "workspaces"}
_ENDPOINT = {"cluster", "endpoint", "availability"}
_WORKSPACE = {"id", "name", "cluster", "team", "namespace", "localQueue", "resultScope", "source", "experimentsUrl",
              "experimentsBackend", "default", "authorization"}
_BACKEND = {"url", "bearerTokenFile"}
_AUTH = {"mode", "users", "groups"}
_ID = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@attrs.frozen
class Endpoint:
    cluster: str
    endpoint: str
    availability: str


@attrs.frozen
class Workspace:
    id: str
    name: str
    cluster: str
    team: str
    namespace: str
    local_queue: str
    result_scope: str
    source: str
    experiments_url: str
    default: bool
    mode: str
    users: frozenset[str]
    groups: frozenset[str]

    def authorizes(self, user: str, groups: frozenset[str]) -> bool:
        return user in self.users or bool(self.groups & groups)


@attrs.frozen
class Directory:
    local_cluster: str
    endpoints: tuple[Endpoint, ...]
    workspaces: tuple[Workspace, ...]

    def endpoint_for(self, cluster: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.cluster == cluster), None)


@attrs.frozen
class Scope:
    """What one request may see (the ``scope`` object of every scoped response)."""

    workspace: str
    name: str
    cluster: str = ""
    team: str = ""
    namespace: str = ""
    local_queue: str = ""
    result_scope: str = ""
    source: str = "local"
    authorization_mode: str = "cluster-wide"
    experiments_url: str = "/stellar"
    availability: str = "available"
    portal_endpoint: str = ""
    managed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"workspace": self.workspace, "name": self.name, "cluster": self.cluster, "team": self.team,
                "namespace": self.namespace, "localQueue": self.local_queue, "resultScope": self.result_scope,
                "source": self.source, "authorizationMode": self.authorization_mode,
                "experimentsUrl": self.experiments_url, "experimentsNative": False,
                "portalEndpoint": self.portal_endpoint, "availability": self.availability, "managed": self.managed}


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, message: str) -> ConfigError:
        return ConfigError(f"workspace directory {self.path}: {where}: {message}",
                           hint="fix the file (see the Portal guide, 'workspace directory') and restart the Portal")

    def obj(self, value: Any, where: str, allowed: set[str]) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, "must be a JSON object")
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise self.fail(f"{where}.{unknown[0]}", "unknown field")
        return value

    def text(self, data: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
        value = data.get(key, "")
        if not isinstance(value, str):
            raise self.fail(f"{where}.{key}", "must be a string")
        value = value.strip()
        if required and not value:
            raise self.fail(f"{where}.{key}", "is required")
        return value

    def names(self, data: Mapping[str, Any], key: str, where: str) -> frozenset[str]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{where}.{key}", "must be a list of strings")
        return frozenset(v.strip().lower() for v in value if v.strip())


def _https_origin(url: str) -> bool:
    parts = urlsplit(url)
    return (parts.scheme == "https" and bool(parts.hostname) and not parts.username and not parts.password
            and not parts.query and not parts.fragment and parts.path in ("", "/"))


def _endpoint(r: _Reader, raw: Any, where: str, local: str) -> Endpoint:
    data = r.obj(raw, where, _ENDPOINT)
    cluster = r.text(data, "cluster", where, required=True)
    url = r.text(data, "endpoint", where)
    availability = r.text(data, "availability", where) or "available"
    if availability not in AVAILABILITY:
        raise r.fail(f"{where}.availability", f"must be one of {', '.join(AVAILABILITY)}")
    if cluster != local and availability == "available" and not _https_origin(url):
        raise r.fail(f"{where}.endpoint", "a remote available endpoint must be an https:// origin without "
                                          "credentials, path, query or fragment")
    return Endpoint(cluster, url.rstrip("/"), availability)


def _backend(r: _Reader, data: Mapping[str, Any], where: str) -> None:
    """``experimentsBackend``: an https URL, or plain http only to loopback or an in-cluster ``.svc`` name; no
    credentials, query or fragment; the bearer token (if any) comes from an absolute file path."""
    url = r.text(data, "url", where, required=True)
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    internal = host in ("localhost", "127.0.0.1", "::1") or host.endswith((".svc", ".svc.cluster.local"))
    if parts.scheme not in ("https", "http") or not host or (parts.scheme == "http" and not internal) \
            or parts.username or parts.password or parts.query or parts.fragment:
        raise r.fail(f"{where}.url", "must be an https:// URL (plain http only for loopback or a .svc host), "
                                     "without credentials, query or fragment")
    token = r.text(data, "bearerTokenFile", where)
    if token and not token.startswith("/"):
        raise r.fail(f"{where}.bearerTokenFile", "must be an absolute path")


def _workspace(r: _Reader, raw: Any, where: str, local: str) -> Workspace:
    data = r.obj(raw, where, _WORKSPACE)
    ws_id = r.text(data, "id", where, required=True)
    if not _ID.match(ws_id):
        raise r.fail(f"{where}.id", "must be lowercase letters, digits and '-' (a DNS label)")
    cluster = r.text(data, "cluster", where, required=True)
    namespace = r.text(data, "namespace", where, required=True)
    source = r.text(data, "source", where, required=True)
    if source not in SOURCES:
        raise r.fail(f"{where}.source", f"must be one of {', '.join(SOURCES)}")
    exp_url = r.text(data, "experimentsUrl", where)
    if "experimentsBackend" in data:
        backend = r.obj(data["experimentsBackend"], f"{where}.experimentsBackend", _BACKEND)
        if source != "kusto":
            raise r.fail(f"{where}.experimentsBackend", "requires source kusto")
        _backend(r, backend, f"{where}.experimentsBackend")
    if exp_url:
        if source != "kusto":
            raise r.fail(f"{where}.experimentsUrl", "requires source kusto")
        local_path = exp_url.startswith("/") and not exp_url.startswith("//")
        parts = urlsplit(exp_url)
        remote_ok = parts.scheme == "https" and bool(parts.hostname) and not parts.username and not parts.password
        if not (cluster == local if local_path else remote_ok):
            raise r.fail(f"{where}.experimentsUrl", "must be a local absolute path (local cluster only) or https URL")
    auth = r.obj(data.get("authorization", {}), f"{where}.authorization", _AUTH)
    mode = r.text(auth, "mode", f"{where}.authorization") or "workspace-rbac"
    if mode not in AUTH_MODES:
        raise r.fail(f"{where}.authorization.mode", f"must be one of {', '.join(AUTH_MODES)}")
    users = r.names(auth, "users", f"{where}.authorization")
    groups = r.names(auth, "groups", f"{where}.authorization")
    if not users and not groups:
        raise r.fail(f"{where}.authorization", "needs at least one user or group")
    default = data.get("default", False)
    if not isinstance(default, bool):
        raise r.fail(f"{where}.default", "must be true or false")
    team = r.text(data, "team", where).lower().replace("_", "-").replace(" ", "-")
    return Workspace(id=ws_id, name=r.text(data, "name", where) or ws_id, cluster=cluster, team=team,
                     namespace=namespace, local_queue=r.text(data, "localQueue", where),
                     result_scope=r.text(data, "resultScope", where), source=source, experiments_url=exp_url,
                     default=default, mode=mode, users=users, groups=groups)


def load_directory(path: Path, *, require_queue: bool = False) -> Directory:
    """Read and validate the directory at ``path`` (:class:`ConfigError` naming the field on any problem)."""
    r = _Reader(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"workspace directory {path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise r.fail("$", f"not valid JSON ({exc})") from None
    data = r.obj(raw, "$", _TOP)
    local = r.text(data, "localCluster", "$", required=True)
    endpoints_raw = data.get("endpoints", [])
    workspaces_raw = data.get("workspaces", [])
    if not isinstance(endpoints_raw, list) or not isinstance(workspaces_raw, list):
        raise r.fail("$", "endpoints and workspaces must be lists")
    endpoints = [_endpoint(r, e, f"$.endpoints[{i}]", local) for i, e in enumerate(endpoints_raw)]
    if len({e.cluster for e in endpoints}) != len(endpoints):
        raise r.fail("$.endpoints", "a cluster is listed twice")
    workspaces = [_workspace(r, w, f"$.workspaces[{i}]", local) for i, w in enumerate(workspaces_raw)]
    if not workspaces:
        raise r.fail("$.workspaces", "needs at least one workspace")
    if len({w.id for w in workspaces}) != len(workspaces):
        raise r.fail("$.workspaces", "a workspace id is listed twice")
    if sum(w.default for w in workspaces) > 1:
        raise r.fail("$.workspaces", "at most one workspace may be the default")
    if require_queue:
        for i, w in enumerate(workspaces):
            if not (w.team and w.local_queue):
                raise r.fail(f"$.workspaces[{i}]", "workspace Jobs scope needs team and localQueue")
    return Directory(local, tuple(endpoints), tuple(workspaces))


def scope_of(ws: Workspace, directory: Directory) -> Scope:
    availability, portal = "available", ""
    if ws.cluster != directory.local_cluster:
        endpoint = directory.endpoint_for(ws.cluster)
        if endpoint is None:
            availability = "unreachable"
        elif endpoint.availability == "available":
            availability, portal = "redirect", endpoint.endpoint
        else:
            availability = endpoint.availability
    return Scope(workspace=ws.id, name=ws.name, cluster=ws.cluster, team=ws.team, namespace=ws.namespace,
                 local_queue=ws.local_queue, result_scope=ws.result_scope, source=ws.source,
                 authorization_mode=ws.mode, experiments_url=ws.experiments_url or "/stellar",
                 availability=availability, portal_endpoint=portal, managed=True)
