"""The backend's state and plumbing: options, one :class:`~tau_core.kube.KubeSession` per verb, the sync edge.

Every capability mixin of :class:`~tau_core.backends.kubernetes.KubernetesBackend` derives from
:class:`BackendSession`; a verb opens one session, does a bounded number of REST calls and closes it.
"""

from __future__ import annotations

import builtins
import os
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from tau_core.aio import iterate, run
from tau_core.kube import DEFAULT_SYSTEM_NAMESPACE, ENV_SYSTEM_NAMESPACE, KubeSession

from .objects import Obj


@dataclass
class BackendSession:
    """Jobs and RayJobs on one cluster.  ``context``/``kubeconfig`` select the cluster."""

    kubeconfig: str | None = None
    context: str | None = None
    system_namespace: str | None = None
    progress: Callable[[str], None] | None = None
    sleep: Callable[[float], None] = time.sleep
    poll_interval: float = 1.0
    evidence_grace: float = 5.0
    """Seconds a failed run with no evidence yet is re-read before it is reported as Unknown."""
    name: str = "kubernetes"
    last_requests: int = field(default=0, init=False)
    last_server: str = field(default="", init=False)
    last_context: str = field(default="", init=False)
    _dry_run_objects: builtins.list[Obj] = field(default_factory=list, init=False, repr=False)
    last_get: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def _say(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)

    @property
    def sys_namespace(self) -> str:
        return self.system_namespace or os.environ.get(ENV_SYSTEM_NAMESPACE) or DEFAULT_SYSTEM_NAMESPACE

    async def _session(self) -> KubeSession:
        return await KubeSession.connect(kubeconfig=self.kubeconfig, context=self.context or None)

    def _record(self, session: KubeSession) -> None:
        self.last_requests = session.requests
        self.last_server = session.server
        self.last_context = session.context

    async def _close(self, session: KubeSession) -> None:
        """Record the session's figures and close it, even while the verb is being cancelled (Ctrl-C, an
        early stop): the close is shielded so every connection is released before the loop goes away."""
        import anyio

        self._record(session)
        with anyio.CancelScope(shield=True):
            await session.close()

    def _run(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Run ``fn(session, *args)`` on a fresh session, from synchronous code."""
        async def main() -> Any:
            session = await self._session()
            try:
                return await fn(session, *args)
            finally:
                await self._close(session)

        return run(main)

    def _stream(self, fn: Callable[..., Awaitable[None]], *args: Any) -> Generator[Any, None, None]:
        """Items ``fn(session, *args, emit=...)`` emits, on a fresh session, from synchronous code."""
        async def producer(*, emit: Callable[[Any], Awaitable[None]]) -> None:
            session = await self._session()
            try:
                await fn(session, *args, emit=emit)
            finally:
                await self._close(session)

        return iterate(producer)
