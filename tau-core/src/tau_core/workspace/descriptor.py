"""The repository's workspace connection descriptor, ``tau/workspace.connection.yaml``.

A non-secret, checked-in file (schema ``tau.workspace.connection.v1``) that says which
TauWorkspace a repository uses, through which Kubernetes context, and how access and
authorization work. Parsing is strict: unknown keys, wrong types and every documented
cross-field rule are reported together, each with file, line, column and field path.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tau_core import __version__, keys
from tau_core.config.issues import ConfigIssue, ConfigValidationError, dotted
from tau_core.config.loader import Document, load_yaml_file, require_mapping
from tau_core.errors import ConfigError, NotFoundError
from tau_core.gitrepo import git_root
from tau_core.hashing import prefixed_digest

SCHEMA = "tau.workspace.connection.v1"
RELATIVE_PATH = Path("tau") / "workspace.connection.yaml"
DEFAULT_SYSTEM_NAMESPACE = keys.SYSTEM_NAMESPACE_DEFAULT
ACCESS_METHODS = ("kubeconfig", "aks", "local")
AUTHORIZATION_MODES = ("workspace-rbac", "cluster-wide")

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_AKS_ID = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/[^/]+/providers/Microsoft\.ContainerService/"
    r"managedClusters/[^/]+$",
    re.IGNORECASE,
)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$")
_SECRET_LIKE = re.compile(
    r"(-----BEGIN [A-Z ]*(PRIVATE KEY|CERTIFICATE)-----|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|\b(password|passwd|secret|token|client[-_]?secret|api[-_]?key)\s*[:=]\s*\S+"
    r"|\bclient-certificate-data\b|\bclient-key-data\b)",
    re.IGNORECASE,
)

#: The accepted shape: a key maps to a type name or to a nested shape.
SHAPE: dict[str, Any] = {
    "schema": "str",
    "workspace": "str",
    "cluster": {"contextName": "str", "systemNamespace": "str"},
    "access": {"method": "str", "aks": {"resourceID": "str", "tenantID": "str"}},
    "authorization": {"mode": "str", "requiredRole": "str"},
    "requirements": {"minTauVersion": "str"},
    "network": {"privateCluster": "bool", "instructions": "str"},
}


@dataclass(frozen=True)
class ConnectionDescriptor:
    """A validated descriptor."""

    path: Path
    repository_root: Path
    workspace: str
    context_name: str | None
    system_namespace: str
    access_method: str
    aks_resource_id: str | None
    aks_tenant_id: str | None
    authorization_mode: str | None
    required_role: str | None
    min_tau_version: str
    private_cluster: bool
    network_instructions: str | None
    data: Mapping[str, Any]

    @property
    def digest(self) -> str:
        """``sha256:`` over the descriptor's canonical JSON encoding."""
        return prefixed_digest(self.data, ascii_only=True)

    @property
    def is_local(self) -> bool:
        return self.access_method == "local"

    def summary(self) -> dict[str, Any]:
        return {
            "descriptor": str(self.path),
            "workspace": self.workspace,
            "context": self.context_name,
            "systemNamespace": self.system_namespace,
            "access": self.access_method,
            "authorization": self.authorization_mode,
            "requiredRole": self.required_role,
            "minTauVersion": self.min_tau_version,
            "privateCluster": self.private_cluster,
            "digest": self.digest,
        }


def parse_version(text: str) -> tuple[int, int, int] | None:
    match = _VERSION.match(text.strip())
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def check_min_version(required: str, installed: str = __version__) -> None:
    """Refuse a CLI older than the repository requires (a ``dev`` build always passes)."""
    if installed == "dev":
        return
    need, have = parse_version(required), parse_version(installed)
    if need is None or have is None or have >= need:
        return
    raise ConfigError(
        f"Tau {installed} is too old for this repository (tau/workspace.connection.yaml requires {required})",
        hint=f"install Tau {required} or newer: pip install --upgrade 'tau>={required.lstrip('v')}'",
    )


def repository_root(start: Path) -> Path:
    """The Git repository containing ``start`` (the directory holding ``.git``), else ``start``'s anchor."""
    start = start.resolve()
    return git_root(start) or Path(start.anchor)


