"""Watches: a chunked stream of events for one resource type, with selectors, bookmarks and injected drops."""

from __future__ import annotations

import asyncio
import collections
import json
import time
from collections.abc import Callable
from typing import Any

from tau_testing.sim.resources import ResourceType
from tau_testing.sim.routes.base import RouteBase
from tau_testing.sim.routes.wire import DroppedConnection, Request, Response, Target
from tau_testing.sim.selectors import labels_match, parse_field_selector, parse_label_selector


class WatchRoutes(RouteBase):
    """``GET ...?watch=true``."""

    async def _watch(self, request: Request, response: Response, target: Target, receive: Any,
                     drop_after: int | None, reset: bool = False) -> None:
        rtype = target.rtype
        selected = _selection(request, target)
        timeout = request.int_param("timeoutSeconds")
        bookmarks = request.flag("allowWatchBookmarks")
        rv = request.param("resourceVersion")
        send_initial = rv in (None, "", "0") or request.flag("sendInitialEvents")
        loop = asyncio.get_running_loop()
        pending: collections.deque[tuple[str, dict[str, Any], dict[str, Any] | None]] = collections.deque()
        wake = asyncio.Event()

        def on_event(event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            pending.append((event_type, obj, old))
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # loop closed during shutdown
                pass

        unsubscribe = self.store.watch(rtype.api_version, rtype.kind, rv, on_event, namespace=target.namespace,
                                       send_initial=send_initial)
        last_rv = int(self.store.resource_version) if send_initial else int(rv or 0)
        initial_count = len(pending) if send_initial else 0
        disconnected = asyncio.Event()
        listener = asyncio.create_task(_listen(receive, disconnected, wake))
        deadline = time.monotonic() + timeout if timeout else None
        sent = 0
        dropped = False
        next_bookmark = time.monotonic() + self.cluster.bookmark_interval
        try:
            await response.start(200, "application/json", [("transfer-encoding", "chunked")])
            assert self.closing is not None
            while not disconnected.is_set() and not self.closing.is_set():
                batch: list[bytes] = []
                while pending:
                    event_type, obj, old = pending.popleft()
                    last_rv = max(last_rv, int(obj["metadata"]["resourceVersion"]))
                    if initial_count > 0:
                        initial_count -= 1
                    line = self._event_line(request, rtype, selected, event_type, obj, old)
                    if line is not None:
                        batch.append(line)
                if send_initial and request.flag("sendInitialEvents") and bookmarks and initial_count == 0:
                    batch.append(self._bookmark(rtype, last_rv, initial_end=True))
                    send_initial = False
                for line in batch:
                    if drop_after is not None and sent >= drop_after:
                        break
                    await response.chunk(line)
                    sent += 1
                if drop_after is not None and sent >= drop_after:
                    if reset:
                        raise DroppedConnection
                    return
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    return
                if bookmarks and now >= next_bookmark:
                    with self.store._lock:
                        if not pending:
                            last_rv = max(last_rv, int(self.store.resource_version))
                    await response.chunk(self._bookmark(rtype, last_rv))
                    next_bookmark = now + self.cluster.bookmark_interval
                if not pending:
                    await _wait(wake, now, deadline, next_bookmark if bookmarks else None)
        except DroppedConnection:
            dropped = True
            raise
        finally:
            unsubscribe()
            listener.cancel()
            if response.started and not dropped:
                try:
                    await response.chunk(b"", more=False)
                except Exception:  # the client is gone
                    pass

    def _event_line(self, request: Request, rtype: ResourceType, selected: Callable[[dict[str, Any]], bool],
                    event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> bytes | None:
        """The JSON line this watch sends for one store event, or None when the event is outside its selection."""
        now_matches = selected(self.store.view(obj, rtype))
        if event_type == "MODIFIED":
            # an object moving into or out of the selection is ADDED or DELETED for this watch
            was = old is not None and selected(self.store.view(old, rtype))
            if now_matches and not was:
                event_type = "ADDED"
            elif was and not now_matches:
                event_type = "DELETED"
            elif not now_matches:
                return None
        elif not now_matches:
            return None
        shown: dict[str, Any] = dict(self.store.view(obj, rtype))
        shown["apiVersion"] = rtype.api_version
        if "as=Table" in request.headers.get("accept", ""):
            shown = self._table(request, rtype, [shown], {
                "resourceVersion": shown["metadata"]["resourceVersion"]}) or shown
        return json.dumps({"type": event_type, "object": shown}, separators=(",", ":")).encode() + b"\n"

    def _bookmark(self, rtype: ResourceType, rv: int, initial_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv), "creationTimestamp": None}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return json.dumps({"type": "BOOKMARK", "object": {"kind": rtype.kind, "apiVersion": rtype.api_version,
                                                          "metadata": meta}}, separators=(",", ":")).encode() + b"\n"


async def _listen(receive: Any, disconnected: asyncio.Event, wake: asyncio.Event) -> None:
    """Notice the client hanging up (and wake the watch loop to end)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            disconnected.set()
            wake.set()
            return


async def _wait(wake: asyncio.Event, now: float, deadline: float | None, next_bookmark: float | None) -> None:
    """Sleep until an event arrives, at most until the timeout, the next bookmark, or half a second."""
    wait = 0.5
    if deadline is not None:
        wait = min(wait, max(0.0, deadline - now))
    if next_bookmark is not None:
        wait = min(wait, max(0.0, next_bookmark - now))
    try:
        await asyncio.wait_for(wake.wait(), timeout=max(wait, 0.001))
    except TimeoutError:
        pass
    wake.clear()


def _selection(request: Request, target: Target) -> Callable[[dict[str, Any]], bool]:
    """Whether an object is in this watch: its name, label selector and field selector."""
    rtype = target.rtype
    reqs = parse_label_selector(request.param("labelSelector"))
    field_selector = request.param("fieldSelector")
    fmatch = parse_field_selector(field_selector, rtype.group, rtype.kind)
    name_match = target.name

    def selected(obj: dict[str, Any]) -> bool:
        if name_match is not None and obj["metadata"]["name"] != name_match:
            return False
        if reqs and not labels_match(reqs, obj["metadata"].get("labels")):
            return False
        return not field_selector or fmatch(obj)
    return selected
