"""pods/log: a snapshot of a container's log, or a followed stream of it."""

from __future__ import annotations

import asyncio
from typing import Any

from tau_testing.sim import errors
from tau_testing.sim.routes.base import RouteBase
from tau_testing.sim.routes.wire import Request, Response, Target


class LogRoutes(RouteBase):
    """``GET pods/{name}/log``."""

    async def _logs(self, request: Request, response: Response, target: Target, receive: Any) -> None:
        assert target.name is not None and target.namespace is not None
        ns, name = target.namespace, target.name
        pod = self.store.get("v1", "Pod", ns, name)
        if pod is None:
            raise errors.not_found("pods", "", name)
        container = _chosen_container(request, pod, name)
        logs = self.cluster.logs
        previous = request.flag("previous")
        if previous and not logs.has_previous(ns, name, container):
            raise errors.bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
        if not logs.has(ns, name, container):
            _refuse_waiting(pod, name, container)
        limit = request.int_param("limitBytes")
        timestamps = request.flag("timestamps")
        snapshot, _, generation = logs.entries(ns, name, container, previous=previous)
        lines = logs.read(ns, name, container, previous=previous, tail=request.int_param("tailLines"),
                          since=_since(request), timestamps=timestamps, limit_bytes=limit, entries=snapshot)
        if not request.flag("follow") or previous:
            text = "".join(line + "\n" for line in lines)
            if limit is not None:
                text = text.encode()[:limit].decode("utf-8", "ignore")
            await response.text(200, text)
            return
        await response.start(200, "text/plain", [("transfer-encoding", "chunked")])
        disconnected = asyncio.Event()

        async def listen() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    disconnected.set()
                    return

        listener = asyncio.create_task(listen())
        try:
            budget = _Budget(limit)
            for line in lines:
                await budget.send(response, line)
            # continue right after the snapshot the first lines came from
            await self._follow_log(response, disconnected, budget, (ns, name, container), len(snapshot),
                                   generation, timestamps)
        finally:
            listener.cancel()
            try:
                await response.chunk(b"", more=False)
            except Exception:  # the client is gone
                pass

    async def _follow_log(self, response: Response, disconnected: asyncio.Event, budget: _Budget,
                          source: tuple[str, str, str], index: int, generation: Any, timestamps: bool) -> None:
        """Stream the lines the container writes from ``index`` on until it ends, the client leaves or the
        budget of bytes is spent."""
        ns, name, container = source
        logs = self.cluster.logs
        assert self.closing is not None
        while not disconnected.is_set() and not self.closing.is_set():
            if budget.spent():
                return
            entries, terminated, gen = logs.entries(ns, name, container, start=index)
            if gen != generation:
                return
            for entry in entries:
                await budget.send(response, logs.format(entry, timestamps))
            index += len(entries)
            if terminated:
                return
            current = self.store.get("v1", "Pod", ns, name)
            if current is None:
                return
            if terminated is None and _container_ended(current, container):
                return  # it ended without writing a line (and without the log book hearing of it)
            await asyncio.sleep(0.02)


class _Budget:
    """``limitBytes`` across a followed stream: each line is cut to what is left."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0

    def spent(self) -> bool:
        return self.limit is not None and self.used >= self.limit

    async def send(self, response: Response, line: str) -> None:
        data = (line + "\n").encode()
        if self.limit is not None:
            data = data[: max(0, self.limit - self.used)]
        self.used += len(data)
        if data:
            await response.chunk(data)


def _chosen_container(request: Request, pod: dict[str, Any], name: str) -> str:
    """The ``container`` parameter, or the pod's only container; a bad request otherwise."""
    spec = pod.get("spec") or {}
    names = [c.get("name") for c in spec.get("containers") or []]
    init_names = [c.get("name") for c in spec.get("initContainers") or []]
    container = request.param("container")
    if not container:
        if len(names) != 1:
            message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
            if init_names:
                message += f" or one of the init containers: [{' '.join(init_names)}]"
            raise errors.bad_request(message)
        container = names[0]
    if container not in names and container not in init_names:
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    return str(container)


def _refuse_waiting(pod: dict[str, Any], name: str, container: str) -> None:
    """A container that has not started has no log: a bad request naming why it waits."""
    statuses = (pod.get("status") or {}).get("containerStatuses", []) + (
        (pod.get("status") or {}).get("initContainerStatuses", []))
    status = next((s for s in statuses if s.get("name") == container), None)
    waiting = ((status or {}).get("state") or {}).get("waiting")
    if waiting is not None or (status is None and (pod.get("status") or {}).get("phase") == "Pending"):
        reason = (waiting or {}).get("reason") or "ContainerCreating"
        raise errors.bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')


def _since(request: Request) -> Any:
    """``sinceSeconds`` (a float) or ``sinceTime`` (a datetime), else None."""
    if request.param("sinceSeconds"):
        return float(request.int_param("sinceSeconds") or 0)
    if request.param("sinceTime"):
        from tau_testing.sim.clock import parse_time

        return parse_time(request.param("sinceTime") or "")
    return None


def _container_ended(pod: dict[str, Any], container: str) -> bool:
    """The pod says this container's current instance has terminated (or the whole pod has)."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return True
    for entry in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if entry.get("name") == container:
            return "terminated" in (entry.get("state") or {})
    return False
