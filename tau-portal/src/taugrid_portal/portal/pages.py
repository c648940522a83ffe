"""The Portal's server-rendered pages (Jinja2, autoescaped) and its two static files.

Every page renders from the same functions as the JSON API, so the first paint already holds the data; a
small script (``static/portal.js``) sorts and filters tables client-side with the state in the URL and
refreshes the Runs and run-detail pages from the API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from taugrid_portal.portal import boards, runs
from taugrid_portal.portal.api import NO_STORE, board_list, jobs_builder
from taugrid_portal.portal.state import BoardError, PortalState

HERE = Path(__file__).parent
STATIC = {"portal.js": "text/javascript", "portal.css": "text/css"}
OVERVIEW_KEYS = runs.RUN_KEYS + boards.NODE_KEYS


def environment() -> Any:
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True,
                              trim_blocks=True, lstrip_blocks=True)


class _Pages:
    """The page endpoints of one Portal: templates render with the board list and refresh period."""

    def __init__(self, state: PortalState) -> None:
        self.state = state
        self.env = environment()
        self.static = {name: (HERE / "static" / name).read_bytes() for name in STATIC}

    def html(self, request: Request, template: str, **context: Any) -> str:
        state = self.state
        ws = request.query_params.get("workspace") or state.config.workspace
        return str(self.env.get_template(template).render(
            boards=board_list(state, ws), refresh=state.config.refresh_seconds, path=request.url.path, **context))

    def render(self, request: Request, template: str, status: int = 200, **context: Any) -> Response:
        return HTMLResponse(self.html(request, template, **context), status_code=status, headers=NO_STORE)

    def page_key(self, request: Request, template: str) -> tuple[Any, ...]:
        """Everything a page depends on besides the cache: the URL and the viewer's identity headers."""
        config = self.state.config
        return ("page", template, request.url.path, tuple(sorted(request.query_params.multi_items())),
                request.headers.get(config.user_header.lower(), ""),
                request.headers.get(config.groups_header.lower(), ""))

    def guarded(self, template: str, build: Any, memo_keys: tuple[str, ...] = ()) -> Any:
        """A page; with ``memo_keys`` (the cache kinds it reads) its HTML is kept per cache generation and
        served again only while those kinds are current."""
        state = self.state

        async def endpoint(request: Request) -> Response:
            key = self.page_key(request, template) if memo_keys and state.cache is not None else None
            hit = state.recall(key) if key is not None and state.cache is not None \
                and state.cache.ready(memo_keys) else None
            if hit is None:
                stamp = state.stamp()
                try:
                    context = await build(request)
                except BoardError as exc:
                    reason = str(exc.body.get("reason") or exc.body.get("error") or "unavailable")
                    return self.render(request, template, status=exc.status, unavailable=reason, data=None)
                if key is None:
                    return self.render(request, template, unavailable="", **context)
                hit = state.remember(key, stamp, self.html(request, template, unavailable="", **context).encode())
            body, packed = hit
            headers = {**NO_STORE, "Vary": "Accept-Encoding"}
            if "gzip" in request.headers.get("accept-encoding", ""):
                return Response(packed, media_type="text/html; charset=utf-8",
                                headers={**headers, "Content-Encoding": "gzip"})
            return Response(body, media_type="text/html; charset=utf-8", headers=headers)
        return endpoint

    async def root(self, request: Request) -> Response:
        return RedirectResponse("/portal", status_code=302)

    async def static_file(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in self.static:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(self.static[name], media_type=STATIC[name], headers={"Cache-Control": "max-age=300"})

    async def kueueviz_board(self, request: Request) -> Response:
        return RedirectResponse("/api/portal/kueueviz/", status_code=302)

    async def favicon(self, request: Request) -> Response:
        return Response(status_code=204)


def make_routes(state: PortalState) -> list[Any]:
    from starlette.routing import Route

    pages = _Pages(state)
    guarded = pages.guarded
    build = _builders(state)
    methods = ["GET", "HEAD"]
    return [
        Route("/", pages.root, methods=methods),
        Route("/favicon.ico", pages.favicon, methods=methods),
        Route("/portal", guarded("overview.html", build["overview"], OVERVIEW_KEYS), methods=methods),
        Route("/portal/", guarded("overview.html", build["overview"], OVERVIEW_KEYS), methods=methods),
        Route("/portal/runs", guarded("runs.html", build["runs_page"], runs.RUN_KEYS), methods=methods),
        Route("/portal/runs/{namespace}/{name}", guarded("run.html", build["run_page"]), methods=methods),
        Route("/portal/jobs", guarded("jobs.html", build["jobs_page"], boards.JOB_KEYS), methods=methods),
        Route("/portal/nodes", guarded("nodes.html", build["nodes_page"], boards.NODE_KEYS), methods=methods),
        Route("/portal/ray", guarded("ray.html", build["ray_page"], boards.RAY_KEYS), methods=methods),
        Route("/portal/experiments", guarded("experiments.html", build["experiments_page"]), methods=methods),
        Route("/portal/static/{name}", pages.static_file, methods=methods),
        Route("/portal/cluster", guarded("cluster.html", build["cluster_page"]), methods=methods),
        Route("/portal/cost", guarded("cost.html", build["cost_page"]), methods=methods),
        *([Route("/portal/kueueviz", pages.kueueviz_board, methods=methods)] if state.config.kueueviz else []),
    ]


def _builders(state: PortalState) -> dict[str, Any]:
    """The context builders of the pages (each raises :class:`BoardError` when its board is unavailable)."""

    def scope_of(request: Request) -> Any:
        return state.scope(request.query_params, request.headers, allow_override=("namespace",))

    async def overview(request: Request) -> dict[str, Any]:
        scope = scope_of(request)
        cache = state.require(runs.RUN_KEYS + boards.NODE_KEYS, "overview")
        rows = runs.runs_board(cache, scope)["runs"]
        return {"data": boards.overview_cards(cache, scope, rows),
                "running": [r for r in rows if r["status"] == "Running"], "scope": scope}

    async def runs_page(request: Request) -> dict[str, Any]:
        scope = scope_of(request)
        external = request.query_params.get("include-external") in ("1", "true")
        cache = state.require(runs.RUN_KEYS, "runs")
        doc = runs.runs_board(cache, scope, include_external=external)
        return {"data": doc, "scope": scope, "health": cache.health(runs.RUN_KEYS)}

    async def run_page(request: Request) -> dict[str, Any]:
        from taugrid_portal.portal.detail import detail_document
        from taugrid_portal.portal.kusto_pages import durable_run_page, ray_timeline

        try:
            doc = await detail_document(state, request)
        except BoardError as exc:
            if exc.status != 404:
                raise
            return await durable_run_page(state, request, exc)
        return {"data": doc, "api": f"/api/portal/runs/{request.path_params['namespace']}/"
                                    f"{request.path_params['name']}",
                "timeline": await ray_timeline(state, request, doc["run"])}

    async def cluster_page(request: Request) -> dict[str, Any]:
        from taugrid_portal.portal.kusto_pages import cluster_context

        return await cluster_context(state, request)

    async def cost_page(request: Request) -> dict[str, Any]:
        from taugrid_portal.portal.kusto_api import board_document

        return {"data": await board_document(state, request, "cost")}

    async def nodes_page(request: Request) -> dict[str, Any]:
        scope = scope_of(request)
        return {"data": boards.nodes_board(state.require(boards.NODE_KEYS, "nodes"), scope)}

    async def ray_page(request: Request) -> dict[str, Any]:
        import anyio

        from taugrid_portal.portal.history import ray_history

        scope = scope_of(request)
        clusters = boards.ray_clusters(state.require(boards.RAY_KEYS, "ray"), scope.namespace)
        history = await anyio.to_thread.run_sync(ray_history, state.config, scope.namespace, scope.cluster)
        return {"data": {"clusters": clusters, **history}}

    async def jobs_page(request: Request) -> dict[str, Any]:
        build = jobs_builder(state, request)
        scope = state.scope(request.query_params, request.headers)
        return {"data": build(scope, state.require(boards.JOB_KEYS, "jobs"))}

    async def experiments_page(request: Request) -> dict[str, Any]:
        scope = scope_of(request)
        if state.config.store is None:
            raise BoardError(503, {"reason": "experiments unavailable: portal started without an experiment store"})
        from taugrid_portal.store import ExperimentStore
        from taugrid_portal.store.search import search_experiments

        with ExperimentStore.open(state.config.store) as store:
            doc = search_experiments(store, limit=1000)
        return {"data": doc, "workspace": scope.workspace}

    return {"overview": overview, "runs_page": runs_page, "run_page": run_page, "nodes_page": nodes_page,
            "ray_page": ray_page, "jobs_page": jobs_page, "experiments_page": experiments_page,
            "cluster_page": cluster_page, "cost_page": cost_page}
