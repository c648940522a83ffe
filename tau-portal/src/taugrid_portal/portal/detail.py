"""``/api/portal/runs/{namespace}/{name}``: the run detail (phase tree, pods, workloads, events, logs tail).

Workload, pods and Kueue Workloads come from the watch cache.  Events and the logs tail are read on demand,
once per request, with the Portal's read-only identity; each part reports ``ready``, ``empty`` or
``unavailable`` on its own so that a missing permission degrades one panel, not the page.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tau_core import keys
from tau_core.kube import KubeApiError, api_path
from taugrid_portal.portal import runs
from taugrid_portal.portal.state import BoardError, PortalState, scoped

LOG_TAIL = 100


async def _events(state: PortalState, ns: str) -> tuple[list[Any], str]:
    session = state.cache.session if state.cache is not None else None
    if session is None:
        return [], "unavailable"
    try:
        return await session.list_items(api_path("v1", "events", namespace=ns)), "ready"
    except (KubeApiError, OSError):
        return [], "unavailable"


async def _logs(state: PortalState, ns: str, pods: list[dict[str, Any]]) -> tuple[list[str], str]:
    session = state.cache.session if state.cache is not None else None
    if session is None or not pods:
        return [], "empty" if session is not None else "unavailable"
    pod = sorted(pods, key=lambda p: p["name"])[0]
    container = (pod["containers"] or [None])[0]
    try:
        text = await session.text(api_path("v1", "pods", namespace=ns, name=pod["name"], subresource="log"),
                                  query={"tailLines": LOG_TAIL, "container": container})
    except (KubeApiError, OSError):
        return [], "unavailable"
    lines = text.splitlines()[-LOG_TAIL:]
    return lines, "ready" if lines else "empty"


async def detail_document(state: PortalState, request: Request) -> dict[str, Any]:
    ns, name = request.path_params["namespace"], request.path_params["name"]
    scope = state.scope(request.query_params, request.headers)
    if scope.namespace and ns != scope.namespace:
        raise BoardError(403, {"error": "namespace is outside the resolved workspace scope", "state": "forbidden"})
    cache = state.require(runs.DETAIL_KEYS, "run detail")
    snap = runs.snapshot(cache, ns, name)
    if snap.workload is None:
        raise BoardError(404, {"error": f"not found: no Job or RayJob {ns}/{name}; "
                                        "expected /api/portal/runs/{namespace}/{name}"})
    queue = ((snap.workload.get("metadata") or {}).get("labels") or {}).get(keys.KUEUE_QUEUE_NAME)
    if scope.managed and scope.local_queue and queue not in (scope.local_queue, None):
        raise BoardError(403, {"error": "the run's queue is outside the resolved workspace scope",
                               "state": "forbidden"})
    doc = runs.run_detail(snap, scope.cluster)
    events, events_state = await _events(state, ns)
    doc["events"] = runs.relevant_events(snap, events)
    doc["logs"], logs_state = await _logs(state, ns, doc["pods"])
    doc["diagnostics"].update({"events": events_state if events_state != "ready" else
                               ("ready" if doc["events"] else "empty"),
                               "logs": logs_state, "tracking": doc["tracking"]["state"]})
    return scoped(doc, scope, cache, runs.DETAIL_KEYS, False)


async def durable_document(state: PortalState, request: Request, missing: BoardError) -> dict[str, Any]:
    """The detail of a run whose workload is gone: its recorded row and transitions (``durable: true``), or
    ``missing`` when durable history is off or holds nothing for it."""
    from taugrid_portal.portal.kusto_pages import durable_run_page

    page = await durable_run_page(state, request, missing)
    scope = state.scope(request.query_params, request.headers, allow_override=("namespace",))
    doc = {"run": page["data"]["run"], "durable": True, "history": {"events": page["timeline"]["events"]},
           "diagnostics": {"workloads": "not_configured", "pods": "not_configured", "events": "not_configured",
                           "logs": "not_configured", "history": "ready"}}
    return scoped(doc, scope, None, (), False)


async def detail_response(state: PortalState, request: Request) -> Response:
    try:
        try:
            doc = await detail_document(state, request)
        except BoardError as exc:
            if exc.status != 404:
                raise
            doc = await durable_document(state, request, exc)
        return JSONResponse(doc, headers={"Cache-Control": "no-store"})
    except BoardError as exc:
        return JSONResponse(exc.body, status_code=exc.status, headers={"Cache-Control": "no-store"})
