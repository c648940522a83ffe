"""The Kusto, run-history and Stellar-tuning flags of ``portal serve`` (reference §1.3.2 and §1.4).

The boards that read Kusto (Cluster Health, Node utilisation, Cost: :mod:`.kusto_api`; durable run history:
:mod:`.history`) take their endpoint and databases from here.  The flags are the charts' contract, so they
parse, are validated here once, and travel in a typed :class:`KustoConfig` / :class:`RunHistoryConfig`.
Import-light: click and attrs only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import click

from tau_core.errors import UsageError

KUSTO_INGESTIONS = ("projection", "remote-write")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_DAYS = re.compile(r"^(\d+(?:\.\d+)?)d$")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_KUSTO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,1023}$")
_TEMPLATE_FIELD = re.compile(r"\{([^{}]*)\}")
TEMPLATE_FIELDS = ("endpoint", "database", "query")


def parse_duration(flag: str, text: str) -> float:
    """Seconds in ``text``: a Go duration (``90m``, ``1h30m``, ``30s``) or ``Nd`` days (``90d``, ``1.5d``)."""
    value = text.strip()
    days = _DAYS.match(value)
    if days:
        seconds = float(days.group(1)) * 86400
    else:
        parts = _DURATION_PART.findall(value)
        if not parts or "".join(n + u for n, u in parts) != value:
            raise UsageError(f"{flag} {text!r} is not a duration",
                             hint="use a Go duration such as 30s, 90m or 1h30m, or days such as 90d")
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if seconds <= 0:
        raise UsageError(f"{flag} {text!r} must be longer than zero")
    return seconds


@attrs.frozen
class KustoConfig:
    """Where the Kusto-backed boards and the Kusto Stellar source read (typed)."""

    endpoint: str | None = None
    database: str = "Metrics"
    cost_database: str = "CostTracking"
    ingestion: str = "projection"
    query_command: str | None = None
    query_args: tuple[str, ...] = ()
    metrics_file: Path | None = None
    allowed_projects: tuple[str, ...] = ()
    featured_projects: tuple[str, ...] = ()
    discovery_since_seconds: float = 90 * 86400.0
    max_discovery_since_seconds: float = 365 * 86400.0
    target_since_seconds: float = 365 * 86400.0
    target_points: int = 12000
    max_runs: int = 200
    max_metric_rows: int = 1_000_000
    request_timeout_seconds: float = 30.0

    @property
    def configured(self) -> bool:
        """A live Kusto transport is configured (a query command, or an endpoint for the native client)."""
        return bool(self.query_command or self.endpoint)


@attrs.frozen
class RunHistoryConfig:
    enabled: bool = False
    table: str = "TauExpRunLifecycle"
    limit: int = 200


def _check_endpoint(endpoint: str) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    loopback = parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")
    if (parts.scheme != "https" and not loopback) or not parts.hostname or parts.username or parts.password \
            or parts.query or parts.fragment:
        raise UsageError(f"--kusto-endpoint {endpoint!r} must be an https:// cluster URL",
                         hint="for example --kusto-endpoint https://mycluster.westeurope.kusto.windows.net "
                              "(no credentials, query or fragment)")


def _check_name(flag: str, value: str) -> None:
    if not _KUSTO_NAME.match(value):
        raise UsageError(f"{flag} {value!r} is not a Kusto database or table name",
                         hint="letters, digits, '_', '-' and '.', starting with a letter or '_'")


def _check_args(args: tuple[str, ...]) -> None:
    for arg in args:
        for field in _TEMPLATE_FIELD.findall(arg):
            if field not in TEMPLATE_FIELDS:
                raise UsageError(f"--kusto-query-arg {arg!r} uses the unknown placeholder {{{field}}}",
                                 hint="the placeholders are {endpoint}, {database} and {query}")


def _positive(flag: str, value: int, maximum: int | None = None) -> int:
    if value < 1 or (maximum is not None and value > maximum):
        bound = f" and at most {maximum}" if maximum is not None else ""
        raise UsageError(f"{flag} {value} must be at least 1{bound}")
    return value


def kusto_config(p: dict[str, Any]) -> KustoConfig:
    """Validate the Kusto flags of one command line (``p``: click's parameters) into a :class:`KustoConfig`."""
    if p["kusto_endpoint"]:
        _check_endpoint(p["kusto_endpoint"])
    cost_database = p.get("kusto_cost_database", "CostTracking")  # a Portal flag; Stellar has no Cost board
    _check_name("--kusto-database", p["kusto_database"])
    _check_name("--kusto-cost-database", cost_database)
    if p["kusto_query_args"] and not p["kusto_query_command"]:
        raise UsageError("--kusto-query-arg needs --kusto-query-command")
    _check_args(p["kusto_query_args"])
    metrics_file = Path(p["kusto_metrics_file"]).expanduser() if p["kusto_metrics_file"] else None
    if metrics_file is not None and not metrics_file.is_file():
        raise UsageError(f"--kusto-metrics-file {metrics_file}: no such file")
    discovery = parse_duration("--discovery-since", p["discovery_since"])
    max_discovery = parse_duration("--max-discovery-since", p["max_discovery_since"])
    if discovery > max_discovery:
        raise UsageError(f"--discovery-since {p['discovery_since']} is longer than --max-discovery-since "
                         f"{p['max_discovery_since']}")
    return KustoConfig(
        endpoint=p["kusto_endpoint"] or None, database=p["kusto_database"], cost_database=cost_database,
        ingestion=p["kusto_ingestion"], query_command=p["kusto_query_command"] or None,
        query_args=tuple(p["kusto_query_args"]), metrics_file=metrics_file,
        allowed_projects=tuple(p["allowed_projects"]), featured_projects=tuple(p["featured_projects"]),
        discovery_since_seconds=discovery, max_discovery_since_seconds=max_discovery,
        target_since_seconds=parse_duration("--target-since", p["target_since"]),
        target_points=_positive("--kusto-target-points", p["kusto_target_points"], 12000),
        max_runs=_positive("--max-runs", p["max_runs"], 1000),
        max_metric_rows=_positive("--max-metric-rows", p["max_metric_rows"]),
        request_timeout_seconds=parse_duration("--request-timeout", p["request_timeout"]))


def run_history_config(p: dict[str, Any], kusto: KustoConfig, *, managed: bool, cluster: str) -> RunHistoryConfig:
    _check_name("--run-history-table", p["run_history_table"])
    limit = _positive("--run-history-limit", p["run_history_limit"], 1000)
    if p["run_history_enabled"]:
        if not kusto.configured:
            raise UsageError("--run-history-enabled needs --kusto-endpoint or --kusto-query-command",
                             hint="durable run history is read from Kusto")
        if not managed and not cluster:
            raise UsageError("--run-history-enabled without --workspace-directory needs --cluster",
                             hint="legacy durable history is read for one explicit cluster")
    return RunHistoryConfig(enabled=p["run_history_enabled"], table=p["run_history_table"], limit=limit)


def deprecated_aliases(p: dict[str, Any], warn: Callable[[str], None]) -> None:
    """``--kusto-workspace`` (alias of ``--workspace``), ``--kusto-project`` and ``--kusto-since``: accepted, warned."""
    alias = p.pop("kusto_workspace")
    if alias:
        if p.get("workspace") not in (None, "default", alias):
            raise UsageError(f"--kusto-workspace {alias!r} conflicts with --workspace {p['workspace']!r}",
                             hint="--kusto-workspace is the deprecated spelling of --workspace; pass one")
        p["workspace"] = alias
        warn("warning: --kusto-workspace is deprecated; use --workspace")
    if p.pop("kusto_project"):
        warn("warning: --kusto-project is deprecated and ignored; use --allowed-project")
    since = p.pop("kusto_since")
    if since:
        parse_duration("--kusto-since", since)
        warn("warning: --kusto-since is deprecated; use --discovery-since")


def _opt(*decls: str, **kw: Any) -> Callable[[Any], Any]:
    return click.option(*decls, **kw)


#: the Kusto and discovery flags ``experiment serve|open`` and ``portal serve`` share (reference §1.3.2)
STELLAR_OPTIONS = [
    _opt("--kusto-endpoint", metavar="URL", help="Kusto cluster URL (https)."),
    _opt("--kusto-database", default="Metrics", show_default=True),
    _opt("--kusto-ingestion", type=click.Choice(KUSTO_INGESTIONS), default="projection", show_default=True),
    _opt("--kusto-query-command", metavar="CMD", help="Command that answers Kusto queries (KQL on stdin "
         "unless an argument holds {query})."),
    _opt("--kusto-query-arg", "kusto_query_args", multiple=True, metavar="ARG",
         help="An argument of the query command; {endpoint}, {database} and {query} are filled in. Repeatable."),
    _opt("--kusto-metrics-file", metavar="FILE", help="Offline Kusto/Stellar rows (JSONL or JSON export)."),
    _opt("--kusto-workspace", hidden=True), _opt("--kusto-project", hidden=True), _opt("--kusto-since", hidden=True),
    _opt("--allowed-project", "allowed_projects", multiple=True, metavar="NAME", help="Repeatable."),
    _opt("--featured-project", "featured_projects", multiple=True, metavar="NAME", help="Repeatable."),
    _opt("--discovery-since", default="90d", show_default=True, metavar="DURATION"),
    _opt("--max-discovery-since", default="365d", show_default=True, metavar="DURATION"),
    _opt("--target-since", default="365d", show_default=True, metavar="DURATION"),
    _opt("--kusto-target-points", type=int, default=12000, show_default=True),
    _opt("--max-runs", type=int, default=200, show_default=True),
    _opt("--max-metric-rows", type=int, default=1_000_000, show_default=True),
    _opt("--request-timeout", default="30s", show_default=True, metavar="DURATION"),
]
#: ``portal serve`` only (reference §1.4)
PORTAL_OPTIONS = [
    _opt("--kusto-cost-database", default="CostTracking", show_default=True, help="Database of the Cost board."),
    _opt("--run-history-enabled", is_flag=True, help="Merge durable run history from Kusto (needs Kusto)."),
    _opt("--run-history-table", default="TauExpRunLifecycle", show_default=True),
    _opt("--run-history-limit", type=int, default=200, show_default=True),
]


def kusto_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(STELLAR_OPTIONS + PORTAL_OPTIONS):
        command = option(command)
    return command


def stellar_params() -> list[click.Parameter]:
    """The shared Kusto flags as click parameters, for commands built elsewhere (``experiment serve|open``)."""

    def holder() -> None:
        pass

    for option in reversed(STELLAR_OPTIONS):
        option(holder)
    return list(getattr(holder, "__click_params__", []))[::-1]
