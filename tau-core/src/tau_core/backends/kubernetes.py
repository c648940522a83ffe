"""The ``kubernetes`` execution backend: Jobs and RayJobs submitted through Kueue.

Every verb opens one :class:`~tau_core.kube.KubeSession`, does a bounded number of plain REST
calls and closes it.  The synchronous methods implement :class:`tau_core.lifecycle.ExecutionBackend`;
each runs its async counterpart with :func:`tau_core.kube.run`.

Request budget of one ``status`` refresh (reference run-config-and-rendering §4.1): Job = GET job,
list Kueue Workloads, list pods, list events (4, +1 for ResourceClaims when pods reference any);
RayJob = GET job (404), GET rayjob, Workloads, pods, events (5, +1 for claims).  Namespace
discovery through the primary TauWorkspace adds one list when no namespace was given.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import json
import os
import posixpath
import re
import secrets
import shlex
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from tau_core import keys
from tau_core.classification import attempt_pod_events, settled, verdict
from tau_core.errors import ConflictError, NotFoundError, TauError, UsageError
from tau_core.kube import (
    DEFAULT_SYSTEM_NAMESPACE,
    ENV_SYSTEM_NAMESPACE,
    KubeApiError,
    KubeSession,
    WriteOutcomeUnknown,
    api_path,
    kubeconfig_paths,
)
from tau_core.kube import run as run_async
from tau_core.lifecycle.base import (
    ArtifactListing,
    FailureReason,
    LogOptions,
    RunRef,
    RunStatus,
    RunSummary,
    SubmitRequest,
    SubmitResult,
)
from tau_core.status_tree import Snapshot, failure_signature, phases, terminal_state

JOB_API = ("batch/v1", "jobs")
RAYJOB_API = ("ray.io/v1", "rayjobs")
WORKLOAD_API = ("kueue.x-k8s.io/v1beta2", "workloads")
WORKSPACE_API = (keys.API_VERSION, "workspaces")
CLAIM_API = ("resource.k8s.io/v1", "resourceclaims")
VISIBILITY_API = "visibility.kueue.x-k8s.io/v1beta1"
RETRY_ATTEMPT = keys.RETRY_ATTEMPT
RETRY_MAX = keys.RETRY_MAX
RETRY_REASON = keys.RETRY_REASON
DEFAULT_PRIORITY_CLASSES = ("taugrid-default", "taugrid-priority")
HELPER_IMAGE = "busybox:1.36.1@sha256:f9a104fddb33220ec80fc45a4e606c74aadf1ef7a3832eb0b05be9e90cd61f5f"
HELPER_MOUNT = "/tau-pvc"
GET_NOT_FOUND = "TAU_PVC_GET_NOT_FOUND"
GET_REFUSED = "TAU_PVC_GET_REFUSED"
LIST_COMPLETE = "TAU_PVC_LIST_COMPLETE"
PUBLISH_DIR = ".tau-artifacts"
PUBLISH_MARKER = ".tau-artifacts-complete"
LOG_OFFLOAD_CONTAINER = "ray-driver-log-offload"
Obj = dict[str, Any]


def _meta(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict((obj or {}).get("metadata") or {})


def _ann(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(_meta(obj).get("annotations") or {})


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(_meta(obj).get("labels") or {})


def new_submission_id() -> str:
    return secrets.token_hex(12)


# -- artifact paths ---------------------------------------------------------------------------

def safe_relative(path: str) -> str:
    """Validate an artifact path: relative, inside the result directory, no tricks.  Returns it normalized."""
    from tau_core.pathsafe import check_lengths
    from tau_core.pathsafe import shown as _shown

    shown = _shown(path)
    if "\x00" in path or any(ord(c) < 32 for c in path):
        raise UsageError(f"--artifact \"{shown}\" contains control characters", hint="pass a plain relative file path")
    if not path.strip():
        raise UsageError("--artifact must not be empty", hint="pass a path relative to the run's result directory")
    check_lengths(path, what="--artifact")
    if path.startswith("/") or path.startswith("~") or re.match(r"^[A-Za-z]:", path) or "\\" in path:
        raise UsageError(f"--artifact \"{shown}\" must be a relative path inside the result directory",
                         hint="drop the leading / (paths are relative to the run's result directory)")
    parts = path.split("/")
    if any(p == ".." for p in parts):
        raise UsageError(f"--artifact \"{shown}\" escapes the result directory",
                         hint="artifact paths may not contain '..'")
    if "->" in path or any(p.endswith("@") for p in parts):
        raise UsageError(f"--artifact \"{shown}\" looks like a symbolic link, which run get never follows",
                         hint="name the file the link points to, relative to the result directory")
    normalized = posixpath.normpath(path)
    if normalized in (".", "") or normalized.startswith("../"):
        raise UsageError(f"--artifact \"{shown}\" does not name anything inside the result directory")
    return normalized


def _clean_abs(path: str, flag: str) -> str:
    if "\x00" in path or not path.startswith("/"):
        raise UsageError(f"{flag} \"{path}\" must be an absolute container path",
                         hint="for example /data/<run>/results")
    if any(p == ".." for p in path.split("/")):
        raise UsageError(f"{flag} \"{path}\" must not contain '..'")
    return posixpath.normpath(path)


# -- the backend ------------------------------------------------------------------------------

@dataclass
class ResolvedTarget:
    namespace: str
    workspace: str | None = None
    queue: str | None = None


@dataclass
class KubernetesBackend:
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

    # -- plumbing ---------------------------------------------------------------------------
    def _say(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)

    @property
    def sys_namespace(self) -> str:
        return self.system_namespace or os.environ.get(ENV_SYSTEM_NAMESPACE) or DEFAULT_SYSTEM_NAMESPACE

    async def _session(self) -> KubeSession:
        return await KubeSession.connect(kubeconfig=self.kubeconfig, context=self.context or None)

    def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        async def main() -> Any:
            session = await self._session()
            try:
                return await fn(session, *args)
            finally:
                self.last_requests = session.requests
                self.last_server = session.server
                self.last_context = session.context
                await session.close()

        return run_async(main)

    # -- targeting --------------------------------------------------------------------------
    async def resolve(self, session: KubeSession, ref: RunRef) -> ResolvedTarget:
        """The namespace of ``ref``: explicit, else its TauWorkspace, else the cluster's primary workspace."""
        if ref.workspace:
            ws = await self._workspace(session, ref.workspace)
            ns = _workspace_namespace(ws)
            if ref.namespace and ref.namespace != ns:
                raise UsageError(f"namespace \"{ref.namespace}\" conflicts with TauWorkspace \"{ref.workspace}\" "
                                 f"target namespace \"{ns}\"", hint="drop -n, or pass the workspace's namespace")
            return ResolvedTarget(ns, ref.workspace, _workspace_queue(ws))
        if ref.namespace:
            return ResolvedTarget(ref.namespace)
        items = await session.list_items(api_path(*WORKSPACE_API, namespace=self.sys_namespace))
        primary = [w for w in items if _ann(w).get(keys.V0_PRIMARY_WORKSPACE) == "true"]
        chosen = primary[0] if len(primary) == 1 else (items[0] if len(items) == 1 else None)
        if chosen is None:
            if session.default_namespace:
                return ResolvedTarget(session.default_namespace)
            raise UsageError(
                "no namespace resolved for this workload: connect a workspace (see `tau workspace list`) "
                "or pass --namespace",
                hint=f"found {len(items)} TauWorkspace(s) in {self.sys_namespace} and none is marked primary")
        _require_ready(chosen)
        return ResolvedTarget(_workspace_namespace(chosen), _meta(chosen).get("name"), _workspace_queue(chosen))

    async def _workspace(self, session: KubeSession, name: str) -> Obj:
        ws = await session.get(api_path(*WORKSPACE_API, namespace=self.sys_namespace, name=name), missing_ok=True)
        if ws is None:
            raise NotFoundError(f"TauWorkspace \"{name}\" not found in namespace {self.sys_namespace}",
                                hint="list workspaces with `tau workspace list`, or pass --system-namespace")
        _require_ready(ws)
        return ws

    def resolve_namespace(self, ref: RunRef) -> ResolvedTarget:
        result: ResolvedTarget = self._run(self.resolve, ref)
        return result

    # -- reading a run ----------------------------------------------------------------------
    async def _workload(self, session: KubeSession, ns: str, name: str) -> tuple[Obj | None, Obj | None]:
        job = await session.get(api_path(*JOB_API, namespace=ns, name=name), missing_ok=True)
        if job is not None:
            return job, None
        rayjob = await session.get(api_path(*RAYJOB_API, namespace=ns, name=name), missing_ok=True)
        return None, rayjob

    async def snapshot(self, session: KubeSession, ns: str, name: str) -> Snapshot:
        job, rayjob = await self._workload(session, ns, name)
        snap = Snapshot(namespace=ns, name=name, job=job, rayjob=rayjob, now=datetime.now(UTC))
        workload = job or rayjob
        if workload is None:
            return snap
        specs = _collections(ns, name, snap)

        async def read(key: str) -> builtins.list[Obj]:
            path, labels = specs[key]
            result = await session.list(path, label_selector=labels)
            snap.versions[key] = str((result.get("metadata") or {}).get("resourceVersion") or "")
            return list(result.get("items") or [])

        snap.workloads, snap.pods, snap.events = await asyncio.gather(read("workloads"), read("pods"),
                                                                       read("events"))
        await self._queue_positions(session, ns, snap)
        claimed = any((p.get("spec") or {}).get("resourceClaims") for p in snap.pods)
        if claimed:
            try:
                snap.claims = await session.list_items(api_path(*CLAIM_API, namespace=ns))
            except KubeApiError:
                snap.claims = []
        return snap

    async def settle(self, session: KubeSession, snap: Snapshot) -> Snapshot:
        """The snapshot to classify a failed run by: re-read while it failed with no evidence yet.

        Each object reaches a client on its own watch (and the scheduler's Events asynchronously), so a
        Job can read ``Failed`` before its pod's ``DisruptionTarget`` or the ``Preempted`` Event is visible.
        Fresh lists are read every quarter second for at most ``evidence_grace`` seconds; pods that
        vanish in between are kept as ``departed`` evidence.
        """
        deadline = time.monotonic() + self.evidence_grace
        uid = _meta(snap.workload).get("uid")
        while True:
            terminal, succeeded = terminal_state(snap)
            if not terminal or succeeded or settled(snap, verdict(snap)) or time.monotonic() >= deadline:
                return snap
            await asyncio.sleep(0.25)
            fresh = await self.snapshot(session, snap.namespace, snap.name)
            if _meta(fresh.workload).get("uid") != uid:
                return snap  # replaced meanwhile (a retry or a resubmit): keep what was read
            live = {_meta(p).get("uid") for p in fresh.pods}
            fresh.departed = [p for p in [*snap.departed, *snap.pods] if _meta(p).get("uid") not in live]
            snap = fresh

    async def _queue_positions(self, session: KubeSession, ns: str, snap: Snapshot) -> None:
        """Positions of pending Workloads from Kueue's visibility API (one read, only while pending)."""
        pending = [w for w in snap.workloads if not any(
            c.get("type") in ("QuotaReserved", "Admitted", "Finished") and c.get("status") == "True"
            for c in (w.get("status") or {}).get("conditions") or [])]
        queues = {str((w.get("spec") or {}).get("queueName") or "") for w in pending} - {""}
        if not pending or len(queues) != 1:
            return
        try:
            found = await session.get(api_path(VISIBILITY_API, "localqueues", namespace=ns, name=queues.pop(),
                                               subresource="pendingworkloads"))
        except (KubeApiError, OSError):
            return  # the server does not expose Kueue's visibility API (or we may not read it)
        for item in (found or {}).get("items") or []:
            name = (item.get("metadata") or {}).get("name")
            position = item.get("positionInLocalQueue")
            if name and isinstance(position, int):
                snap.positions[str(name)] = position

    def _status_from(self, ref: RunRef, snap: Snapshot, target: ResolvedTarget, server: str,
                     context: str) -> RunStatus:
        snap.events = _relevant_events(snap)
        tree = phases(snap)
        terminal, succeeded = terminal_state(snap)
        workload = snap.workload
        ann = _ann(workload)
        attempt = int(ann[RETRY_ATTEMPT]) if ann.get(RETRY_ATTEMPT, "").isdigit() else None
        max_attempts = int(ann[RETRY_MAX]) if ann.get(RETRY_MAX, "").isdigit() else None
        found = verdict(snap) if terminal and not succeeded else None
        failure = found.reason if found else None
        queue = _labels(workload).get(keys.KUEUE_QUEUE_NAME) or target.queue
        message = ""
        if workload is None:
            message = f"no Job or RayJob named \"{ref.name}\" in namespace {snap.namespace}"
        elif terminal:
            message = "succeeded" if succeeded else f"failed ({failure.value if failure else 'Unknown'})"
        st = RunStatus(
            ref=RunRef(ref.name, "kubernetes", snap.namespace, context, target.workspace),
            kind=snap.kind or "unknown", phases=tree, terminal=terminal, succeeded=succeeded,
            failure=failure, attempt=attempt if attempt else None, max_attempts=max_attempts if attempt else None,
            message=message,
        )
        st.extra = {
            "namespace": snap.namespace,
            "context": context,
            "server": server,
            "queue": queue,
            "workspace": target.workspace,
            "exists": workload is not None,
            "config_hash": ann.get(keys.CONFIG_HASH),
            "submission_id": ann.get(keys.SUBMISSION_ID),
            "retry_reason": ann.get(RETRY_REASON),
            "failure_evidence": found.evidence if found else None,
            "retry_owner": ann.get(keys.RETRY_OWNER),
            "retry_pending": _pending_retry(workload, terminal=terminal, succeeded=succeeded, failure=failure,
                                            now=snap.now),
            "pods": [_pod_summary(p) for p in snap.pods],
            "workloads": [_meta(w).get("name") for w in snap.workloads],
            "diagnostic_commands": diagnostic_commands(snap, context, self.kubeconfig),
        }
        return st

    async def status_async(self, session: KubeSession, ref: RunRef, target: ResolvedTarget | None = None,
                           run_profile: bool = False) -> RunStatus:
        target = target or await self.resolve(session, ref)
        snap = await self.settle(session, await self.snapshot(session, target.namespace, ref.name))
        status = self._status_from(ref, snap, target, session.server, session.context)
        if run_profile and snap.workload is not None:
            from tau_core.run_profile import run_profile as profile_of

            status.extra["run_profile"] = await profile_of(session, snap)
        return status

    def status(self, ref: RunRef, *, run_profile: bool = False) -> RunStatus:
        result: RunStatus = self._run(self.status_async, ref, None, run_profile)
        return result

    def watch_status(self, ref: RunRef, *, interval: float = 2.0, max_iterations: int = 0,
                     run_profile: bool = False) -> Iterator[RunStatus]:
        """Status frames while the run changes: one full read, then a frame per observed change.

        After the first read, changes arrive through watch streams on the workload, its pods, its
        Kueue Workloads and the namespace's events, and update an in-memory copy: a quiet run costs
        no API requests, and a busy one at most one frame per ``interval`` seconds.
        """
        frames = 0
        for status in _iterate(self._watch_gen, ref, interval, run_profile):
            frames += 1
            yield status
            if status.terminal or (max_iterations and frames >= max_iterations):
                return

    async def _watch_gen(self, ref: RunRef, interval: float,
                         run_profile: bool = False) -> AsyncGenerator[RunStatus, None]:
        session = await self._session()
        try:
            target = await self.resolve(session, ref)
            ns = target.namespace
            last_key: str | None = None
            while True:
                snap = await self.snapshot(session, ns, ref.name)
                uid = _meta(snap.workload).get("uid")
                cache = _Cache.from_snapshot(snap)
                changed = asyncio.Event()
                tasks = [asyncio.ensure_future(self._informer(session, cache, key, path, labels, fields, changed))
                         for key, (path, labels, fields) in _watch_specs(ns, ref.name, snap).items()]
                try:
                    while True:
                        current = cache.snapshot(snap)
                        if terminal_state(current)[0]:
                            current = await self.settle(session, current)
                        status = self._status_from(ref, current, target, session.server, session.context)
                        key = json.dumps([[p.name, p.state, p.detail] for p in status.phases]
                                         + [status.terminal, status.attempt], default=str)
                        if key != last_key:
                            last_key = key
                            if run_profile and current.workload is not None:
                                from tau_core.run_profile import run_profile as profile_of

                                status.extra["run_profile"] = await profile_of(session, current)
                            self.last_requests = session.requests
                            yield status
                        if status.terminal:
                            return
                        await changed.wait()
                        changed.clear()
                        if _meta(cache.workload()).get("uid") != uid or cache.restart:
                            break  # a new workload (retry, resubmit) or a lost watch: read everything again
                        await asyncio.sleep(interval)
                finally:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            self.last_requests = session.requests
            await session.close()

    async def _informer(self, session: KubeSession, cache: _Cache, key: str, path: str, labels: str | None,
                        fields: str | None, changed: asyncio.Event) -> None:
        """Keep ``cache[key]`` current from a watch stream, reconnecting from the last seen version."""
        failures = 0
        while True:
            try:
                async for event in session.watch(path, label_selector=labels, field_selector=fields,
                                                 resource_version=cache.versions.get(key) or None,
                                                 timeout_seconds=300):
                    failures = 0
                    if cache.apply(key, event):
                        changed.set()
            except KubeApiError as exc:
                if exc.status == 410:
                    cache.restart = True  # our version is too old: start over with fresh lists
                    changed.set()
                    return
                failures += 1
            except (TimeoutError, OSError):
                failures += 1
            if failures > 5:
                cache.restart = True
                changed.set()
                return
            await asyncio.sleep(min(5.0, 0.2 * (2 ** failures)))

    # -- list -------------------------------------------------------------------------------
    async def list_async(self, session: KubeSession, namespace: str | None, queue: str | None,
                         include_external: bool, workspace: str | None = None) -> builtins.list[RunSummary]:
        target = await self.resolve(session, RunRef("", namespace=namespace, workspace=workspace))
        ns = target.namespace
        selector = None if include_external else f"{keys.MANAGED_BY}={keys.MANAGED_BY_VALUE}"
        jobs, rayjobs = await asyncio.gather(
            session.list_items(api_path(*JOB_API, namespace=ns), label_selector=selector),
            _optional_list(session, api_path(*RAYJOB_API, namespace=ns), selector),
        )
        rows: builtins.list[RunSummary] = []
        for obj, kind in [(j, "Job") for j in jobs] + [(r, "RayJob") for r in rayjobs]:
            meta = _meta(obj)
            owners = meta.get("ownerReferences") or []
            if kind == "Job" and any(o.get("kind") in ("RayJob", "RayCluster") for o in owners):
                continue  # KubeRay's submitter Jobs belong to their RayJob
            labels = _labels(obj)
            q = labels.get(keys.KUEUE_QUEUE_NAME)
            if queue and q != queue:
                continue
            external = labels.get(keys.MANAGED_BY) != keys.MANAGED_BY_VALUE
            rows.append(RunSummary(RunRef(meta.get("name", ""), "kubernetes", ns, session.context, target.workspace),
                                   kind, _summary_state(obj, kind), q, meta.get("creationTimestamp"), external))
        rows.sort(key=lambda r: r.created or "", reverse=True)
        return rows

    def list(self, *, namespace: str | None = None, queue: str | None = None,
             include_external: bool = False, workspace: str | None = None) -> builtins.list[RunSummary]:
        result: builtins.list[RunSummary] = self._run(self.list_async, namespace, queue, include_external, workspace)
        return result

    # -- submit -----------------------------------------------------------------------------
    async def submit_async(self, session: KubeSession, request: SubmitRequest) -> SubmitResult:
        if not request.objects:
            raise TauError(f"nothing to submit for run {request.name}: the renderer produced no objects")
        objects = [json.loads(json.dumps(o)) for o in request.objects]
        workload = objects[0]
        ns = _meta(workload).get("namespace") or ""
        if not ns or ns.startswith("<"):
            raise UsageError("no namespace resolved for this workload: connect a workspace (see `tau workspace "
                             "list`) or pass --namespace")
        submission_id = _ann(workload).get(keys.SUBMISSION_ID) or request.submission_id or new_submission_id()
        for obj in objects:
            obj.setdefault("metadata", {}).setdefault("annotations", {})[keys.SUBMISSION_ID] = submission_id
            obj["metadata"].setdefault("namespace", ns)
        dry_run = str(request.context.get("dry_run") or "") == "server"
        await self._preflight_secrets(session, ns, objects)
        await self._preflight_priorities(session, request, objects)
        if dry_run:
            out = [await session.create(_path_of(o), o, dry_run=True) for o in objects]
            self._dry_run_objects = out
            from tau_core.output import to_yaml

            text = "\n".join("---\n" + to_yaml(o).rstrip("\n") for o in out)
            return SubmitResult(RunRef(request.name, "kubernetes", ns, session.context), created=False,
                                message=f"server dry-run of {request.name} (ns={ns}); the API server accepted:\n"
                                        + text)
        kind = workload.get("kind", "")
        created_obj, created = await self._create_once(session, workload, submission_id)
        try:
            for obj in objects[1:]:
                await self._create_once(session, obj, submission_id)
        except BaseException:
            if created:
                await session.delete(_path_of(workload, named=True), propagation="Foreground",
                                     uid=_meta(created_obj).get("uid"))
            raise
        noun = "rayjob" if kind == "RayJob" else "job"
        profile = _labels(workload).get(keys.PROFILE)
        what = f"profile={profile}" if profile and kind == "Job" else f"kind={noun}"
        message = (f"submitted {request.name} ({what}, ns={ns})" if created
                   else f"recovered {request.name} from an earlier attempt of the same submission (ns={ns})")
        return SubmitResult(RunRef(request.name, "kubernetes", ns, session.context), created=created, message=message)

    async def _create_once(self, session: KubeSession, obj: Obj, submission_id: str) -> tuple[Obj, bool]:
        """Create ``obj``; a retried or repeated create of the same submission recovers the existing object."""
        path = _path_of(obj)
        attempts = 0
        while True:
            attempts += 1
            try:
                return await session.create(path, obj), True
            except WriteOutcomeUnknown:
                if attempts >= 3:
                    raise
                await asyncio.sleep(0.2 * attempts)
                continue  # safe: a second create of the same submission meets AlreadyExists below
            except KubeApiError as exc:
                if not exc.already_exists:
                    raise
            existing = await session.get(_path_of(obj, named=True), missing_ok=True)
            if existing is None:
                continue
            if _ann(existing).get(keys.SUBMISSION_ID) == submission_id:
                return existing, False
            meta = _meta(obj)
            resource = f"{obj.get('kind', '').lower()}"
            raise ConflictError(
                f"{resource} {meta.get('namespace')}/{meta.get('name')} already exists from another submission; "
                "refusing to reuse it for this tau run",
                hint=f"choose a distinct config name, cancel the existing workload with `tau run cancel "
                     f"{meta.get('name')}`, or use `tau run resume {meta.get('name')} --config ...` when explicitly "
                     "replacing a failed run")

    async def _preflight_secrets(self, session: KubeSession, ns: str, objects: Sequence[Obj]) -> None:
        names: builtins.list[str] = []
        shipped = {_meta(o).get("name") for o in objects if o.get("kind") == "Secret"}  # created with the run
        for obj in objects:
            for c in _all_containers(obj):
                for env in c.get("env") or []:
                    ref = ((env.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name")
                    if ref and ref not in names and ref not in shipped:
                        names.append(ref)
                for src in c.get("envFrom") or []:
                    ref = (src.get("secretRef") or {}).get("name")
                    if ref and ref not in names:
                        names.append(ref)
        for secret in names:
            try:
                found = await session.get(api_path("v1", "secrets", namespace=ns, name=secret), missing_ok=True)
            except KubeApiError as exc:
                if exc.status == 403:
                    continue  # the researcher may not read Secrets; the kubelet will report a missing one
                raise
            if found is None:
                raise NotFoundError(f"required Secret {ns}/{secret} does not exist",
                                    hint="ask your platform team to create it, or fix runtime.env_secret")

    async def _preflight_priorities(self, session: KubeSession, request: SubmitRequest,
                                    objects: builtins.list[Obj]) -> None:
        policy = dict(request.config.get("policy") or {})
        explicit = {policy.get("workload_priority_class"), policy.get("pod_priority_class")}
        profile = request.context.get("workload_profile") or {}
        if isinstance(profile, Mapping) and profile.get("priorities"):
            return  # classes chosen by the authoritative workload profile are never dropped
        workload = objects[0]
        wpc = _labels(workload).get(keys.KUEUE_PRIORITY_CLASS)
        pcs = {t.get("priorityClassName") for t in _pod_specs(workload)} - {None}
        candidates = [c for c in {wpc, *pcs} if c in DEFAULT_PRIORITY_CLASSES and c not in explicit]
        if not candidates:
            return
        missing: builtins.list[str] = []
        for cls in sorted(set(candidates)):
            for api, plural, what in (("kueue.x-k8s.io/v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass"),
                                      ("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass")):
                try:
                    if await session.get(api_path(api, plural, name=cls), missing_ok=True) is None:
                        missing.append(f"{what} {cls}")
                except KubeApiError:
                    continue  # cannot verify (RBAC); keep the defaults
        if not missing:
            return
        from tau_core.output import warning

        warning(f"cluster is missing {', '.join(missing)}; omitting Tau default priority classes for this run "
                "(set policy.disable_default_priorities: true to make this explicit)")
        _labels_ref(workload).pop(keys.KUEUE_PRIORITY_CLASS, None)
        for spec in _pod_specs(workload):
            if spec.get("priorityClassName") in DEFAULT_PRIORITY_CLASSES:
                spec.pop("priorityClassName", None)

    def submit(self, request: SubmitRequest) -> SubmitResult:
        """Create the run; with ``resilience.max_retries > 0`` (and no dry run) also wait and retry it.

        Automatic retry (reference run-config-and-rendering §4.3) belongs to submission: the command
        that submitted the run waits for a terminal state, classifies a failure and resubmits while
        ``retry_on`` and the budget allow.  Interrupting the wait loses nothing: the run continues and
        its attempt count lives on the workload.
        """
        dry_run = str(request.context.get("dry_run") or "")
        if dry_run or not request.context.get("auto_retry", True):
            result: SubmitResult = self._run(self.submit_async, request)
            return result
        from tau_core.backends import retry_owner
        from tau_core.retry import RetryPolicy

        policy = RetryPolicy.from_config(request.name, request.config)
        owner = self._run(retry_owner.read_owner) if policy.enabled and request.objects else None
        if owner is not None:
            retry_owner.stamp(request.objects[0], owner, policy)
        result = self._run(self.submit_async, request)
        if owner == retry_owner.OWNER_CONTROLLER:
            from tau_core.output import info

            retry_owner.follow(self, result.ref, policy, self.progress or info)
        elif policy.enabled:
            self.supervise(result.ref, request, policy)
        return result

    def supervise(self, ref: RunRef, request: SubmitRequest, policy: Any) -> RunStatus:
        """Wait for ``ref`` to finish and retry it per ``policy``; raises TauError when it finally fails."""
        from tau_core.output import info

        say = self.progress or info
        where = f"{ref.namespace}/{ref.name}"
        say(f"submitted {where}; waiting for it to finish (automatic retry: up to {policy.max_retries} on "
            f"{', '.join(policy.retry_on)}). Ctrl-C stops waiting, not the run.")
        try:
            while True:
                st = self.wait(ref)
                where = f"{st.ref.namespace}/{st.ref.name}"
                attempt = st.attempt or 0
                if st.succeeded:
                    say(f"workload {where} completed successfully")
                    if attempt:
                        self.record_retry_outcome(ref, outcome="succeeded", attempt=attempt,
                                                  max_retries=policy.max_retries,
                                                  reason=_reason(st.extra.get("retry_reason")))
                    return st
                reason = st.failure or FailureReason.UNKNOWN
                if not policy.allows(reason):
                    listed = ", ".join(policy.retry_on)
                    raise TauError(f"workload {where} failed ({reason.value}) — not in retry_on list [{listed}]",
                                   hint=f"inspect it with `tau run status {ref.name}` and `tau logs {ref.name}`")
                attempt += 1
                if attempt > policy.max_retries:
                    self.record_retry_outcome(ref, outcome="exhausted", attempt=attempt - 1,
                                              max_retries=policy.max_retries, reason=reason)
                    raise TauError(f"workload {where} exhausted all {policy.max_retries} retries "
                                   f"(last failure: {reason.value})",
                                   hint="if it keeps failing the same way, check the cluster with "
                                        "`tau cluster validate nodes` before resubmitting")
                delay = policy.backoff(attempt)
                say(f"attempt {attempt}/{policy.max_retries} failed ({reason.value}) — retrying in {delay:g}s")
                self.sleep(delay)
                with _deferred_interrupts():
                    self.retry(ref, request, attempt=attempt, reason=reason)
        except KeyboardInterrupt:
            raise TauError(f"interrupted while waiting for {where}; it keeps running and its retry count is kept "
                           "on the workload", hint=f"follow it with `tau run status {ref.name} --watch`",
                           exit_code=130) from None

    def wait(self, ref: RunRef) -> RunStatus:
        """Block until the run is terminal (watch-driven: no polling)."""
        last: RunStatus | None = None
        while last is None or not last.terminal:
            for st in self.watch_status(ref, interval=0.0):
                last = st
                if st.terminal:
                    break
            if last is not None and not last.extra.get("exists"):
                raise NotFoundError(f"{ref.namespace}/{ref.name} disappeared while waiting for it",
                                    hint="it was deleted (cancelled?); nothing is retried")
        return last

    def server_dry_run(self, request: SubmitRequest) -> builtins.list[Obj]:
        """The objects as the API server would store them (``--dry-run=server``), without creating them."""
        req = SubmitRequest(request.name, request.config, request.objects, {**request.context, "dry_run": "server"},
                            request.config_path, request.config_hash, request.submission_id, request.extra_env)
        self._dry_run_objects = []
        self.submit(req)
        return list(self._dry_run_objects)

    # -- cancel -----------------------------------------------------------------------------
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
        selector = f"{keys.RAY_CLUSTER}={cluster}" if cluster else (
            f"controller-uid={_meta(job).get('uid')}" if job else f"{keys.JOB_NAME}={ref.name}")
        manual = f"kubectl delete pods -n {ns} -l {selector} --context {session.context}"
        workload_path = _path_of(job or rayjob or {}, named=True)
        deadline = time.monotonic() + object_timeout
        while await session.get(workload_path, missing_ok=True) is not None:
            if time.monotonic() >= deadline:
                kind = "rayjob" if rayjob is not None else "job"
                raise TauError(f"timed out after {object_timeout:g}s waiting for {kind} {ns}/{ref.name} to be "
                               "removed", hint=f"inspect its finalizers: kubectl get {kind} {ref.name} -n {ns} "
                                               f"--context {session.context} -o yaml")
            await asyncio.sleep(self.poll_interval)
        deadline = time.monotonic() + timeout
        while True:
            pods = await session.list_items(api_path("v1", "pods", namespace=ns), label_selector=selector)
            if not pods:
                return f"cancelled {ns}/{ref.name}; its pods are gone and Kueue released the quota"
            if time.monotonic() >= deadline:
                raise TauError(f"timed out after {timeout:g}s waiting for {ns}/{ref.name} to tear down "
                               f"({len(pods)} pod(s) remain)", hint=f"remove them manually: {manual}")
            await asyncio.sleep(self.poll_interval)

    def cancel(self, ref: RunRef, *, wait: bool = True, timeout: float = 720.0) -> None:
        self._say(self._run(self.cancel_async, ref, wait, timeout))

    def cancel_message(self, ref: RunRef, *, wait: bool = True, timeout: float = 720.0,
                       object_timeout: float = 30.0) -> str:
        result: str = self._run(self.cancel_async, ref, wait, timeout, object_timeout)
        return result

    # -- logs -------------------------------------------------------------------------------
    def logs(self, ref: RunRef, options: LogOptions) -> Iterator[str]:
        """Lines of the run's logs (Job pods, or a RayJob's driver output)."""
        return _iterate(self._logs_gen, ref, options)

    async def _logs_gen(self, ref: RunRef, options: LogOptions) -> AsyncGenerator[str, None]:
        session = await self._session()
        try:
            target = await self.resolve(session, ref)
            ns = target.namespace
            job, rayjob = await self._workload(session, ns, ref.name)
            if rayjob is not None:
                if options.container or options.all_containers or options.previous or options.timestamps \
                        or options.prefix:
                    raise UsageError("container selection, --previous, --timestamps, and --prefix are supported "
                                     f"only for batch/v1 Job logs; {ref.name} is a RayJob")
                async for line in self._ray_logs(session, ns, ref.name, rayjob, options):
                    yield line
                return
            async for line in self._job_logs(session, ns, ref.name, job, options):
                yield line
        finally:
            self.last_requests = session.requests
            await session.close()

    async def _job_logs(self, session: KubeSession, ns: str, name: str, job: Obj | None,
                        options: LogOptions) -> AsyncIterator[str]:
        selector = f"controller-uid={_meta(job).get('uid')}" if job else f"job-name={name}"
        pods_path = api_path("v1", "pods", namespace=ns)
        pods = await session.list_items(pods_path, label_selector=selector)
        while options.follow and job is not None and not _started(pods):
            if _job_done(job):
                break
            await asyncio.sleep(self.poll_interval)
            pods = await session.list_items(pods_path, label_selector=selector)
            job = await session.get(api_path(*JOB_API, namespace=ns, name=name), missing_ok=True)
            if job is None:
                break
        if not pods:
            raise NotFoundError(
                f"no logs found for run \"{name}\" in namespace {ns}; it may not exist or may not have started",
                hint=f"run `tau run list -n {ns}` or `tau run status {name}`")
        pods.sort(key=lambda p: _meta(p).get("creationTimestamp") or "")
        streams: builtins.list[tuple[str, str]] = []
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
        multi = len(streams) > 1
        if options.follow:
            async for line in _merge([self._stream(session, ns, p, c, options, multi) for p, c in streams]):
                yield line
            return
        for pod_name, container in streams:
            query = _log_query(container, options, follow=False)
            try:
                text = await session.text(api_path("v1", "pods", namespace=ns, name=pod_name, subresource="log"),
                                          query=query)
            except KubeApiError as exc:
                if exc.status == 400:
                    continue  # the container has not started yet: nothing to show
                raise
            for line in text.splitlines():
                yield _prefixed(line, pod_name, container, options.prefix)

    async def _stream(self, session: KubeSession, ns: str, pod: str, container: str, options: LogOptions,
                      multi: bool) -> AsyncIterator[str]:
        """Follow one container's log.  A stream that ends before its first line while the container
        still runs (a quiet start, an idle-timeout proxy) is opened again; after output, its end is the end."""
        path = api_path("v1", "pods", namespace=ns, name=pod, subresource="log")
        pod_path = api_path("v1", "pods", namespace=ns, name=pod)
        for _ in range(100_000):
            got = 0
            try:
                async for line in session.stream_lines(path, query=_log_query(container, options, follow=True)):
                    got += 1
                    yield _prefixed(line, pod, container, options.prefix)
            except KubeApiError as exc:
                if exc.status != 400:
                    raise
                await asyncio.sleep(self.poll_interval)  # waiting to start
                continue
            if got:
                return
            current = await session.get(pod_path, missing_ok=True)
            if current is None or not _container_running(current, container):
                return
            await asyncio.sleep(self.poll_interval)

    async def _ray_logs(self, session: KubeSession, ns: str, name: str, rayjob: Obj,
                        options: LogOptions) -> AsyncIterator[str]:
        """The Ray driver's output: the driver-log offload sidecar on the head pod, or KubeRay's submitter pod."""
        pods_path = api_path("v1", "pods", namespace=ns)
        for _ in range(10_000):
            status = rayjob.get("status") or {}
            cluster = status.get("rayClusterName")
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
                submitters = [p for p in submitters if _labels(p).get(keys.RAY_NODE_TYPE) is None]
                for pod in submitters:
                    main = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name")
                    candidates.append((_meta(pod)["name"], str(main)))
            if candidates:
                pod_name, container = candidates[-1]
                if options.follow:
                    async for line in self._stream(session, ns, pod_name, container, options, False):
                        yield line
                    return
                try:
                    text = await session.text(api_path("v1", "pods", namespace=ns, name=pod_name, subresource="log"),
                                              query=_log_query(container, options, follow=False))
                except KubeApiError as exc:
                    if exc.status != 400:
                        raise
                    text = ""
                for line in text.splitlines():
                    yield line
                return
            terminal = any(s in f"{status.get('jobDeploymentStatus')} {status.get('jobStatus')}".lower()
                           for s in ("succeed", "complete", "fail", "stop"))
            if not options.follow or terminal:
                hint = ("the driver has not started yet; follow it with `tau logs -f " + name + "`"
                        if not terminal else "the RayCluster is gone, and with it the driver output on the "
                        "cluster; read it from your platform's central log store (Logs.ContainerLogs)")
                if not status.get("jobId") and not terminal:
                    hint = f"the RayJob has no Ray job id yet; check `tau run status {name}`"
                raise NotFoundError(f"no Ray driver output available for {ns}/{name} yet", hint=hint)
            await asyncio.sleep(self.poll_interval)
            fresh = await session.get(api_path(*RAYJOB_API, namespace=ns, name=name), missing_ok=True)
            if fresh is None:
                raise NotFoundError(f"RayJob {ns}/{name} was deleted while waiting for its driver output")
            rayjob = fresh

    # -- get --------------------------------------------------------------------------------
    def get(self, ref: RunRef, artifact: str | None = None, *, path: str | None = None,
            pvc: str | None = None) -> ArtifactListing | bytes:
        """Results of a run from its result PVC, read through a short-lived helper pod."""
        rel = safe_relative(artifact) if artifact is not None else None
        if (path is None) != (pvc is None):
            raise UsageError("pass both --path and --pvc (for deleted or external workloads), or neither")
        if path is not None:
            path = _clean_abs(path, "--path")
        self.last_get = {}
        result: ArtifactListing | bytes = self._run(self._get_async, ref, rel, path, pvc)
        return result

    async def _get_async(self, session: KubeSession, ref: RunRef, rel: str | None, path: str | None,
                         pvc: str | None) -> ArtifactListing | bytes:
        target = await self.resolve(session, ref)
        ns = target.namespace
        root = path
        publication = None
        if root is None:
            job, rayjob = await self._workload(session, ns, ref.name)
            workload = job or rayjob
            if workload is None:
                raise NotFoundError(f"no Job or RayJob named \"{ref.name}\" in namespace {ns}",
                                    hint="for a deleted or external workload pass both --path and --pvc")
            ann = _ann(workload)
            root, pvc = ann.get(keys.RESULT_PATH), ann.get(keys.RESULT_PVC)
            self.last_get["checkpoint"] = ann.get(keys.CHECKPOINT_ARTIFACT)
            if not root or not pvc:
                raise NotFoundError(f"{ref.name} declares no durable result location (storage.output on a PVC)",
                                    hint="pass both --path and --pvc to read a known PVC path")
            root = _clean_abs(root, keys.RESULT_PATH)
            if ann.get(keys.ARTIFACT_PUBLICATION) == "staged":
                publication = ann.get(keys.ARTIFACT_PUBLICATION_ID)
        assert root is not None and pvc is not None
        base = root
        if publication:
            marker_dir = posixpath.join(root, PUBLISH_DIR, publication)
            try:
                marker: ArtifactListing | bytes | None = await self._helper(
                    session, ns, ref.name, pvc, "file", posixpath.join(marker_dir, PUBLISH_MARKER), root)
            except NotFoundError:
                marker = None
            if not isinstance(marker, bytes) or marker.decode("utf-8", "replace").strip() != f"complete {publication}":
                raise NotFoundError(
                    f"the staged results of {ref.name} are not published yet (publication {publication} has no "
                    "completion marker)",
                    hint=f"wait for the run to finish (`tau run status {ref.name}`); a failed run publishes nothing")
            base = marker_dir
        target_path = posixpath.join(base, rel) if rel else base
        is_file = rel is not None and posixpath.splitext(rel)[1] != ""
        self.last_get.update({"path": target_path, "pvc": pvc})
        return await self._helper(session, ns, ref.name, pvc, "file" if is_file else "list", target_path, base)

    async def _helper(self, session: KubeSession, ns: str, run: str, pvc: str, mode: str, target: str,
                      root: str) -> ArtifactListing | bytes:
        """Run a one-shot helper pod that reads ``target`` (inside ``root``) from ``pvc``; always delete it."""
        pod_name = f"tau-get-{run[:30]}-{int(time.time() * 1e3) % 10**9}-{secrets.token_hex(3)}".lower()
        pod = _helper_pod(pod_name, ns, pvc, mode, target, root)
        path = api_path("v1", "pods", namespace=ns, name=pod_name)
        created = await session.create(api_path("v1", "pods", namespace=ns), pod)
        try:
            deadline = time.monotonic() + 90
            phase = ""
            while time.monotonic() < deadline:
                current = await session.get(path, missing_ok=True)
                phase = ((current or {}).get("status") or {}).get("phase", "")
                if phase in ("Succeeded", "Failed") or current is None:
                    break
                await asyncio.sleep(0.2)
            if phase not in ("Succeeded", "Failed"):
                raise TauError(f"the helper pod {ns}/{pod_name} did not finish within 90s (phase {phase or '?'})",
                               hint=f"check that PVC {pvc} exists and can be mounted in namespace {ns}")
            text = await session.text(path + "/log", query={"container": "get"})
        finally:
            await session.delete(path, propagation="Background", uid=_meta(created).get("uid"))
        return _parse_helper(text, mode, target, root, pod_name)

    # -- retry and resume -------------------------------------------------------------------
    def retry(self, ref: RunRef, request: SubmitRequest, *, attempt: int, reason: FailureReason) -> SubmitResult:
        result: SubmitResult = self._run(self._retry_async, ref, request, attempt, reason)
        return result

    async def _retry_async(self, session: KubeSession, ref: RunRef, request: SubmitRequest, attempt: int,
                           reason: FailureReason) -> SubmitResult:
        from tau_core.retry import RetryPolicy, retry_event

        policy = RetryPolicy.from_config(request.name, request.config)
        target = await self.resolve(session, ref)
        ns = target.namespace
        snap = await self.snapshot(session, ns, ref.name)
        workload = snap.workload
        signature = failure_signature(snap)
        event = retry_event(namespace=ns, name=ref.name, attempt=attempt, max_retries=policy.max_retries,
                            reason=reason, signature=signature, kind=snap.kind or "Job",
                            uid=_meta(workload).get("uid") if workload else None)
        await _create_event(session, event)
        context = {**request.context, "retry": {"attempt": attempt, "max": policy.max_retries,
                                                "reason": reason.value},
                   "resume_from": policy.checkpoint_path}
        replacement = self._rerender(request, context)
        _stamp_attempt(replacement[0], attempt, policy.max_retries, reason)
        if workload is not None:
            await self._delete_and_wait(session, ns, ref.name, workload)
        new = SubmitRequest(request.name, request.config, replacement, context, request.config_path,
                            request.config_hash, _ann(replacement[0]).get(keys.SUBMISSION_ID, ""), request.extra_env)
        return await self.submit_async(session, new)

    def record_retry_outcome(self, ref: RunRef, *, outcome: str, attempt: int, max_retries: int,
                             reason: FailureReason) -> None:
        """Record the ``exhausted`` or ``succeeded`` Event of a retried run."""
        from tau_core.retry import retry_event

        async def go(session: KubeSession) -> None:
            target = await self.resolve(session, ref)
            snap = await self.snapshot(session, target.namespace, ref.name)
            workload = snap.workload
            await _create_event(session, retry_event(
                namespace=target.namespace, name=ref.name, attempt=attempt, max_retries=max_retries, reason=reason,
                signature=failure_signature(snap), kind=snap.kind or "Job",
                uid=_meta(workload).get("uid") if workload else None, outcome=outcome))

        self._run(go)

    def _rerender(self, request: SubmitRequest, context: Mapping[str, Any]) -> builtins.list[Obj]:
        from tau_core.rendering import RenderRequest, render

        submission_id = new_submission_id()
        rendered = render(RenderRequest(name=request.name, config=request.config, context=context,
                                        config_hash=request.config_hash, submission_id=submission_id,
                                        config_dir=request.config_path.parent if request.config_path else None))
        if rendered:
            rendered[0].setdefault("metadata", {}).setdefault("annotations", {})[keys.SUBMISSION_ID] = submission_id
        return rendered

    async def _delete_and_wait(self, session: KubeSession, ns: str, name: str, workload: Obj,
                               timeout: float = 120.0) -> None:
        path = _path_of(workload, named=True)
        await session.delete(path, propagation="Foreground", uid=_meta(workload).get("uid"))
        await session.delete(api_path("v1", "services", namespace=ns, name=f"{name}-headless"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await session.get(path, missing_ok=True) is None:
                return
            await asyncio.sleep(0.2)
        raise TauError(f"{ns}/{name} was not removed within {int(timeout)}s; nothing was resubmitted",
                       hint=f"check it with `tau run status {name}` and cancel it with `tau run cancel {name}`")

    def resume(self, ref: RunRef, request: SubmitRequest, *, from_dir: str | None = None,
               force: bool = False, dry_run: bool = False) -> SubmitResult:
        result: SubmitResult = self._run(self._resume_async, ref, request, from_dir, force, dry_run)
        return result

    async def _resume_async(self, session: KubeSession, ref: RunRef, request: SubmitRequest,
                            from_dir: str | None, force: bool, dry_run: bool) -> SubmitResult:
        from tau_core.output import warning
        from tau_core.retry import checkpoint_path

        if from_dir is not None and not from_dir.startswith("/"):
            raise UsageError(f"--from \"{from_dir}\" must be an absolute checkpoint directory")
        target = await self.resolve(session, ref)
        ns = target.namespace
        snap = await self.settle(session, await self.snapshot(session, ns, ref.name))
        workload = snap.workload
        if workload is None:
            raise NotFoundError(f"no workload named \"{ref.name}\" found in namespace {ns}",
                                hint="check the name with `tau run list`; resume needs the failed workload")
        reason = verdict(snap).reason
        if reason is FailureReason.RUNNING:
            raise ConflictError(f"workload \"{ref.name}\" is still running — cancel it first",
                                hint=f"tau run cancel {ref.name}")
        if reason is FailureReason.COMPLETED:
            raise ConflictError(f"workload \"{ref.name}\" completed successfully — nothing to resume")
        if reason is FailureReason.UNKNOWN:
            raise TauError(f"workload \"{ref.name}\" failed with non-retryable reason Unknown — inspect logs/status "
                           "before resubmitting manually",
                           hint=f"tau run status {ref.name}; tau logs {ref.name}")
        if reason is FailureReason.OOM_KILLED and not force:
            raise TauError(f"workload \"{ref.name}\" was OOMKilled; resuming with the same resources usually fails "
                           "the same way", hint="raise the memory (compute.*) first, then pass --force to resume")
        old_hash = _ann(workload).get(keys.CONFIG_HASH, "")
        if old_hash and request.config_hash and old_hash != request.config_hash:
            warning(f"config hash changed ({old_hash[:8]} → {request.config_hash[:8]}) — the resumed run uses the "
                    "new config")
        new_ns = _meta(request.objects[0]).get("namespace") if request.objects else ns
        if new_ns and new_ns != ns:
            raise ConflictError(f"the workspace now targets namespace \"{new_ns}\" but {ref.name} ran in \"{ns}\"; "
                                "refusing to resume across namespaces",
                                hint="submit a new run instead")
        resume_from = from_dir or checkpoint_path(request.name, request.config)
        context = {**request.context, "resume_from": resume_from,
                   "metrics_session_id": _ann(workload).get(keys.METRICS_SESSION_ID) or
                   request.context.get("metrics_session_id")}
        replacement = self._rerender(request, context)  # validated by a client render before anything is deleted
        ann = _ann(workload)
        if ann.get(RETRY_ATTEMPT):
            _stamp_attempt(replacement[0], int(ann[RETRY_ATTEMPT]), int(ann.get(RETRY_MAX, "0") or 0), reason)
        new = SubmitRequest(request.name, request.config, replacement, context, request.config_path,
                            request.config_hash, _ann(replacement[0]).get(keys.SUBMISSION_ID, ""), request.extra_env)
        if dry_run:
            return SubmitResult(RunRef(ref.name, "kubernetes", ns, session.context), created=False,
                                message=json.dumps(replacement))
        await self._delete_and_wait(session, ns, ref.name, workload)
        result = await self.submit_async(session, new)
        result.message = f"resumed {ref.name} from {resume_from} after {reason.value} (ns={ns})"
        return result


# -- what one run reads and watches -------------------------------------------------------------

def _collections(ns: str, name: str, snap: Snapshot) -> dict[str, tuple[str, str | None]]:
    workload = snap.workload
    uid = _meta(workload).get("uid")
    if snap.job is not None:
        pods = f"controller-uid={uid}"
    else:
        cluster = ((snap.rayjob or {}).get("status") or {}).get("rayClusterName")
        pods = f"{keys.RAY_CLUSTER}={cluster}" if cluster else f"{keys.JOB_NAME}={name}"
    return {
        "workloads": (api_path(*WORKLOAD_API, namespace=ns), f"{keys.KUEUE_JOB_UID}={uid}"),
        "pods": (api_path("v1", "pods", namespace=ns), pods),
        "events": (api_path("v1", "events", namespace=ns), None),
    }


def _watch_specs(ns: str, name: str, snap: Snapshot) -> dict[str, tuple[str, str | None, str | None]]:
    api = RAYJOB_API if snap.kind == "RayJob" else JOB_API
    specs: dict[str, tuple[str, str | None, str | None]] = {
        "workload": (api_path(*api, namespace=ns), None, f"metadata.name={name}")}
    if snap.workload is None:
        specs["rayjob"] = (api_path(*RAYJOB_API, namespace=ns), None, f"metadata.name={name}")
        return specs
    for key, (path, labels) in _collections(ns, name, snap).items():
        specs[key] = (path, labels, None)
    if snap.kind == "RayJob" and not ((snap.rayjob or {}).get("status") or {}).get("rayClusterName"):
        specs["pods"] = (api_path("v1", "pods", namespace=ns), None, None)
    return specs


@dataclass
class _Cache:
    """The objects of one run, kept current by watch events."""

    objects: dict[str, dict[str, Obj]] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    kind: str | None = None
    restart: bool = False

    @classmethod
    def from_snapshot(cls, snap: Snapshot) -> _Cache:
        cache = cls(kind=snap.kind)
        workload = snap.workload
        cache.objects["workload"] = {_meta(workload)["name"]: workload} if workload else {}
        cache.objects["rayjob"] = {}
        for key, items in (("workloads", snap.workloads), ("pods", snap.pods), ("events", snap.events)):
            cache.objects[key] = {_meta(o).get("name", ""): o for o in items}
        cache.versions = dict(snap.versions)
        if workload is not None:
            cache.versions["workload"] = str(_meta(workload).get("resourceVersion") or "")
        return cache

    def apply(self, key: str, event: Mapping[str, Any]) -> bool:
        obj = dict(event.get("object") or {})
        rv = _meta(obj).get("resourceVersion")
        if rv:
            self.versions[key] = str(rv)
        etype = event.get("type")
        if etype == "BOOKMARK":
            return False
        bucket = self.objects.setdefault(key, {})
        name = _meta(obj).get("name", "")
        if etype == "DELETED":
            gone = bucket.pop(name, None)
            if key == "pods":
                self.objects.setdefault("departed", {})[name] = obj or gone or {}
        else:
            bucket[name] = obj
        if key == "rayjob" and etype != "DELETED":
            self.restart = True  # the run turned out to be a RayJob: read it properly
        return True

    def workload(self) -> Obj | None:
        items = list(self.objects.get("workload", {}).values())
        return items[0] if items else None

    def snapshot(self, base: Snapshot) -> Snapshot:
        workload = self.workload()
        return Snapshot(
            namespace=base.namespace, name=base.name,
            job=workload if self.kind == "Job" or (self.kind is None and workload) else None,
            rayjob=workload if self.kind == "RayJob" else None,
            workloads=list(self.objects.get("workloads", {}).values()),
            pods=[p for p in self.objects.get("pods", {}).values() if _belongs(p, base)],
            claims=base.claims, events=list(self.objects.get("events", {}).values()),
            now=datetime.now(UTC), versions=dict(self.versions),
            departed=[*base.departed, *self.objects.get("departed", {}).values()])


def _belongs(pod: Obj, base: Snapshot) -> bool:
    if base.kind != "RayJob":
        return True
    labels = _labels(pod)
    cluster = ((base.rayjob or {}).get("status") or {}).get("rayClusterName")
    return (cluster and labels.get(keys.RAY_CLUSTER) == cluster) or labels.get(keys.JOB_NAME) == base.name


def _relevant_events(snap: Snapshot) -> list[Obj]:
    workload = snap.workload
    uids = {_meta(x).get("uid") for x in [workload, *snap.workloads, *snap.pods] if x}
    names = {snap.name} | {_meta(x).get("name") for x in snap.pods}
    out = []
    for e in snap.events:
        inv = e.get("involvedObject") or e.get("regarding") or {}
        if inv.get("uid") in uids or (inv.get("name") in names and not inv.get("uid")):
            out.append(e)
    seen = {id(e) for e in out}
    return out + [e for e in attempt_pod_events(snap) if id(e) not in seen]  # pods deleted since


class _deferred_interrupts:
    """Hold Ctrl-C while a failed workload is replaced, so an interrupt never leaves it deleted but not resubmitted."""

    def __enter__(self) -> None:
        import signal
        import threading

        self._pending = False
        self._previous: Any = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)

            def hold(signum: int, frame: Any) -> None:
                self._pending = True

            signal.signal(signal.SIGINT, hold)

    def __exit__(self, *exc: object) -> None:
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        if self._pending:
            raise KeyboardInterrupt


# -- helpers ------------------------------------------------------------------------------------

def _reason(value: str | None) -> FailureReason:
    try:
        return FailureReason.parse(value or "")
    except ValueError:
        return FailureReason.UNKNOWN


def _require_ready(ws: Obj) -> None:
    phase = (ws.get("status") or {}).get("phase")
    observed = (ws.get("status") or {}).get("observedGeneration")
    generation = _meta(ws).get("generation")
    name = _meta(ws).get("name")
    if phase != "Ready":
        raise TauError(f"workspace \"{name}\" is not Ready (phase={phase or 'unknown'})",
                       hint=f"ask the platform team to fix it; `tau workspace status {name}` shows which "
                            "condition fails")
    if generation is not None and observed is not None and int(observed) < int(generation):
        raise TauError(f"workspace \"{name}\" has changes the controller has not reconciled yet "
                       f"(generation {generation}, observed {observed})", hint="retry in a moment")


def _workspace_namespace(ws: Obj) -> str:
    status = ws.get("status") or {}
    spec = ws.get("spec") or {}
    return str(((status.get("target") or {}).get("resolvedNamespace")) or (spec.get("target") or {}).get("namespace")
               or _meta(ws).get("name"))


def _workspace_queue(ws: Obj) -> str | None:
    q = ((ws.get("status") or {}).get("queue") or {}).get("localQueue") or (ws.get("spec") or {}).get("queue")
    return str(q) if q else None


def _summary_state(obj: Obj, kind: str) -> str:
    status = obj.get("status") or {}
    if kind == "Job":
        conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        if conds.get("Complete") == "True":
            return "Succeeded"
        if conds.get("Failed") == "True":
            return "Failed"
        if (obj.get("spec") or {}).get("suspend"):
            return "Queued"
        if status.get("active"):
            return "Running"
        return "Pending"
    return str(status.get("jobStatus") or status.get("jobDeploymentStatus") or "Pending").title()


async def _optional_list(session: KubeSession, path: str, selector: str | None) -> list[Obj]:
    try:
        return await session.list_items(path, label_selector=selector)
    except KubeApiError as exc:
        if exc.status == 404:
            return []  # KubeRay not installed: no RayJobs
        raise


def _path_of(obj: Mapping[str, Any], named: bool = False) -> str:
    api = str(obj.get("apiVersion") or "")
    kind = str(obj.get("kind") or "")
    plural = _PLURALS.get(kind) or kind.lower() + "s"
    meta = _meta(obj)
    return api_path(api, plural, namespace=meta.get("namespace"), name=meta.get("name") if named else None)


_PLURALS = {"Job": "jobs", "RayJob": "rayjobs", "Service": "services", "ConfigMap": "configmaps",
            "Secret": "secrets", "RayService": "rayservices", "Deployment": "deployments", "Pod": "pods",
            "PersistentVolumeClaim": "persistentvolumeclaims", "Event": "events",
            "HorizontalPodAutoscaler": "horizontalpodautoscalers", "ServiceAccount": "serviceaccounts",
            "SecretProviderClass": "secretproviderclasses", "NetworkPolicy": "networkpolicies"}


def _labels_ref(obj: Obj) -> dict[str, str]:
    meta = obj.setdefault("metadata", {})
    labels: dict[str, str] = meta.setdefault("labels", {})
    return labels


def _pod_specs(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec") or {}
    out: list[dict[str, Any]] = []
    if obj.get("kind") == "Job":
        out.append(((spec.get("template") or {}).get("spec")) or {})
    elif obj.get("kind") in ("RayJob", "RayService"):
        cluster = spec.get("rayClusterSpec") or {}
        head = ((cluster.get("headGroupSpec") or {}).get("template") or {}).get("spec")
        if head:
            out.append(head)
        for group in cluster.get("workerGroupSpecs") or []:
            s = (group.get("template") or {}).get("spec")
            if s:
                out.append(s)
        submitter = ((spec.get("submitterPodTemplate") or {}).get("spec"))
        if submitter:
            out.append(submitter)
    elif obj.get("kind") == "Deployment":
        out.append(((spec.get("template") or {}).get("spec")) or {})
    elif obj.get("kind") == "Pod":
        out.append(spec)
    return out


def _all_containers(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for spec in _pod_specs(obj):
        out.extend(spec.get("initContainers") or [])
        out.extend(spec.get("containers") or [])
    return out


def _pending_retry(workload: Obj | None, **kwargs: Any) -> dict[str, Any] | None:
    from tau_core.backends.retry_owner import pending_retry

    return pending_retry(workload, **kwargs)


def _stamp_attempt(obj: Obj, attempt: int, max_retries: int, reason: FailureReason) -> None:
    ann = obj.setdefault("metadata", {}).setdefault("annotations", {})
    ann[RETRY_ATTEMPT] = str(attempt)
    ann[RETRY_MAX] = str(max_retries)
    ann[RETRY_REASON] = reason.value


async def _create_event(session: KubeSession, event: Obj) -> None:
    ns = event["metadata"]["namespace"]
    try:
        await session.create(api_path("v1", "events", namespace=ns), event)
    except KubeApiError as exc:
        if exc.already_exists:
            return
        if exc.status == 403:
            from tau_core.output import warning

            warning(f"could not record the retry Event in {ns}: {exc.message}")
            return
        raise


def _pod_summary(pod: Obj) -> dict[str, Any]:
    status = pod.get("status") or {}
    return {
        "name": _meta(pod).get("name"),
        "phase": status.get("phase"),
        "node": (pod.get("spec") or {}).get("nodeName"),
        "containers": [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []],
        "restarts": sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []),
    }


def diagnostic_commands(snap: Snapshot, context: str, kubeconfig: str | None = None) -> list[str]:
    """kubectl commands scoped to this run's namespace, context and pods (the user runs them).

    The kubeconfig is named when it is not kubectl's default: the workspace connection's isolated
    kubeconfig, or ``KUBECONFIG`` when it names exactly one file."""
    paths = kubeconfig_paths(kubeconfig)
    named = kubeconfig or (os.environ.get("KUBECONFIG") and len(paths) == 1)
    kc = f" --kubeconfig {shlex.quote(str(paths[0]))}" if named else ""
    scope = f"-n {snap.namespace} --context {context}{kc}"
    cmds: list[str] = []
    if snap.kind == "Job":
        cmds.append(f"kubectl describe job {snap.name} {scope}")
    elif snap.kind == "RayJob":
        cmds.append(f"kubectl describe rayjob {snap.name} {scope}")
    if snap.workloads:
        cmds.append(f"kubectl get workload {_meta(snap.workloads[0]).get('name')} {scope} -o yaml")
    for pod in snap.pods[:4]:
        name = _meta(pod).get("name")
        main = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name")
        cmds.append(f"kubectl top pod {name} {scope}")
        cmds.append(f"kubectl logs {name} -c {main} {scope} --timestamps")
        cmds.append(f"kubectl exec -it {name} -c {main} {scope} -- sh")
    return cmds


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


async def _merge(gens: list[AsyncIterator[str]]) -> AsyncIterator[str]:
    if len(gens) == 1:
        async for line in gens[0]:
            yield line
        return
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    async def pump(gen: AsyncIterator[str]) -> None:
        try:
            async for line in gen:
                await queue.put(line)
        finally:
            await queue.put(None)

    tasks = [asyncio.ensure_future(pump(g)) for g in gens]
    remaining = len(tasks)
    try:
        while remaining:
            item = await queue.get()
            if item is None:
                remaining -= 1
                continue
            yield item
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for t in tasks:
            if not t.cancelled() and t.exception() is not None:
                raise t.exception()  # type: ignore[misc]


T = TypeVar("T")


def _iterate(factory: Callable[..., AsyncGenerator[T, None]], *args: Any) -> Iterator[T]:
    """Drive an async generator from synchronous code, one item at a time.

    From a thread that already runs an event loop (a notebook), the generator runs on a private
    loop in a worker thread instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        yield from _iterate_here(factory, *args)
        return
    yield from _iterate_in_thread(factory, *args)


def _iterate_in_thread(factory: Callable[..., AsyncGenerator[T, None]], *args: Any) -> Iterator[T]:
    import queue
    import threading

    items: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=64)
    stop = threading.Event()

    def work() -> None:
        try:
            for item in _iterate_here(factory, *args):
                items.put(("item", item))
                if stop.is_set():
                    break
        except BaseException as exc:
            items.put(("error", exc))
        items.put(("end", None))

    thread = threading.Thread(target=work, name="tau-kube-iter", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = items.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()


def _iterate_here(factory: Callable[..., AsyncGenerator[T, None]], *args: Any) -> Iterator[T]:
    loop = asyncio.new_event_loop()
    agen = factory(*args)
    try:
        while True:
            try:
                yield loop.run_until_complete(agen.__anext__())
            except StopAsyncIteration:
                return
    finally:
        _drain(loop, agen)


def _drain(loop: asyncio.AbstractEventLoop, agen: AsyncGenerator[Any, None]) -> None:
    """Stop everything still running on ``loop`` (after an early stop, an error or Ctrl-C), then close it.

    Pending tasks (the interrupted ``__anext__``, watch informers) are cancelled and awaited so that
    every ``finally`` runs and every HTTP connection is released before the loop goes away.  A Ctrl-C
    that lands inside a task's step leaves that task finished with the ``KeyboardInterrupt`` (already
    handled by the caller); it is not reported again as "Task exception was never retrieved".
    """
    loop.set_exception_handler(_quiet_interrupts)
    try:
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        try:
            loop.run_until_complete(agen.aclose())
        except (Exception, asyncio.CancelledError):
            pass
        loop.run_until_complete(loop.shutdown_asyncgens())
    except (Exception, KeyboardInterrupt):
        pass
    finally:
        loop.close()


def _quiet_interrupts(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    if not isinstance(context.get("exception"), KeyboardInterrupt):
        loop.default_exception_handler(context)


# -- helper pod for run get -------------------------------------------------------------------

_HELPER_SCRIPT = r"""
set -u
root="$TAU_GET_ROOT"; target="$TAU_GET_TARGET"
real_root=$(readlink -f "$root" 2>/dev/null || true)
if [ ! -e "$target" ]; then echo "TAU_PVC_GET_NOT_FOUND"; exit 0; fi
if [ -L "$target" ]; then echo "TAU_PVC_GET_REFUSED symlink"; exit 0; fi
real=$(readlink -f "$target")
case "$real" in "$real_root"|"$real_root"/*) ;; *) echo "TAU_PVC_GET_REFUSED outside"; exit 0;; esac
if [ "$TAU_GET_MODE" = file ]; then
  if [ ! -f "$target" ]; then echo "TAU_PVC_GET_NOT_FOUND"; exit 0; fi
  echo "TAU_PVC_GET_BEGIN"; base64 "$target"; echo "TAU_PVC_GET_END"; exit 0
fi
cd "$target" && find . -type f | while IFS= read -r f; do
  rel="${f#./}"; size=$(wc -c < "$f"); printf 'F %s %s\n' "$size" "$(printf '%s' "$rel" | base64 | tr -d '\n')"
done
echo "TAU_PVC_LIST_COMPLETE:$HOSTNAME"
""".strip()


def _helper_pod(name: str, ns: str, pvc: str, mode: str, target: str, root: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns,
                     "labels": {"app": "tau-pvc-get" if mode == "file" else "tau-pvc-list",
                                keys.MANAGED_BY: keys.MANAGED_BY_VALUE}},
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": 60,
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "get",
                "image": HELPER_IMAGE,
                "command": ["sh", "-c", _HELPER_SCRIPT],
                "env": [{"name": "TAU_GET_MODE", "value": mode},
                        {"name": "TAU_GET_ROOT", "value": HELPER_MOUNT + root},
                        {"name": "TAU_GET_TARGET", "value": HELPER_MOUNT + target}],
                "volumeMounts": [{"name": "data", "mountPath": HELPER_MOUNT + "/data", "readOnly": True}],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}},
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": pvc, "readOnly": True}}],
        },
    }


def _parse_helper(text: str, mode: str, target: str, root: str, pod: str) -> ArtifactListing | bytes:
    lines = text.splitlines()
    if any(line.startswith(GET_NOT_FOUND) for line in lines):
        raise NotFoundError(f"{target} does not exist on the result volume",
                            hint="list the result directory with `tau run get NAME` to see what exists")
    refused = [line for line in lines if line.startswith(GET_REFUSED)]
    if refused:
        raise UsageError(f"refusing to read {target}: it is a symbolic link or resolves outside the result directory")
    if mode == "file":
        try:
            begin, end = lines.index("TAU_PVC_GET_BEGIN"), lines.index("TAU_PVC_GET_END")
        except ValueError as exc:
            raise TauError(f"the helper pod {pod} returned an incomplete file (missing markers)",
                           hint="retry; if it persists, check the PVC with `kubectl get pvc`") from exc
        return base64.b64decode("".join(lines[begin + 1:end]))
    if not any(line.startswith(LIST_COMPLETE) for line in lines):
        raise TauError(f"the helper pod {pod} returned an incomplete listing", hint="retry the command")
    entries: list[dict[str, Any]] = []
    for line in lines:
        if line.startswith("F "):
            _, size, encoded = line.split(" ", 2)
            entries.append({"path": base64.b64decode(encoded).decode("utf-8", "replace"), "size": int(size),
                            "type": "file"})
    entries.sort(key=lambda e: str(e["path"]))
    return ArtifactListing(root=target, entries=entries)
