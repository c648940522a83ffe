"""The Portal's Kusto-backed API: ``/api/portal/cluster`` (Cluster Health, ``GpuHealth()``),
``/api/portal/nodeutil`` (Node utilisation, ``NodeHealth()``), ``/api/portal/cost`` (Cost, ``GpuCostHourly``)
and ``/api/portal/ray/history/{resourceUID}`` (the durable RayJob timeline, ``TauExpRunLifecycle``).

Kusto is reached only through the hooks: the boards through the ``kusto`` fleet source
(``tau_register_fleet_sources``), the timeline through the ``kusto`` history source
(``tau_register_history_sources``).  The degradation contract is the other boards' (reference §4.2): no
source -> 503 ``{reason, state: unavailable}``; a failing query -> 502 ``{error}`` (details in the Portal's
log); an empty answer -> 200 with ``state: no_data``; rows -> 200 with ``state: ready``.  Queries run in a worker
thread, so a slow Kusto never stalls the other boards.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import attrs
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tau_core.errors import TauError
from tau_core.fleet import FleetQuery, FleetSource
from taugrid_portal.portal import kusto_boards
from taugrid_portal.portal.directory import Scope
from taugrid_portal.portal.state import NO_KUSTO, BoardError, PortalState, scoped, unavailable

NO_STORE = {"Cache-Control": "no-store"}
TITLES = {"cluster": "cluster", "nodeutil": "node utilization", "cost": "cost"}
DEFAULT_WINDOWS = {"cluster": "15m", "nodeutil": "15m", "cost": "7d"}
EMPTY_KEYS = {"cluster": ("gpus",), "nodeutil": ("nodes",), "cost": ("workspaces", "idleGPUs")}
NEEDS_ENDPOINT = ("the Kusto boards read through --kusto-endpoint (the --kusto-query-command adapter does not "
                  "serve them)")
HISTORY_OFF = "durable RayJob history is not configured"
HISTORY_MISSING = "durable RayJob history not found"
HISTORY_FAILED = "durable RayJob history query failed"
MAX_UID = 253


@attrs.frozen
class BoardRequest:
    scope: Scope
    query: FleetQuery
    window: str
    threshold: float = kusto_boards.DEFAULT_IDLE_THRESHOLD


def kusto_reason(config: Any) -> str:
    """Why the Kusto boards cannot answer (``""`` when they can try)."""
    if not config.kusto.configured:
        return NO_KUSTO
    return "" if config.kusto.endpoint else NEEDS_ENDPOINT


def _param(request: Request, name: str) -> str:
    return str(request.query_params.get(name) or "").strip()


def board_request(state: PortalState, request: Request, board: str) -> BoardRequest:
    """The scope and filters of one board request; 503 when Kusto is not usable, 400 on a bad parameter."""
    from tau_core.errors import UsageError
    from taugrid_portal.portal.kusto_flags import parse_duration

    reason = kusto_reason(state.config)
    if reason:
        raise unavailable(f"{TITLES[board]} board unavailable: {reason}")
    scope = state.scope(request.query_params, request.headers, allow_override=("namespace",))
    window = _param(request, "window") or DEFAULT_WINDOWS[board]
    try:
        seconds = parse_duration("window", window)
        threshold = float(_param(request, "idle-threshold") or kusto_boards.DEFAULT_IDLE_THRESHOLD)
    except (UsageError, ValueError) as exc:
        raise BoardError(400, {"error": str(getattr(exc, "message", exc)), "state": "invalid"}) from None
    if not 0 < threshold <= 100:
        raise BoardError(400, {"error": "idle-threshold must be a percentage above 0 and at most 100",
                               "state": "invalid"})
    cluster = scope.cluster if scope.managed else (_param(request, "cluster") or scope.cluster)
    namespace = scope.namespace if board == "cost" else ""
    query = FleetQuery(window_seconds=max(1, int(seconds)), cluster=cluster, namespace=namespace,
                       instance=_param(request, "instance"), model=_param(request, "model"))
    return BoardRequest(scope, query, window, threshold)


def _fleet(state: PortalState) -> FleetSource:
    from tau_core.fleet import fleet_source

    kusto = state.config.kusto
    return fleet_source("kusto", endpoint=kusto.endpoint, database=kusto.database, cost_database=kusto.cost_database)


def _build(board: str, source: FleetSource, req: BoardRequest) -> dict[str, Any]:
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    if board == "cluster":
        return kusto_boards.cluster_board(source.gpu_health(req.query), req.window)
    if board == "nodeutil":
        return kusto_boards.nodeutil_board(source.node_health(req.query), req.window, now)
    return kusto_boards.cost_board(source.gpu_cost(req.query), source.gpu_utilisation(req.query), req.window, now,
                                   req.threshold)


def _empty(board: str, doc: dict[str, Any]) -> bool:
    return not any(doc[k] for k in EMPTY_KEYS[board])


def compute(state: PortalState, board: str, req: BoardRequest) -> dict[str, Any]:
    """The board's scoped payload (blocking: call it from a worker thread)."""
    from tau_core.errors import ConfigError

    try:
        source = _fleet(state)
    except ConfigError as exc:
        raise unavailable(f"{TITLES[board]} board unavailable: {exc.message}") from None
    try:
        doc = _build(board, source, req)
    except TauError as exc:  # the Kusto query failed: 502, the details in the Portal's log only
        print(f"portal: {board} board failed: {exc.message}", file=sys.stderr)
        raise BoardError(502, {"error": f"{TITLES[board]} board failed; see the Portal log"}) from None
    finally:
        source.close()
    return scoped(doc, req.scope, None, (), _empty(board, doc))


