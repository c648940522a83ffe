"""A run's logs: the pods of a batch Job, or a RayJob's driver output (offload sidecar or submitter pod).

Following several containers runs one stream per container in an anyio task group; every line goes
through one ``emit`` (see :func:`tau_core.aio.iterate`), so interleaving is by arrival.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import anyio

from tau_core import keys
from tau_core.errors import NotFoundError, UsageError
from tau_core.kube import KubeApiError, KubeSession, api_path
from tau_core.lifecycle.base import LogOptions, RunRef

from .archived_logs import ArchivedLogs, NoLiveLogs
from .objects import JOB_API, LOG_OFFLOAD_CONTAINER, RAYJOB_API, Obj, _labels, _meta

Emit = Callable[[str], Awaitable[None]]


class Logs(ArchivedLogs):
    def logs(self, ref: RunRef, options: LogOptions) -> Iterator[str]:
        """Lines of the run's logs (Job pods, or a RayJob's driver output)."""
        lines: Iterator[str] = self._stream(self._logs, ref, options)
        return lines

    async def _logs(self, session: KubeSession, ref: RunRef, options: LogOptions, *, emit: Emit) -> None:
        target = await self.resolve(session, ref)
        ns = target.namespace
        job, rayjob = await self._workload(session, ns, ref.name)
        try:
            if rayjob is None:
                await self._job_logs(session, ns, ref.name, job, options, emit)
                return
            if options.container or options.all_containers or options.previous or options.timestamps or options.prefix:
                raise UsageError("container selection, --previous, --timestamps, and --prefix are supported "
                                 f"only for batch/v1 Job logs; {ref.name} is a RayJob")
            await self._ray_logs(session, ns, ref.name, rayjob, options, emit)
        except NoLiveLogs as gone:  # live pods first, then the logs the wrapper archived, then run history
            await self._fallback_logs(session, ns, ref.name, job or rayjob, options, emit, gone)

    async def _job_pods(self, session: KubeSession, ns: str, name: str, job: Obj | None,
                        options: LogOptions) -> builtins.list[Obj]:
        """The Job's pods, oldest first; when following, after the first container started (or the Job ended)."""
        selector = f"controller-uid={_meta(job).get('uid')}" if job else f"job-name={name}"
        pods_path = api_path("v1", "pods", namespace=ns)
        pods = await session.list_items(pods_path, label_selector=selector)
        while options.follow and job is not None and not _started(pods):
            if _job_done(job):
                break
            await anyio.sleep(self.poll_interval)
            pods = await session.list_items(pods_path, label_selector=selector)
            job = await session.get(api_path(*JOB_API, namespace=ns, name=name), missing_ok=True)
            if job is None:
                break
        if not pods:
            raise NoLiveLogs(
                f"no logs found for run \"{name}\" in namespace {ns}; it may not exist or may not have started",
                hint=f"run `tau run list -n {ns}` or `tau run status {name}`")
        pods.sort(key=lambda p: _meta(p).get("creationTimestamp") or "")
        return pods

    async def _job_logs(self, session: KubeSession, ns: str, name: str, job: Obj | None,
                        options: LogOptions, emit: Emit) -> None:
        streams = _streams(await self._job_pods(session, ns, name, job, options), options)
        if options.follow:
            async with anyio.create_task_group() as group:
                for pod_name, container in streams:
                    group.start_soon(self._follow, session, ns, pod_name, container, options, emit)
            return
        for pod_name, container in streams:
            try:
                text = await session.text(api_path("v1", "pods", namespace=ns, name=pod_name, subresource="log"),
                                          query=_log_query(container, options, follow=False))
            except KubeApiError as exc:
                if exc.status == 400:
                    continue  # the container has not started yet: nothing to show
                raise
            for line in text.splitlines():
                await emit(_prefixed(line, pod_name, container, options.prefix))

    async def _follow(self, session: KubeSession, ns: str, pod: str, container: str, options: LogOptions,
                      emit: Emit) -> None:
        """Follow one container's log.  A stream that ends before its first line while the container
        still runs (a quiet start, an idle-timeout proxy) is opened again; after output, its end is the end."""
        path = api_path("v1", "pods", namespace=ns, name=pod, subresource="log")
        pod_path = api_path("v1", "pods", namespace=ns, name=pod)
        for _ in range(100_000):
            got = 0
            try:
                async for line in session.stream_lines(path, query=_log_query(container, options, follow=True)):
                    got += 1
                    await emit(_prefixed(line, pod, container, options.prefix))
            except KubeApiError as exc:
                if exc.status != 400:
                    raise
                await anyio.sleep(self.poll_interval)  # waiting to start
                continue
            if got:
                return
            current = await session.get(pod_path, missing_ok=True)
            if current is None or not _container_running(current, container):
                return
            await anyio.sleep(self.poll_interval)

    async def _ray_sources(self, session: KubeSession, ns: str, name: str, rayjob: Obj,
                           options: LogOptions) -> tuple[builtins.list[tuple[str, str]], bool]:
        """``(pod, container)`` candidates for the driver output, and whether the head's sidecar is still starting."""
        pods_path = api_path("v1", "pods", namespace=ns)
        cluster = (rayjob.get("status") or {}).get("rayClusterName")
        candidates: builtins.list[tuple[str, str]] = []
        waiting_for_head = False
        if cluster:
            heads = await session.list_items(
                pods_path, label_selector=f"{keys.RAY_CLUSTER}={cluster},{keys.RAY_NODE_TYPE}=head")
            for head in heads:
                names = [c.get("name") for c in (head.get("spec") or {}).get("containers") or []]
                if LOG_OFFLOAD_CONTAINER in names and (not options.follow or
                                                       _container_started(head, LOG_OFFLOAD_CONTAINER)):
                    candidates.append((_meta(head)["name"], LOG_OFFLOAD_CONTAINER))
                elif LOG_OFFLOAD_CONTAINER in names:
                    waiting_for_head = True
        if not candidates and not waiting_for_head:
            submitters = await session.list_items(pods_path, label_selector=f"{keys.JOB_NAME}={name}")
            for pod in submitters:
                if _labels(pod).get(keys.RAY_NODE_TYPE) is None:
                    main = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name")
                    candidates.append((_meta(pod)["name"], str(main)))
        return candidates, waiting_for_head

    async def _ray_logs(self, session: KubeSession, ns: str, name: str, rayjob: Obj, options: LogOptions,
                        emit: Emit) -> None:
        """The Ray driver's output: the driver-log offload sidecar on the head pod, or KubeRay's submitter pod."""
        for _ in range(10_000):
            candidates, _waiting = await self._ray_sources(session, ns, name, rayjob, options)
            if candidates:
                pod_name, container = candidates[-1]
                if options.follow:
                    await self._follow(session, ns, pod_name, container, options, emit)
                    return
                try:
                    text = await session.text(api_path("v1", "pods", namespace=ns, name=pod_name, subresource="log"),
                                              query=_log_query(container, options, follow=False))
                except KubeApiError as exc:
                    if exc.status != 400:
                        raise
                    text = ""
                for line in text.splitlines():
                    await emit(line)
                return
            status = rayjob.get("status") or {}
            terminal = any(s in f"{status.get('jobDeploymentStatus')} {status.get('jobStatus')}".lower()
                           for s in ("succeed", "complete", "fail", "stop"))
            if not options.follow or terminal:
                raise NoLiveLogs(f"no Ray driver output available for {ns}/{name} yet",
                                    hint=_ray_hint(name, status, terminal))
            await anyio.sleep(self.poll_interval)
            fresh = await session.get(api_path(*RAYJOB_API, namespace=ns, name=name), missing_ok=True)
            if fresh is None:
                raise NotFoundError(f"RayJob {ns}/{name} was deleted while waiting for its driver output")
            rayjob = fresh


