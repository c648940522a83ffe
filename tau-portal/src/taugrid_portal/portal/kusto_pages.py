"""What the Cluster Health page and the run page's Ray history section read from Kusto (through
:mod:`.kusto_api`, hence through the hooks), each part degrading on its own: a failing Node utilisation query
leaves the GPU table in place, and a missing Ray history leaves the run page whole."""

from __future__ import annotations

import sys
from typing import Any

from starlette.requests import Request

from taugrid_portal.portal.kusto_api import board_document, timeline
from taugrid_portal.portal.state import BoardError, PortalState


def _reason(exc: BoardError) -> str:
    return str(exc.body.get("reason") or exc.body.get("error") or "unavailable")


async def cluster_context(state: PortalState, request: Request) -> dict[str, Any]:
    """The GPU board (its failure fails the page: 503/502) and the Node utilisation board (its own state)."""
    data = await board_document(state, request, "cluster")
    try:
        nodes: dict[str, Any] = await board_document(state, request, "nodeutil")
        nodes_reason = ""
    except BoardError as exc:
        nodes, nodes_reason = {}, _reason(exc)
    return {"data": data, "nodeutil": nodes, "nodeutil_unavailable": nodes_reason}


async def ray_timeline(state: PortalState, request: Request, run: dict[str, Any]) -> dict[str, Any]:
    """The run page's durable Ray history: ``state`` is ``ready``, ``empty``, ``not_configured`` or
    ``unavailable`` (with ``reason``); only a RayJob has one."""
    import anyio

    if run.get("kind") != "RayJob":
        return {"state": "none", "events": [], "reason": ""}
    if not run.get("resourceUid"):
        return {"state": "empty", "events": [], "reason": "the RayJob has no UID yet"}
    try:
        scope = state.scope(request.query_params, request.headers, allow_override=("namespace",))
        events = await anyio.to_thread.run_sync(timeline, state, scope, str(run["resourceUid"]))
    except BoardError as exc:
        state_word = {503: "not_configured", 404: "empty"}.get(exc.status, "unavailable")
        return {"state": state_word, "events": [], "reason": _reason(exc)}
    return {"state": "ready", "events": events, "reason": ""}


def durable_run(state: PortalState, scope: Any, namespace: str, name: str) -> tuple[dict[str, Any], list[Any]] | None:
    """A run whose workload is gone, from the recorded history (blocking): its Runs-board row and its
    transitions (latest attempt), or ``None`` when history is off or holds nothing for it."""
    from tau_core.errors import ConfigError, TauError
    from tau_core.history import RunQuery, history_source, transitions
    from taugrid_portal.portal.history import durable_row
    from taugrid_portal.portal.kusto_boards import lifecycle_event

    config = state.config
    if not (config.run_history.enabled and config.kusto.endpoint):
        return None
    try:
        source = history_source("kusto", endpoint=config.kusto.endpoint, database=config.kusto.database,
                                table=config.run_history.table)
    except ConfigError:
        return None
    limit = config.run_history.limit
    try:
        rows = source.run_history(RunQuery(name, namespace=namespace, cluster=scope.cluster, limit=limit))
        if not rows:  # the run id is a label; the page is addressed by the workload's name
            rows = [r for r in source.run_history(RunQuery("", namespace=namespace, cluster=scope.cluster,
                                                           limit=limit)) if r.owning_resource_name == name]
    except TauError as exc:
        print(f"portal: recorded history of {namespace}/{name!r} failed: {exc.message}", file=sys.stderr)
        raise BoardError(502, {"error": "durable run history query failed"}) from None
    finally:
        source.close()
    if not rows:
        return None
    uid = rows[-1].resource_uid  # oldest first: the last row is the latest attempt's
    attempt = transitions([r for r in rows if r.resource_uid == uid])
    return durable_row(attempt[-1]), [lifecycle_event(r) for r in attempt]


async def durable_run_page(state: PortalState, request: Request, missing: BoardError) -> dict[str, Any]:
    """The run page of a run whose workload is gone, from its recorded history; ``missing`` when there is none."""
    import anyio

    ns, name = request.path_params["namespace"], request.path_params["name"]
    scope = state.scope(request.query_params, request.headers, allow_override=("namespace",))
    found = await anyio.to_thread.run_sync(durable_run, state, scope, ns, name)
    if found is None:
        raise missing
    run, events = found
    return {"data": {"run": run, "durable": True}, "api": "",
            "timeline": {"state": "ready", "events": events, "reason": ""}}
