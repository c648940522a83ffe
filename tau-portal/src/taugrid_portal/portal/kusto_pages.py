"""What the Cluster Health page and the run page's Ray history section read from Kusto (through
:mod:`.kusto_api`, hence through the hooks), each part degrading on its own: a failing Node utilisation query
leaves the GPU table in place, and a missing Ray history leaves the run page whole."""

from __future__ import annotations

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
