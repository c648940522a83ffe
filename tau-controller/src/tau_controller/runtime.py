"""The controller process: kopf watches, a work queue per kind, health/metrics, optional leader election.

kopf runs embedded (``kopf.operator``), standalone (no peering objects), with only watch-event handlers: they
feed the read cache and map each event to the keys it concerns.  Nothing of kopf's own state is written to the
objects (no progress annotations, no kopf finalizer); the reconcilers own every write.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import kopf

from tau_controller import api
from tau_controller.api import Cache, Client, Kind
from tau_controller.context import Ctx
from tau_controller.leader import GatedSession, LeaderElector
from tau_controller.quota import reconcile_quota
from tau_controller.retrying import KINDS as RETRY_KINDS
from tau_controller.retrying import SWEEP as RETRY_SWEEP
from tau_controller.retrying import key_of as retry_key
from tau_controller.retrying import reconcile_retry
from tau_controller.serve import Metrics, Servers, parse_address
from tau_controller.workqueue import WorkQueue
from tau_controller.workspace import reconcile_workspace
from tau_core import keys
from tau_core.kube import ENV_KUBECONFIG, KubeSession

log = logging.getLogger("tau_controller")
SINGLETON = "cluster"
CLUSTER_RESYNC = 600.0

#: kinds kept in the read cache (everything watched except Nodes, read once per TauCluster reconcile)
CACHED: tuple[Kind, ...] = (api.WORKSPACE, api.TAU_CLUSTER, api.QUOTA_REQUEST, api.NAMESPACE, api.SERVICE_ACCOUNT,
                            api.ROLE, api.ROLE_BINDING, api.CLUSTER_ROLE_BINDING, api.LOCAL_QUEUE,
                            api.CLUSTER_QUEUE)
#: kinds whose events only matter to the TauCluster singleton
CLUSTER_TRIGGERS: tuple[Kind, ...] = (api.RESOURCE_FLAVOR, api.TOPOLOGY, api.WORKLOAD_PRIORITY_CLASS,
                                      api.PRIORITY_CLASS, api.ADMISSION_CHECK, api.MULTIKUEUE_CONFIG,
                                      api.MULTIKUEUE_CLUSTER)
OWNED: tuple[Kind, ...] = (api.SERVICE_ACCOUNT, api.ROLE, api.ROLE_BINDING, api.CLUSTER_ROLE_BINDING)


@dataclass
class Options:
    kubeconfig: str | None = None
    context: str | None = None
    system_namespace: str = "tau-system"
    namespace_scope: tuple[str, ...] = ()
    leader_elect: bool = False
    health_address: str = "127.0.0.1:8081"
    metrics_address: str = "127.0.0.1:8080"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str | None = None


Reconciler = Callable[[Ctx, str], Awaitable[float | None]]


class Controller:
    def __init__(self, options: Options, reconcilers: dict[str, Reconciler] | None = None) -> None:
        self.options = options
        self.metrics = Metrics()
        self.cache = Cache()
        self.reconcilers: dict[str, Reconciler] = reconcilers or default_reconcilers()
        self.queues = {kind: WorkQueue() for kind in self.reconcilers}
        self.ctx: Ctx | None = None
        self.servers: Servers | None = None
        self.ready = threading.Event()  # kopf is running (this replica reconciles)
        self.serving = threading.Event()  # health and metrics are up (a standby replica stops here)
        self.elector: Any = None
        self.lost_leadership = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._workspaces: set[str] = set()
        self._node_labels: dict[str, Any] = {}

    # -- lifecycle ------------------------------------------------------------------------------------------------
    async def run(self) -> None:
        opts = self.options
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        session = await open_session(GatedSession, opts)
        assert isinstance(session, GatedSession)
        self.ctx = Ctx(Client(session, self.cache, CACHED), opts.system_namespace,
                       server_side_retry="retry" in self.reconcilers, namespaces=tuple(opts.namespace_scope))
        self.servers = Servers(self.metrics, lambda: True)
        workers: list[asyncio.Task[None]] = []
        elector = None
        lease_session: KubeSession | None = None
        try:
            await self.servers.start(parse_address(opts.health_address, "--health-probe-bind-address"),
                                     parse_address(opts.metrics_address, "--metrics-bind-address"))
            self.serving.set()
            if opts.leader_elect:
                # the Lease has its own session; every other write passes the elector's gate
                lease_session = await open_session(KubeSession, opts)
                elector = self.elector = LeaderElector(lease_session, opts, self.metrics,
                                                       on_lost=self._leadership_lost)
                session.gate = elector.may_write
                if not await elector.acquire(self._stop):
                    return
            workers = [asyncio.create_task(self._worker(kind, fn), name=f"tau-{kind}")
                       for kind, fn in self.reconcilers.items()]
            if "cluster" in self.queues:
                self.queues["cluster"].add(SINGLETON)
            if "retry" in self.queues:
                self.queues["retry"].add(RETRY_SWEEP)  # finish resubmissions a stopped controller left halfway
            await kopf.operator(registry=self._registry(session), settings=self._settings(), standalone=True,
                                clusterwide=not opts.namespace_scope, namespaces=opts.namespace_scope,
                                stop_flag=self._stop, ready_flag=self.ready)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            for queue in self.queues.values():
                queue.close()
            if elector is not None:
                await elector.release()
            await self.servers.stop()
            await session.close()
            if lease_session is not None:
                await lease_session.close()

    def _leadership_lost(self) -> None:
        self.lost_leadership = True
        log.error("lost the leader Lease; stopping so that another replica takes over")
        if self._stop is not None:
            self._stop.set()

    def start_thread(self, timeout: float = 30.0, wait_ready: bool = True) -> Controller:
        """Run in a background thread (tests, benchmarks); returns once kopf is ready (or, with
        ``wait_ready=False``, once health and metrics are served, e.g. for a standby replica)."""
        errors: list[BaseException] = []

        def main() -> None:
            try:
                asyncio.run(self.run())
            except BaseException as exc:  # surfaced by start_thread/stop
                errors.append(exc)
                self.ready.set()
                self.serving.set()

        self._thread = threading.Thread(target=main, name="tau-controller", daemon=True)
        self._thread.start()
        if not (self.ready if wait_ready else self.serving).wait(timeout) or errors:
            self.stop()
            raise RuntimeError(f"the controller did not start: {errors[0]!r}" if errors else "controller start timeout")
        return self

    def stop(self, timeout: float = 30.0) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:
                pass
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    # -- work -----------------------------------------------------------------------------------------------------
    async def _worker(self, kind: str, fn: Reconciler) -> None:
        queue = self.queues[kind]
        assert self.ctx is not None
        while True:
            key = await queue.get()
            started, error = time.monotonic(), False
            try:
                requeue = await fn(self.ctx, str(key))
                queue.succeeded(key)
                if requeue is not None:
                    queue.add_after(key, requeue)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = True
                delay = queue.failed(key)
                log.warning("reconciling %s %s failed (retrying in %.2fs): %s", kind, key, delay, exc)
                queue.add_after(key, delay)
            finally:
                queue.done(key)
                self.metrics.observe(kind, started, error)

    def enqueue(self, kind: str, key: Hashable) -> None:
        queue = self.queues.get(kind)
        if queue is not None:
            queue.add(key)

    # -- kopf -----------------------------------------------------------------------------------------------------
    def _settings(self) -> kopf.OperatorSettings:
        settings = kopf.OperatorSettings()
        settings.peering.standalone = True
        settings.posting.enabled = False
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.watching.connect_timeout = 10
        settings.networking.request_timeout = 30
        return settings

    def _registry(self, session: KubeSession) -> kopf.OperatorRegistry:
        registry = kopf.OperatorRegistry()
        configuration = session._api.configuration

        def login(**_: Any) -> kopf.ConnectionInfo:
            return connection_info(configuration)

        kopf.on.login(registry=registry)(login)
        for kind, mapper in self._mappers().items():
            kopf.on.event(kind.group, kind.version, kind.plural, registry=registry, id=f"watch-{kind.plural}")(
                self._handler(kind, mapper))
        return registry

    def _handler(self, kind: Kind, mapper: Callable[[str | None, dict[str, Any]], Iterable[tuple[str, str]]]
                 ) -> Callable[..., Awaitable[None]]:
        cached = kind in CACHED

        async def on_event(event: Any, **_: Any) -> None:
            obj = event.get("object") or {}
            etype = event.get("type")
            meta = obj.get("metadata") or {}
            if cached:
                if etype == "DELETED":
                    self.cache.drop(kind, meta.get("namespace"), str(meta.get("name")))
                else:
                    self.cache.put(kind, obj)
            for queue, key in mapper(etype, obj):
                self.enqueue(queue, key)

        return on_event

    def _mappers(self) -> dict[Kind, Callable[[str | None, dict[str, Any]], Iterable[tuple[str, str]]]]:
        sysns = self.options.system_namespace
        out: dict[Kind, Callable[[str | None, dict[str, Any]], Iterable[tuple[str, str]]]] = {}

        def workspaces(etype: str | None, obj: dict[str, Any]) -> Iterable[tuple[str, str]]:
            meta = obj.get("metadata") or {}
            if meta.get("namespace") != sysns:
                log.debug("ignoring workspace outside system namespace: %s/%s", meta.get("namespace"),
                          meta.get("name"))
                return []
            name = str(meta.get("name"))
            if etype == "DELETED":
                self._workspaces.discard(name)
                return [("workspace", n) for n in sorted(self._workspaces)]  # a blocked one may be promoted
            self._workspaces.add(name)
            return [("workspace", name)]

        def by_label(etype: str | None, obj: dict[str, Any]) -> Iterable[tuple[str, str]]:
            owner = ((obj.get("metadata") or {}).get("labels") or {}).get(keys.WORKSPACE)
            return [("workspace", owner)] if owner else []

        def every_workspace(etype: str | None, obj: dict[str, Any]) -> Iterable[tuple[str, str]]:
            return [("cluster", SINGLETON), *(("workspace", n) for n in sorted(self._workspaces))]

        def tau_clusters(etype: str | None, obj: dict[str, Any]) -> Iterable[tuple[str, str]]:
            name = str((obj.get("metadata") or {}).get("name"))
            keys_ = [("workspace", n) for n in sorted(self._workspaces)]  # queue defaulting reads the singleton
            return [("cluster", name), *keys_] if etype != "DELETED" else keys_

        def singleton(etype: str | None, obj: dict[str, Any]) -> Iterable[tuple[str, str]]:
            return [("cluster", SINGLETON)]

        def local_queues(etype: str | None, obj: dict[str, Any]) -> Iterable[tuple[str, str]]:
            return [*by_label(etype, obj), ("cluster", SINGLETON)]

        def nodes(etype: str | None, obj: dict[str, Any]) -> Iterable[tuple[str, str]]:
            meta = obj.get("metadata") or {}
            name, labels = str(meta.get("name")), dict(meta.get("labels") or {})
            if etype == "DELETED":
                self._node_labels.pop(name, None)
                return singleton(etype, obj)
            if self._node_labels.get(name) == labels:
                return []  # heartbeats and status updates are not triggers
            self._node_labels[name] = labels
            return singleton(etype, obj)

        def quota(etype: str | None, obj: dict[str, Any]) -> Iterable[tuple[str, str]]:
            meta = obj.get("metadata") or {}
            return [("quota", str(meta.get("name")))] if meta.get("namespace") == sysns and etype != "DELETED" else []

        def workloads(etype: str | None, obj: dict[str, Any]) -> Iterable[tuple[str, str]]:
            key = retry_key(obj)  # deletions too: a run deleted halfway through its resubmission was cancelled
            return [("retry", key)] if key else []

        out[RETRY_KINDS["Job"]] = workloads
        out[RETRY_KINDS["RayJob"]] = workloads
        out[api.WORKSPACE] = workspaces
        out[api.TAU_CLUSTER] = tau_clusters
        out[api.CLUSTER_QUEUE] = every_workspace
        out[api.QUOTA_REQUEST] = quota
        out[api.NAMESPACE] = by_label
        out[api.LOCAL_QUEUE] = local_queues
        out[api.NODE] = nodes
        for kind in OWNED:
            out[kind] = by_label
        for kind in CLUSTER_TRIGGERS:
            out[kind] = singleton
        return out


async def open_session(cls: type[KubeSession], opts: Options) -> KubeSession:
    """``--kubeconfig``, else ``$KUBECONFIG``, else the pod's ServiceAccount (in a cluster), else
    ``~/.kube/config`` (controller-runtime's order); ``--context`` always means a kubeconfig."""
    if not (opts.kubeconfig or opts.context or os.environ.get(ENV_KUBECONFIG)):
        session = await cls.connect_in_cluster()
        if session is not None:
            log.info("connecting as the pod's ServiceAccount to %s", session.server)
            return session
    return await cls.connect(kubeconfig=opts.kubeconfig, context=opts.context)


def default_reconcilers() -> dict[str, Reconciler]:
    from tau_controller.cluster import reconcile_cluster

    return {"workspace": reconcile_workspace, "cluster": reconcile_cluster, "quota": reconcile_quota,
            "retry": reconcile_retry}


def connection_info(configuration: Any) -> kopf.ConnectionInfo:
    """kopf's credentials, from the kubernetes-asyncio Configuration tau_core's session loaded."""
    token = None
    for key in ("BearerToken", "authorization"):
        value = (configuration.api_key or {}).get(key)
        if value:
            prefix = (configuration.api_key_prefix or {}).get(key)
            token = str(value).split(" ", 1)[1] if str(value).lower().startswith("bearer ") else str(value)
            if prefix and prefix.lower() != "bearer":
                token = None
            break
    return kopf.ConnectionInfo(
        server=str(configuration.host), ca_path=configuration.ssl_ca_cert or None,
        insecure=not configuration.verify_ssl, token=token, username=configuration.username or None,
        password=configuration.password or None, certificate_path=configuration.cert_file or None,
        private_key_path=configuration.key_file or None)