def find_descriptor(start: Path | None = None) -> Path | None:
    """Walk up from ``start`` to the Git boundary looking for ``tau/workspace.connection.yaml``."""
    start = (start or Path.cwd()).resolve()
    if start.is_file():
        start = start.parent
    root = repository_root(start)
    for directory in (start, *start.parents):
        candidate = directory / RELATIVE_PATH
        if candidate.is_file():
            real = candidate.resolve()
            if not real.is_relative_to(root):
                raise ConfigError(
                    f"{candidate} resolves to {real}, outside the repository {root}",
                    hint="a workspace connection descriptor must be a regular file inside the repository",
                )
            return candidate
        if directory == root:
            break
    return None


def require_descriptor(start: Path | None = None) -> Path:
    start = (start or Path.cwd()).resolve()
    found = find_descriptor(start)
    if found is None:
        raise NotFoundError(
            f"Tau workspace connection descriptor not found: expected {RELATIVE_PATH} between {start} "
            f"and repository boundary {repository_root(start)}",
            hint="ask your platform team for the repository's descriptor, or scaffold one with "
            "`tau workspace init-repo NAME`",
        )
    return found


class _Checker:
    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.issues: list[ConfigIssue] = []

    def add(self, path: tuple[str, ...], message: str, hint: str | None = None) -> None:
        self.issues.append(self.doc.issue(path, dotted(path), message, hint))

    def shape(self, data: Mapping[str, Any], shape: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> None:
        for key, value in data.items():
            path = (*prefix, str(key))
            if key not in shape:
                close = difflib.get_close_matches(str(key), list(shape), n=1)
                hint = f"did you mean '{dotted((*prefix, close[0]))}'?" if close else (
                    "allowed keys here: " + ", ".join(shape))
                self.add(path, "unknown field", hint)
                continue
            expected = shape[key]
            if isinstance(expected, dict):
                if not isinstance(value, dict):
                    self.add(path, f"must be a mapping, not {_kind(value)}")
                else:
                    self.shape(value, expected, path)
            elif expected == "str" and not isinstance(value, str):
                self.add(path, f"must be a string, not {_kind(value)}", "quote the value")
            elif expected == "bool" and not isinstance(value, bool):
                self.add(path, f"must be true or false, not {_kind(value)}")


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "empty"}.get(type(value), type(value).__name__)


def _get(data: Mapping[str, Any], *path: str) -> Any:
    node: Any = data
    for part in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def load_descriptor(path: Path, *, check_version: bool = True) -> ConnectionDescriptor:
    """Parse and validate a descriptor; every problem is reported in one error."""
    doc = load_yaml_file(path)
    data = require_mapping(doc, "workspace connection descriptor")
    check = _Checker(doc)
    check.shape(data, SHAPE)
    read = _Reader(data, check)
    read.schema()
    workspace = read.workspace()
    method = read.access_method()
    local = method == "local"
    context, system_ns = read.cluster(local)
    resource_id, tenant_id = read.aks(method)
    mode, role = read.authorization(local)
    min_version = read.requirements()
    private, instructions = read.network()
    if check.issues:
        raise ConfigValidationError(check.issues)
    if check_version and min_version:
        check_min_version(min_version)
    return ConnectionDescriptor(
        path=path,
        repository_root=repository_root(path.parent),
        workspace=str(workspace),
        context_name=context,
        system_namespace=system_ns,
        access_method=str(method),
        aks_resource_id=resource_id if method == "aks" else None,
        aks_tenant_id=tenant_id if method == "aks" else None,
        authorization_mode=mode,
        required_role=role,
        min_tau_version=str(min_version),
        private_cluster=private,
        network_instructions=instructions,
        data=data,
    )