def _ray_hint(name: str, status: dict[str, Any], terminal: bool) -> str:
    if terminal:
        return ("the RayCluster is gone, and with it the driver output on the cluster; read it from your "
                "platform's central log store (Logs.ContainerLogs)")
    if not status.get("jobId"):
        return f"the RayJob has no Ray job id yet; check `tau run status {name}`"
    return "the driver has not started yet; follow it with `tau logs -f " + name + "`"


def _streams(pods: Sequence[Obj], options: LogOptions) -> list[tuple[str, str]]:
    """``(pod, container)`` pairs to read, per ``-c``/``--all-containers`` (default: each pod's main container)."""
    streams: list[tuple[str, str]] = []
    for pod in pods:
        pod_name = _meta(pod).get("name", "")
        spec = pod.get("spec") or {}
        declared = [c.get("name") for c in spec.get("initContainers") or []] + [
            c.get("name") for c in spec.get("containers") or []]
        if options.container:
            if options.container not in declared:
                raise NotFoundError(f"container \"{options.container}\" not found in pod {pod_name}",
                                    hint=f"containers: {', '.join(str(d) for d in declared)}")
            streams.append((pod_name, options.container))
        elif options.all_containers:
            streams.extend((pod_name, str(c)) for c in declared)
        else:
            main = (spec.get("containers") or [{}])[0].get("name")
            streams.append((pod_name, str(main)))
    return streams


def _started(pods: Sequence[Obj]) -> bool:
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            state = cs.get("state") or {}
            if state.get("running") or state.get("terminated"):
                return True
    return False


def _container_running(pod: Obj, container: str) -> bool:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container and (cs.get("state") or {}).get("running"):
            return True
    return False


def _container_started(pod: Obj, container: str) -> bool:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state") or {}
        if cs.get("name") == container and (state.get("running") or state.get("terminated")):
            return True
    return False


def _job_done(job: Obj) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def _log_query(container: str, options: LogOptions, *, follow: bool) -> dict[str, Any]:
    query: dict[str, Any] = {"container": container}
    if follow:
        query["follow"] = "true"
    if options.tail is not None and options.tail >= 0:
        query["tailLines"] = options.tail
    if options.previous:
        query["previous"] = "true"
    if options.timestamps:
        query["timestamps"] = "true"
    return query


def _prefixed(line: str, pod: str, container: str, prefix: bool) -> str:
    return f"[pod/{pod}/{container}] {line}" if prefix else line
