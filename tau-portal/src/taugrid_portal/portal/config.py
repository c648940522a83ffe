"""The Portal's configuration: what ``portal serve`` was told, validated once at start-up.

Every refusal is a :class:`~tau_core.errors.UsageError` naming the flag, so the command line prints one
line and exits 2.  Nothing here imports starlette or the Kubernetes client.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import attrs

from tau_core.errors import UsageError
from taugrid_portal.portal.kusto_flags import KustoConfig, RunHistoryConfig

DEFAULT_ADDR = "127.0.0.1:8080"
SCOPE_MODES = ("disabled", "workspace", "operator")
SOURCES = ("local", "kusto", "auto")
_SCOPE_RE = re.compile(r"^([^=\s]+)=([a-z0-9]([-a-z0-9]*[a-z0-9])?)/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$")


@attrs.frozen
class OperatorScope:
    """``team=namespace/localQueue``: one queue the operator-mode Jobs board shows."""

    team: str
    namespace: str
    local_queue: str


@attrs.frozen
class KueueVizConfig:
    namespace: str = "kueue-system"
    backend_service: str = "kueue-kueueviz-backend"
    frontend_service: str = "kueue-kueueviz-frontend"


@attrs.frozen
class PolicyFile:
    """``--policy FILE`` (the chart's ``portal.jobs.policyPath``): a YAML/JSON mapping, read once at start-up.

    The reference's flag code does not show how the Jobs board uses it; this build checks that it is a
    readable mapping and keeps its path and digest, which the Jobs board reports."""

    path: Path
    sha256: str


def load_policy(path: Path) -> PolicyFile:
    import hashlib

    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    if not path.is_file():
        raise UsageError(f"--policy {path}: no such file")
    data = path.read_bytes()
    try:
        doc = YAML(typ="safe", pure=True).load(data)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"--policy {path}:{where} is not valid YAML or JSON",
                         hint="the queue policy file is a YAML or JSON mapping") from None
    if not isinstance(doc, dict):
        raise UsageError(f"--policy {path}: expected a mapping at the top level",
                         hint="the queue policy file is a YAML or JSON mapping")
    return PolicyFile(path=path, sha256=hashlib.sha256(data).hexdigest())


@attrs.frozen
class PortalConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    use_kubernetes: bool = True
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    namespace: str | None = None
    workspace: str = "default"
    cluster: str = ""
    jobs_scope_mode: str = "disabled"
    operator_scopes: tuple[OperatorScope, ...] = ()
    workspace_directory: Path | None = None
    user_header: str = "X-MS-CLIENT-PRINCIPAL-NAME"
    groups_header: str = "X-MS-CLIENT-PRINCIPAL-GROUPS"
    store: Path | None = None
    source: str = "local"
    kusto_query_command: str | None = None
    kueueviz: KueueVizConfig | None = None
    refresh_seconds: float = 5.0
    kusto: KustoConfig = attrs.field(factory=KustoConfig)
    run_history: RunHistoryConfig = attrs.field(factory=RunHistoryConfig)
    policy: PolicyFile | None = None
    default_target: str | None = None
    metric: str | None = None

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_addr(addr: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 as ``[::1]:8080``); an empty host means every interface."""
    host, sep, port_text = addr.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise UsageError(f"--addr {addr!r} must be HOST:PORT", hint="for example --addr 127.0.0.1:8080")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port_text)


def parse_operator_scope(text: str, index: int) -> OperatorScope:
    match = _SCOPE_RE.match(text.strip())
    if match is None:
        raise UsageError(f"--jobs-operator-scope {index} ({text!r}) must look like team=namespace/localQueue",
                         hint="for example --jobs-operator-scope vision=aurora/jobqueue")
    team = match.group(1).lower().replace("_", "-")
    return OperatorScope(team=team, namespace=match.group(2), local_queue=match.group(4))


def check_scope_mode(mode: str, scopes: tuple[OperatorScope, ...], directory: Path | None) -> None:
    """The Jobs scope combinations the Portal accepts (reference §4.4), in our own words."""
    if mode not in SCOPE_MODES:
        raise UsageError(f"--jobs-scope-mode {mode!r} is not one of {', '.join(SCOPE_MODES)}")
    if scopes and mode != "operator":
        raise UsageError("--jobs-operator-scope is only accepted with --jobs-scope-mode operator",
                         hint=f"the mode is {mode!r}; drop the scopes or pass --jobs-scope-mode operator")
    if mode == "operator" and not scopes:
        raise UsageError("--jobs-scope-mode operator needs at least one --jobs-operator-scope team=namespace/queue")
    if mode == "workspace" and directory is None:
        raise UsageError("--jobs-scope-mode workspace needs --workspace-directory",
                         hint="the directory says which namespace and LocalQueue belong to each workspace")
    seen: set[tuple[str, str]] = set()
    for scope in scopes:
        pair = (scope.namespace, scope.local_queue)
        if pair in seen:
            raise UsageError(f"--jobs-operator-scope lists {scope.namespace}/{scope.local_queue} twice")
        seen.add(pair)


def check_sources(source: str, store: Path | None, kusto_query_command: str | None,
                  kusto_endpoint: str | None) -> None:
    if source not in SOURCES:
        raise UsageError(f"--source {source!r} is not one of {', '.join(SOURCES)}")
    if source == "kusto" and not (kusto_query_command or kusto_endpoint):
        raise UsageError("--source kusto needs --kusto-query-command or --kusto-endpoint")
    if store is not None and not store.is_dir():
        raise UsageError(f"--store {store}: no such directory",
                         hint="create it with `taugrid-portal experiment init NAME --store DIR`")


def check_kube(kubeconfig: str | None, context: str | None, in_cluster: bool) -> None:
    if in_cluster and (kubeconfig or context):
        raise UsageError("--in-cluster cannot be combined with --kubeconfig or --context")
    if kubeconfig and not Path(kubeconfig).expanduser().is_file():
        raise UsageError(f"--kubeconfig {kubeconfig}: no such file")
