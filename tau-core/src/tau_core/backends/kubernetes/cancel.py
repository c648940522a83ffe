"""Stopping a run: delete its workload and headless Service, then wait for the object and its pods to go."""

from __future__ import annotations

import time

import anyio

from tau_core import keys
from tau_core.errors import NotFoundError, TauError
from tau_core.kube import KubeSession, api_path
from tau_core.lifecycle.base import RunRef

from .objects import JOB_API, RAYJOB_API, _meta, _path_of
from .status import Status


class Cancel(Status):
    async def cancel_async(self, session: KubeSession, ref: RunRef, wait: bool, timeout: float,
                           object_timeout: float = 30.0) -> str:
        """Delete the workload and its headless Service; with ``wait``, wait until the workload object is
        gone (``object_timeout``: Kueue's Workload cleanup) and then its pods (``timeout``: teardown)."""
        target = await self.resolve(session, ref)
        ns = target.namespace
        job, rayjob = await self._workload(session, ns, ref.name)
        if job is None and rayjob is None:
            raise NotFoundError(f"no Job or RayJob named \"{ref.name}\" in namespace {ns}",
                                hint="check the name with `tau run list`")
        cluster = ((rayjob or {}).get("status") or {}).get("rayClusterName")
        if rayjob is not None:
            await session.delete(api_path(*RAYJOB_API, namespace=ns, name=ref.name), propagation="Background")
        if job is not None:
            await session.delete(api_path(*JOB_API, namespace=ns, name=ref.name), propagation="Background")
        await session.delete(api_path("v1", "services", namespace=ns, name=f"{ref.name}-headless"))
        if not wait:
            return f"deleted {ns}/{ref.name}; teardown is incomplete and continues in the background"
        kind = "rayjob" if rayjob is not None else "job"
        await self._await_removed(session, _path_of(job or rayjob or {}, named=True), kind, ns, ref.name,
                                  object_timeout)
        selector = f"{keys.RAY_CLUSTER}={cluster}" if cluster else (
            f"controller-uid={_meta(job).get('uid')}" if job else f"{keys.JOB_NAME}={ref.name}")
        return await self._await_teardown(session, ns, ref.name, selector, timeout)

    async def _await_removed(self, session: KubeSession, path: str, kind: str, ns: str, name: str,
                             timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while await session.get(path, missing_ok=True) is not None:
            if time.monotonic() >= deadline:
                raise TauError(f"timed out after {timeout:g}s waiting for {kind} {ns}/{name} to be "
                               "removed", hint=f"inspect its finalizers: kubectl get {kind} {name} -n {ns} "
                                               f"--context {session.context} -o yaml")
            await anyio.sleep(self.poll_interval)

    async def _await_teardown(self, session: KubeSession, ns: str, name: str, selector: str, timeout: float) -> str:
        manual = f"kubectl delete pods -n {ns} -l {selector} --context {session.context}"
        deadline = time.monotonic() + timeout
        while True:
            pods = await session.list_items(api_path("v1", "pods", namespace=ns), label_selector=selector)
            if not pods:
                return f"cancelled {ns}/{name}; its pods are gone and Kueue released the quota"
            if time.monotonic() >= deadline:
                raise TauError(f"timed out after {timeout:g}s waiting for {ns}/{name} to tear down "
                               f"({len(pods)} pod(s) remain)", hint=f"remove them manually: {manual}")
            await anyio.sleep(self.poll_interval)

    def cancel(self, ref: RunRef, *, wait: bool = True, timeout: float = 720.0,
               object_timeout: float = 30.0) -> str:
        """Stop the run; returns the one-line account ``tau run cancel`` prints."""
        result: str = self._run(self.cancel_async, ref, wait, timeout, object_timeout)
        return result