class _Reader:
    """One descriptor section at a time: read its values and report what is wrong with them."""

    def __init__(self, data: Mapping[str, Any], check: _Checker) -> None:
        self.data = data
        self.check = check

    def raw(self, *keys: str) -> Any:
        return _get(self.data, *keys)

    def text(self, *keys: str) -> str | None:
        value = _get(self.data, *keys)
        return value if isinstance(value, str) and value.strip() else None

    def schema(self) -> None:
        schema = self.raw("schema")
        if schema is None:
            self.check.add(("schema",), "is required", f"add 'schema: {SCHEMA}'")
        elif isinstance(schema, str) and schema != SCHEMA:
            self.check.add(("schema",), f"workspace connection schema '{schema}' is unsupported; expected "
                           f"'{SCHEMA}'", "this descriptor was written for another Tau release")

    def workspace(self) -> str | None:
        workspace = self.text("workspace")
        if self.raw("workspace") is None:
            self.check.add(("workspace",), "is required", "name the TauWorkspace, e.g. 'workspace: research'")
        elif workspace is not None and not _DNS1123_SUBDOMAIN.match(workspace):
            self.check.add(("workspace",), f"'{workspace}' is not a valid DNS-1123 subdomain",
                           "use lower-case letters, digits, '-' and '.'")
        return workspace

    def access_method(self) -> str | None:
        method = self.text("access", "method")
        if method is None:
            if self.raw("access", "method") is None:
                self.check.add(("access", "method"), "is required", "use 'kubeconfig', 'aks' or 'local'")
        elif method not in ACCESS_METHODS:
            self.check.add(("access", "method"), f"'{method}' is not one of {', '.join(ACCESS_METHODS)}")
        return method

    def cluster(self, local: bool) -> tuple[str | None, str]:
        context = self.text("cluster", "contextName")
        if context is None and not local and isinstance(self.raw("cluster", "contextName"), str | None):
            self.check.add(("cluster", "contextName"), "is required", "name the kubectl context Tau should use")
        system_ns = self.text("cluster", "systemNamespace") or DEFAULT_SYSTEM_NAMESPACE
        if self.text("cluster", "systemNamespace") is not None and not _DNS1123_LABEL.match(system_ns):
            self.check.add(("cluster", "systemNamespace"), f"'{system_ns}' is not a valid DNS-1123 label")
        return context, system_ns

    def aks(self, method: str | None) -> tuple[str | None, str | None]:
        resource_id = self.text("access", "aks", "resourceID")
        tenant_id = self.text("access", "aks", "tenantID")
        if method == "aks":
            if resource_id is None:
                self.check.add(("access", "aks", "resourceID"), "is required for access.method aks")
            else:
                match = _AKS_ID.match(resource_id)
                if not match or not _UUID.match(match["sub"]):
                    self.check.add(("access", "aks", "resourceID"),
                                   "must be the ARM ID of a Microsoft.ContainerService/managedClusters resource "
                                   "with a UUID subscription",
                                   "/subscriptions/<uuid>/resourceGroups/<group>/providers/"
                                   "Microsoft.ContainerService/managedClusters/<cluster>")
            if tenant_id is None:
                self.check.add(("access", "aks", "tenantID"), "is required for access.method aks")
            elif not _UUID.match(tenant_id):
                self.check.add(("access", "aks", "tenantID"), f"'{tenant_id}' is not a UUID")
        elif self.raw("access", "aks") is not None and method is not None:
            self.check.add(("access", "aks"), f"must be omitted for access.method {method}")
        return resource_id, tenant_id

    def authorization(self, local: bool) -> tuple[str | None, str | None]:
        mode = self.text("authorization", "mode")
        role = self.text("authorization", "requiredRole")
        if mode is None:
            if not local and self.raw("authorization", "mode") is None:
                self.check.add(("authorization", "mode"), "is required", "use 'workspace-rbac' or 'cluster-wide'")
        elif mode not in AUTHORIZATION_MODES:
            self.check.add(("authorization", "mode"), f"'{mode}' is not one of {', '.join(AUTHORIZATION_MODES)}")
        elif mode == "workspace-rbac" and role is None:
            self.check.add(("authorization", "requiredRole"), "is required when authorization.mode is "
                           "workspace-rbac", "the default researcher role is tau-researcher-v1")
        elif mode == "cluster-wide" and self.raw("authorization", "requiredRole") is not None:
            self.check.add(("authorization", "requiredRole"),
                           "must be omitted when authorization.mode is cluster-wide")
        return mode, role

    def requirements(self) -> str | None:
        min_version = self.text("requirements", "minTauVersion")
        if min_version is None:
            if self.raw("requirements", "minTauVersion") is None:
                self.check.add(("requirements", "minTauVersion"), "is required",
                               f"e.g. 'minTauVersion: {__version__}'")
        elif parse_version(min_version) is None:
            self.check.add(("requirements", "minTauVersion"), f"'{min_version}' is not a version like 1.2.3")
        return min_version

    def network(self) -> tuple[bool, str | None]:
        private = self.raw("network", "privateCluster") is True
        instructions = self.text("network", "instructions")
        if private and instructions is None:
            self.check.add(("network", "instructions"), "is required when network.privateCluster is true",
                           "tell researchers how to reach the private API server (for example VPN steps)")
        if instructions is not None and _SECRET_LIKE.search(instructions):
            self.check.add(("network", "instructions"), "looks like it contains a credential",
                           "descriptors are checked in: never put tokens, keys or kubeconfigs in them")
        return private, instructions
