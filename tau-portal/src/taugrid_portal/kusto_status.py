"""``experiment status|search --source local|kusto|auto``: a target's status, or a run search, from the local
store or from the durable history in Kusto (the recorded lifecycle and the typed metric events), read through
the ``kusto`` history source (``tau_register_history_sources``).  ``auto`` is the local store when it answers,
else Kusto when an endpoint is given.

Kusto search filters what the lifecycle rows carry (``-q`` on run ids, ``--target``, ``--project``,
``--group``, ``--state``, ``--lifecycle``, ``--tag``); the metric filters and ``--since``/``--min-step`` need
the local store and are refused with ``--source kusto``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import click

from tau_core.errors import NotFoundError, TauError, UsageError
from tau_core.history import LifecycleRow, MetricPoint, RunQuery, history_source, transitions
from tau_core.kql import MetricsFilter

F = TypeVar("F", bound=Callable[..., Any])
SOURCES = ("local", "kusto", "auto")


def source_options(func: F) -> F:
    """``--source``, ``--kusto-endpoint`` and ``--kusto-database``."""
    for option in reversed([
        click.option("--source", type=click.Choice(SOURCES), default="local", show_default=True,
                     help="Where to read: the local store, the durable history in Kusto, or auto."),
        click.option("--kusto-endpoint", default=None, help="ADX endpoint of the durable history (--source kusto)."),
        click.option("--kusto-database", default="Metrics", show_default=True, help="ADX database."),
    ]):
        func = option(func)
    return func


def _local(name: str, store: str | None) -> dict[str, Any]:
    from taugrid_portal.analysis import status
    from taugrid_portal.cliutil import open_store

    s = open_store(store)
    with s:
        return {**status(s, name), "source": "local"}


def status_from(name: str, store: str | None, source: str, endpoint: str | None, database: str) -> dict[str, Any]:
    """The status document of ``name`` from ``source``."""
    if source == "local":
        return _local(name, store)
    if source == "kusto" and not endpoint:
        raise UsageError("--source kusto needs --kusto-endpoint")
    if source == "auto":
        try:
            doc = _local(name, store)
            if doc["runs"] or not endpoint:
                return doc
        except TauError:
            if not endpoint:
                raise
    assert endpoint is not None
    return kusto_status(name, endpoint, database)


def _latest(rows: list[LifecycleRow], points: list[MetricPoint]) -> str | None:
    times = [r.observed_at for r in rows if r.observed_at] + [p.wall_time for p in points if p.wall_time]
    return max(times).isoformat().replace("+00:00", "Z") if times else None


def kusto_status(name: str, endpoint: str, database: str) -> dict[str, Any]:
    """Runs of ``name`` (a run, run group or project) as Kusto recorded them."""
    source = history_source("kusto", endpoint=endpoint, database=database)
    try:
        rows = source.run_history(RunQuery(name))
        points: list[MetricPoint] = []
        target_type = "run"
        for kind, flt in (("run", MetricsFilter(runs=(name,), since="3650d")),
                          ("run_group", MetricsFilter(group=name, since="3650d")),
                          ("experiment", MetricsFilter(project=name, since="3650d"))):
            points = source.metric_points(flt)
            if points or rows:
                target_type = "run" if rows else kind
                break
    finally:
        source.close()
    if not rows and not points:
        raise NotFoundError(f"no recorded lifecycle or metrics for {name!r} in Kusto {database} at {endpoint}",
                            hint="check the name, or read the local store with --source local")
    final: dict[str, LifecycleRow] = {}
    by: dict[str, list[LifecycleRow]] = {}
    for row in rows:
        by.setdefault(row.durable_id, []).append(row)
    for durable, group in by.items():
        final[durable] = transitions(group)[-1]
    run_ids = sorted({r.run_id for r in rows} | {p.run_id for p in points})
    metrics: dict[str, set[str]] = {}
    for p in points:
        metrics.setdefault(p.run_id, set()).add(p.metric_name)
    return {
        "schema_version": "tau.exp.status.v0", "source": "kusto", "where": f"Kusto {database} at {endpoint}",
        "target": name, "target_type": target_type, "runs": len(run_ids),
        "groups": len({p.run_group_id for p in points if p.run_group_id}), "attempts": len(final),
        "metric_series": sum(len(v) for v in metrics.values()), "metric_points": len(points),
        "latest_event": _latest(rows, points),
        "states": dict(sorted(Counter(r.state for r in final.values()).items())),
        "runs_detail": [{"run_id": run, "attempts": [
            {"durable_id": d, "state": r.state, "reason": r.reason} for d, r in final.items() if r.run_id == run],
            "metric_names": sorted(metrics.get(run, ()))} for run in run_ids],
    }


def kusto_table(doc: dict[str, Any]) -> str:
    """The table form of :func:`kusto_status`."""
    from tau_core.output import render_table

    head = render_table([[doc["target"], doc["target_type"], doc["runs"], doc["attempts"], doc["metric_series"],
                          doc["metric_points"], doc["latest_event"] or ""]],
                        ["TARGET", "TYPE", "RUNS", "ATTEMPTS", "SERIES", "POINTS", "LATEST_EVENT"])
    states = ", ".join(f"{k}={v}" for k, v in doc["states"].items()) or "(none recorded)"
    return f"{head}\nstates:  {states}\nsource:  {doc['where']}"


#: recorded state -> the store's lifecycle words
LIFECYCLE = {"submitted": "pending", "queued": "pending", "admitted": "pending", "running": "running",
             "succeeded": "succeeded", "failed": "failed", "cancelled": "failed"}


def _local_search(store: str | None, filters: dict[str, Any]) -> dict[str, Any]:
    from taugrid_portal.cliutil import open_store
    from taugrid_portal.store.search import parse_tags, search_runs

    min_step = filters.pop("min_step")
    if min_step is not None:
        try:
            min_step = int(min_step)
        except ValueError:
            raise UsageError("--min-step must be an integer") from None
    s = open_store(store)
    with s:
        return {**search_runs(s, **{**filters, "tags": parse_tags(filters["tags"])}, min_step=min_step),
                "source": "local"}


def search_from(source: str, store: str | None, endpoint: str | None, database: str,
                **filters: Any) -> dict[str, Any]:
    """``experiment search`` from ``source`` (``filters`` are the command's)."""
    if source == "kusto" and not endpoint:
        raise UsageError("--source kusto needs --kusto-endpoint")
    if source != "kusto":
        try:
            doc = _local_search(store, dict(filters))
            if source == "local" or doc["runs"] or not endpoint:
                return doc
        except TauError:
            if source == "local" or not endpoint:
                raise
    assert endpoint is not None
    return kusto_search(endpoint, database, **filters)


def kusto_search(endpoint: str, database: str, **f: Any) -> dict[str, Any]:
    """Runs by their latest recorded lifecycle row (terminal rows win)."""
    from taugrid_portal.store.search import parse_tags

    unsupported = [flag for flag, key in (("--metric-name", "metric_names"), ("--metric-filter", "metric_filters"),
                                          ("--since", "since"), ("--min-step", "min_step")) if f.get(key)]
    if unsupported:
        raise UsageError(f"{', '.join(unsupported)} need the local store; not supported with --source kusto")
    source = history_source("kusto", endpoint=endpoint, database=database)
    try:
        rows = source.run_history(RunQuery("", limit=1000))
    finally:
        source.close()
    by: dict[str, list[LifecycleRow]] = {}
    for row in rows:
        by.setdefault(row.durable_id, []).append(row)
    tags, q = parse_tags(f.get("tags") or ()), (f.get("q") or "").lower()
    out = []
    for latest in (transitions(v)[-1] for v in by.values()):
        life = LIFECYCLE.get(latest.state, "incomplete")
        if (q and q not in latest.run_id.lower()) or \
                (f.get("target") and f["target"] not in (latest.run_id, latest.run_group_id, latest.project)) or \
                (f.get("project") and latest.project != f["project"]) or \
                (f.get("group") and latest.run_group_id != f["group"]) or \
                (f.get("state") and latest.state != f["state"]) or \
                (f.get("lifecycle") and life != f["lifecycle"].replace("successful", "succeeded")) or \
                any(latest.tags.get(k) != v for k, v in tags.items()):
            continue
        out.append({"run_id": latest.run_id, "lifecycle_state": life, "successful": latest.state == "succeeded",
                    "state": latest.state, "project": latest.project, "run_group_id": latest.run_group_id,
                    "created_at": _iso(latest.created_time), "completed_at": _iso(latest.completion_time),
                    "metric_names": [], "tags": latest.tags, "success_reasons": [latest.reason] if latest.reason
                    else [], "durable_id": latest.durable_id})
    out.sort(key=lambda r: (r["created_at"] or "", r["run_id"]), reverse=True)
    limit = int(f.get("limit") or 200)
    return {"source": "kusto", "where": f"Kusto {database} at {endpoint}", "runs": out[:limit], "total": len(out),
            "truncated": len(out) > limit}


def _iso(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None
