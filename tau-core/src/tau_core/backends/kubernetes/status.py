"""Reading a run: one snapshot of its objects, settled when a failure has no evidence yet, and its status tree.

Request budget of one ``status`` refresh (reference run-config-and-rendering §4.1): Job = GET job,
list Kueue Workloads, list pods, list events (4, +1 for ResourceClaims when pods reference any);
RayJob = GET job (404), GET rayjob, Workloads, pods, events (5, +1 for claims).  Namespace
discovery through the primary TauWorkspace adds one list when no namespace was given.
"""

from __future__ import annotations

import builtins
import os
import shlex
import time
from datetime import UTC, datetime
from typing import Any

import anyio

from tau_core import keys
from tau_core.aio import gather
from tau_core.classification import attempt_pod_events, settled, verdict
from tau_core.kube import KubeApiError, KubeSession, api_path, kubeconfig_paths
from tau_core.lifecycle.base import RunRef, RunStatus, RunSummary
from tau_core.lifecycle.details import PendingRetry, PodSummary, StatusDetails
from tau_core.status_tree import Snapshot, phases, terminal_state

from .objects import (
    CLAIM_API,
    JOB_API,
    RAYJOB_API,
    RETRY_ATTEMPT,
    RETRY_MAX,
    RETRY_REASON,
    VISIBILITY_API,
    WORKLOAD_API,
    Obj,
    _ann,
    _labels,
    _meta,
    _optional_list,
)
from .targeting import ResolvedTarget, Targeting