async def board_document(state: PortalState, request: Request, board: str) -> dict[str, Any]:
    """The board for one request, kept for a few seconds (:meth:`PortalState.stamp`) so that a page and its
    refreshes do not query Kusto each time."""
    import json

    import anyio

    req = board_request(state, request, board)
    key = ("kusto", board, req)
    hit = state.recall(key)
    if hit is not None:
        cached: dict[str, Any] = json.loads(hit[0])
        return cached
    stamp = state.stamp()
    doc = await anyio.to_thread.run_sync(compute, state, board, req)
    state.remember(key, stamp, json.dumps(doc, separators=(",", ":")).encode())
    return doc


def timeline(state: PortalState, scope: Scope, uid: str) -> list[dict[str, Any]]:
    """The recorded lifecycle transitions of one RayJob (blocking); :class:`BoardError` per the contract."""
    from tau_core.errors import ConfigError
    from tau_core.history import RunQuery, history_source, transitions

    config = state.config
    if not (config.run_history.enabled and config.kusto.endpoint):
        raise unavailable(HISTORY_OFF)
    if not uid or len(uid) > MAX_UID:
        raise BoardError(404, {"error": HISTORY_MISSING})
    try:
        source = history_source("kusto", endpoint=config.kusto.endpoint, database=config.kusto.database,
                                table=config.run_history.table)
    except ConfigError as exc:
        raise unavailable(f"{HISTORY_OFF} ({exc.message})") from None
    query = RunQuery("", namespace=scope.namespace, cluster=scope.cluster, limit=config.run_history.limit,
                     resource_uid=uid, kind="RayJob")
    try:
        rows = source.run_history(query)
    except TauError as exc:
        print(f"portal: Ray history of {uid!r} failed: {exc.message}", file=sys.stderr)
        raise BoardError(502, {"error": HISTORY_FAILED}) from None
    finally:
        source.close()
    if not rows:
        raise BoardError(404, {"error": HISTORY_MISSING})
    return [kusto_boards.lifecycle_event(r) for r in transitions(rows)]


async def timeline_document(state: PortalState, request: Request, uid: str) -> dict[str, Any]:
    import anyio

    scope = state.scope(request.query_params, request.headers, allow_override=("namespace",))
    events = await anyio.to_thread.run_sync(timeline, state, scope, uid)
    return scoped({"events": events}, scope, None, (), False)


def _json(make: Callable[[], Any]) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        try:
            return JSONResponse(await make()(request), headers=NO_STORE)
        except BoardError as exc:
            return JSONResponse(exc.body, status_code=exc.status, headers=NO_STORE)
    return endpoint


def make_routes(state: PortalState) -> list[Any]:
    from starlette.routing import Route

    def board(name: str) -> Callable[[], Any]:
        return lambda: lambda request: board_document(state, request, name)

    def ray_history() -> Any:
        return lambda request: timeline_document(state, request, request.path_params["uid"])

    methods = ["GET", "HEAD"]
    return [Route("/api/portal/cluster", _json(board("cluster")), methods=methods),
            Route("/api/portal/nodeutil", _json(board("nodeutil")), methods=methods),
            Route("/api/portal/cost", _json(board("cost")), methods=methods),
            Route("/api/portal/ray/history/{uid:path}", _json(ray_history), methods=methods)]


def overview_cards(state: PortalState, scope: Scope) -> dict[str, Any]:
    """The Overview's ``health`` and ``cost`` cards from the Cluster Health and Cost boards (blocking), each
    with its ``*Unavailable`` reason (``""`` when the card is there)."""
    from taugrid_portal.portal.kusto_flags import parse_duration

    reason = kusto_reason(state.config)
    if reason:
        return {"healthUnavailable": reason, "costUnavailable": reason}
    out: dict[str, Any] = {}
    for board, card in (("cluster", "health"), ("cost", "cost")):
        window = DEFAULT_WINDOWS[board]
        query = FleetQuery(window_seconds=int(parse_duration("window", window)), cluster=scope.cluster,
                           namespace=scope.namespace if board == "cost" else "")
        try:
            doc = compute(state, board, BoardRequest(scope, query, window))
        except BoardError as exc:
            out[f"{card}Unavailable"] = str(exc.body.get("reason") or exc.body.get("error"))
            continue
        out[f"{card}Unavailable"] = ""
        out[card] = {"totalGPUs": doc["totalGPUs"], "errorGPUs": doc["errorGPUs"]} if board == "cluster" else \
            {"window": window, "totalGPUHours": doc["totalGPUHours"], "idleGPUs": len(doc["idleGPUs"])}
    return out
