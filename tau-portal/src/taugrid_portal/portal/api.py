"""The Portal's JSON API (``/api/portal/...``), with the degradation contract of reference §4.2.

503 when a source is missing or the cache cannot vouch for its data, 502 when computing a board fails, 200
with ``state: no_data`` when a board is empty.  Responses are memoised per cache generation.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from taugrid_portal.portal import boards, kusto_api, runs
from taugrid_portal.portal.cache import WatchCache
from taugrid_portal.portal.directory import Scope
from taugrid_portal.portal.history import durable_runs, ray_history
from taugrid_portal.portal.scoping import authorized, redirect_url, viewer
from taugrid_portal.portal.state import (
    JOBS_DISABLED,
    NO_KUBE,
    BoardError,
    PortalState,
    scoped,
    unavailable,
)

NO_STORE = {"Cache-Control": "no-store"}


def error_response(exc: BoardError) -> Response:
    return JSONResponse(exc.body, status_code=exc.status, headers=NO_STORE)


async def respond(state: PortalState, request: Request, board: str, keys: tuple[str, ...],
                  build: Callable[[Scope, WatchCache], dict[str, Any]], empty: Callable[[dict[str, Any]], bool],
                  *, allow_override: tuple[str, ...] = ("namespace",), blocking: bool = False) -> Response:
    """One board answer.  ``blocking``: ``build`` queries Kusto, so a fresh computation runs in a worker thread
    (a slow query must not stall the event loop, and with it /healthz and every other board)."""
    try:
        scope = state.scope(request.query_params, request.headers, allow_override=allow_override)
        moved = redirect_url(scope, request.url.path, request.query_params)
        if scope.availability != "available":
            elsewhere = {"reason": "workspace data is not served by this Portal", "scope": scope.to_json(),
                         "state": scope.availability, **({"redirectUrl": moved} if moved else {})}
            return JSONResponse(elsewhere, headers=NO_STORE)
        cache = state.require(keys, board)
        key = (board, scope, tuple(sorted(request.query_params.items())))

        def compute() -> dict[str, Any]:
            try:
                doc = build(scope, cache)
            except BoardError:
                raise
            except Exception as exc:  # the board failed: 502, the details in the server log only
                print(f"portal: {board} board failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                raise BoardError(502, {"error": f"{board} board failed; see the Portal log"}) from None
            return scoped(doc, scope, cache, keys, empty(doc))

        if blocking and state.recall(key) is None:
            import anyio

            body, packed = await anyio.to_thread.run_sync(state.memo, key, compute)
        else:
            body, packed = state.memo(key, compute)
        headers = {**NO_STORE, "Vary": "Accept-Encoding"}
        if "gzip" in request.headers.get("accept-encoding", ""):
            return Response(packed, media_type="application/json", headers={**headers, "Content-Encoding": "gzip"})
        return Response(body, media_type="application/json", headers=headers)
    except BoardError as exc:
        return error_response(exc)


def make_routes(state: PortalState) -> list[Any]:
    from starlette.routing import Route

    config = state.config

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"}, headers=NO_STORE)

    async def workspaces(request: Request) -> Response:
        try:
            scope = state.scope(request.query_params, request.headers)
            if state.directory is None:
                return JSONResponse({"workspaces": [scope.to_json()], "selected": scope.to_json()}, headers=NO_STORE)
            mine = authorized(state.directory, viewer(request.headers, config))
            return JSONResponse({"workspaces": [s.to_json() for s in mine], "selected": scope.to_json(),
                                 "managed": True}, headers=NO_STORE)
        except BoardError as exc:
            return error_response(exc)

    async def runs_ep(request: Request) -> Response:
        external = request.query_params.get("include-external") in ("1", "true")
        return await respond(state, request, "runs", runs.RUN_KEYS,
                       lambda scope, cache: runs.runs_board(cache, scope, include_external=external,
                                                     history=state.config.run_history.enabled,
                                                     durable=durable_runs(state.config, scope.namespace,
                                                                          scope.cluster)),
                       lambda d: not d["runs"], blocking=state.config.run_history.enabled)

    async def overview(request: Request) -> Response:
        return await overview_response(state, request)

    async def nodes(request: Request) -> Response:
        return await respond(state, request, "nodes", boards.NODE_KEYS,
                       lambda scope, cache: boards.nodes_board(cache, scope), lambda d: not d["nodes"])

    async def ray(request: Request) -> Response:
        return await respond(state, request, "ray", boards.RAY_KEYS,
                       lambda scope, cache: {"namespace": scope.namespace,
                                             "clusters": boards.ray_clusters(cache, scope.namespace),
                                             **ray_history(state.config, scope.namespace, scope.cluster)},
                       lambda d: not (d["clusters"] or d["history"]), blocking=state.config.run_history.enabled)

    async def jobs(request: Request) -> Response:
        return await jobs_response(state, request)

    async def detail(request: Request) -> Response:
        from taugrid_portal.portal.detail import detail_response

        return await detail_response(state, request)

    methods = ["GET", "HEAD"]
    return [
        Route("/healthz", healthz, methods=methods),
        Route("/api/portal/workspaces", workspaces, methods=methods),
        Route("/api/portal/overview", overview, methods=methods),
        Route("/api/portal/runs", runs_ep, methods=methods),
        Route("/api/portal/runs/{namespace}/{name}", detail, methods=methods),
        Route("/api/portal/jobs", jobs, methods=methods),
        Route("/api/portal/nodes", nodes, methods=methods),
        Route("/api/portal/ray", ray, methods=methods),
        *kusto_api.make_routes(state),
    ]


def board_list(state: PortalState, workspace: str) -> list[dict[str, Any]]:
    q = "?" + urlencode({"workspace": workspace})
    items = [("overview", "Overview", "/portal"), ("runs", "Runs", "/portal/runs"),
             ("experiments", "Experiments", "/portal/experiments"), ("jobs", "Jobs / Queue", "/portal/jobs"),
             ("cluster", "Cluster Health", "/portal/cluster"), ("nodes", "Cluster Nodes", "/portal/nodes"),
             ("ray", "Ray", "/portal/ray"), ("cost", "Cost", "/portal/cost")]
    if state.config.kueueviz is not None:
        items.append(("kueueviz", "Kueue (Live)", "/portal/kueueviz"))
    return [{"id": i, "title": t, "path": p + q, "external": False} for i, t, p in items]


async def overview_response(state: PortalState, request: Request) -> Response:
    def build(scope: Scope, cache: WatchCache) -> dict[str, Any]:
        run_rows = runs.runs_board(cache, scope)["runs"]
        cards = boards.overview_cards(cache, scope, run_rows)
        cards.update({"fleetUnavailable": "", "queueUnavailable": "" if state.config.jobs_scope_mode != "disabled"
                      else "computed Jobs board disabled", "rayUnavailable": ""})
        if request.query_params.get("view") != "workloads":
            cards.update(kusto_api.overview_cards(state, scope))
        running = boards.running_entries(cache, run_rows)
        if request.query_params.get("view") == "workloads":  # queue counters and admitted-workload links only
            return {"cards": {"queue": cards["queue"], "queueUnavailable": cards["queueUnavailable"]},
                    "running": running, "runningUnavailable": ""}
        return {"boards": board_list(state, scope.workspace), "cards": cards, "running": running,
                "runningUnavailable": ""}

    if state.cache is None:
        try:
            scope = state.scope(request.query_params, request.headers)
        except BoardError as exc:
            return error_response(exc)
        import anyio

        kusto_cards = await anyio.to_thread.run_sync(kusto_api.overview_cards, state, scope)
        body = {"boards": board_list(state, scope.workspace), "cards": {
            "fleetUnavailable": NO_KUBE, **kusto_cards,
            "queueUnavailable": NO_KUBE, "rayUnavailable": NO_KUBE}, "running": [],
            "runningUnavailable": NO_KUBE}
        return JSONResponse(scoped(body, scope, None, (), True), headers=NO_STORE)
    keys = tuple(sorted(set(runs.RUN_KEYS + boards.NODE_KEYS + ("workloads", "services", "localqueues"))))
    return await respond(state, request, "overview", keys, build, lambda d: False,
                         blocking=state.config.kusto.configured)



def jobs_builder(state: PortalState, request: Request) -> Callable[[Scope, WatchCache], dict[str, Any]]:
    """The Jobs board for one request, after the scope-mode checks (:class:`BoardError` when refused)."""
    config = state.config
    if config.jobs_scope_mode == "disabled":
        raise unavailable(JOBS_DISABLED)
    if config.jobs_scope_mode == "operator":
        for key in ("namespace", "queue"):
            if key in request.query_params:
                raise BoardError(400, {"error": f"{key} query is not allowed in operator Jobs mode"})
    filters = {"team": request.query_params.get("team", ""), "lane": request.query_params.get("lane", ""),
               "gpuClass": request.query_params.get("gpu-class", "")}

    def build(scope: Scope, cache: WatchCache) -> dict[str, Any]:
        if config.jobs_scope_mode == "operator":
            allowed = boards.operator_triples(config.operator_scopes)
        else:
            allowed = [(scope.team, scope.namespace, scope.local_queue)]
        doc = boards.jobs_board(cache, allowed, filters)
        if config.policy is not None:
            doc["policy"] = {"path": str(config.policy.path), "sha256": config.policy.sha256}
        return doc

    return build


async def jobs_response(state: PortalState, request: Request) -> Response:
    try:
        build = jobs_builder(state, request)
    except BoardError as exc:
        return error_response(exc)
    return await respond(state, request, "jobs", boards.JOB_KEYS, build, lambda d: not d["workloads"],
                   allow_override=())


__all__ = ["error_response", "make_routes"]