class Status(Targeting):
    async def _workload(self, session: KubeSession, ns: str, name: str) -> tuple[Obj | None, Obj | None]:
        job = await session.get(api_path(*JOB_API, namespace=ns, name=name), missing_ok=True)
        if job is not None:
            return job, None
        rayjob = await session.get(api_path(*RAYJOB_API, namespace=ns, name=name), missing_ok=True)
        return None, rayjob

    async def snapshot(self, session: KubeSession, ns: str, name: str) -> Snapshot:
        job, rayjob = await self._workload(session, ns, name)
        snap = Snapshot(namespace=ns, name=name, job=job, rayjob=rayjob, now=datetime.now(UTC))
        if snap.workload is None:
            return snap
        specs = _collections(ns, name, snap)

        async def read(key: str) -> builtins.list[Obj]:
            path, labels = specs[key]
            result = await session.list(path, label_selector=labels)
            snap.versions[key] = str((result.get("metadata") or {}).get("resourceVersion") or "")
            return list(result.get("items") or [])

        snap.workloads, snap.pods, snap.events = await gather(
            lambda: read("workloads"), lambda: read("pods"), lambda: read("events"))
        await self._queue_positions(session, ns, snap)
        if any((p.get("spec") or {}).get("resourceClaims") for p in snap.pods):
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
            await anyio.sleep(0.25)
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
        terminal, succeeded = terminal_state(snap)
        workload = snap.workload
        ann = _ann(workload)
        attempt = int(ann[RETRY_ATTEMPT]) if ann.get(RETRY_ATTEMPT, "").isdigit() else None
        max_attempts = int(ann[RETRY_MAX]) if ann.get(RETRY_MAX, "").isdigit() else None
        found = verdict(snap) if terminal and not succeeded else None
        failure = found.reason if found else None
        message = ""
        if workload is None:
            message = f"no Job or RayJob named \"{ref.name}\" in namespace {snap.namespace}"
        elif terminal:
            message = "succeeded" if succeeded else f"failed ({failure.value if failure else 'Unknown'})"
        st = RunStatus(
            ref=RunRef(ref.name, "kubernetes", snap.namespace, context, target.workspace),
            kind=snap.kind or "unknown", phases=phases(snap), terminal=terminal, succeeded=succeeded,
            failure=failure, attempt=attempt if attempt else None, max_attempts=max_attempts if attempt else None,
            message=message,
        )
        st.extra = StatusDetails(
            namespace=snap.namespace, context=context, server=server,
            queue=_labels(workload).get(keys.KUEUE_QUEUE_NAME) or target.queue, workspace=target.workspace,
            exists=workload is not None, config_hash=ann.get(keys.CONFIG_HASH),
            submission_id=ann.get(keys.SUBMISSION_ID), retry_reason=ann.get(RETRY_REASON),
            failure_evidence=found.evidence if found else None, evidence_checked=True,
            retry_owner=ann.get(keys.RETRY_OWNER),
            retry_pending=_pending_retry(workload, terminal=terminal, succeeded=succeeded, failure=failure,
                                         now=snap.now),
            pods=tuple(_pod_summary(p) for p in snap.pods),
            workloads=tuple(str(_meta(w).get("name")) for w in snap.workloads),
            diagnostic_commands=tuple(diagnostic_commands(snap, context, self.kubeconfig)),
        )
        return st

    async def status_async(self, session: KubeSession, ref: RunRef, target: ResolvedTarget | None = None,
                           run_profile: bool = False) -> RunStatus:
        target = target or await self.resolve(session, ref)
        snap = await self.settle(session, await self.snapshot(session, target.namespace, ref.name))
        status = self._status_from(ref, snap, target, session.server, session.context)
        if run_profile and snap.workload is not None:
            from tau_core.run_profile import run_profile as profile_of

            status.extra.run_profile = await profile_of(session, snap)
        return status

    def status(self, ref: RunRef, *, run_profile: bool = False) -> RunStatus:
        result: RunStatus = self._run(self.status_async, ref, None, run_profile)
        return result

    # -- list -------------------------------------------------------------------------------
    async def list_async(self, session: KubeSession, namespace: str | None, queue: str | None,
                         include_external: bool, workspace: str | None = None) -> builtins.list[RunSummary]:
        target = await self.resolve(session, RunRef("", namespace=namespace, workspace=workspace))
        ns = target.namespace
        selector = None if include_external else f"{keys.MANAGED_BY}={keys.MANAGED_BY_VALUE}"
        jobs, rayjobs = await gather(
            lambda: session.list_items(api_path(*JOB_API, namespace=ns), label_selector=selector),
            lambda: _optional_list(session, api_path(*RAYJOB_API, namespace=ns), selector),
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


def _collections(ns: str, name: str, snap: Snapshot) -> dict[str, tuple[str, str | None]]:
    uid = _meta(snap.workload).get("uid")
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


def _relevant_events(snap: Snapshot) -> list[Obj]:
    uids = {_meta(x).get("uid") for x in [snap.workload, *snap.workloads, *snap.pods] if x}
    names = {snap.name} | {_meta(x).get("name") for x in snap.pods}
    out = []
    for e in snap.events:
        inv = e.get("involvedObject") or e.get("regarding") or {}
        if inv.get("uid") in uids or (inv.get("name") in names and not inv.get("uid")):
            out.append(e)
    seen = {id(e) for e in out}
    return out + [e for e in attempt_pod_events(snap) if id(e) not in seen]  # pods deleted since


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


def _pending_retry(workload: Obj | None, **kwargs: Any) -> PendingRetry | None:
    from tau_core.backends.retry_owner import pending_retry

    pending = pending_retry(workload, **kwargs)
    if not pending:
        return None
    return PendingRetry(owner=str(pending["owner"]), attempt=int(pending["attempt"]), max=int(pending["max"]),
                        in_seconds=float(pending["inSeconds"]))


def _pod_summary(pod: Obj) -> PodSummary:
    status = pod.get("status") or {}
    return PodSummary(
        name=_meta(pod).get("name"), phase=status.get("phase"), node=(pod.get("spec") or {}).get("nodeName"),
        containers=tuple(c.get("name") for c in (pod.get("spec") or {}).get("containers") or []),
        restarts=sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []),
    )


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
