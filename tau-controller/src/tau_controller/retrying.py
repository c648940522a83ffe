"""Server-side retry: the controller resubmits failed runs stamped ``tau.azure.com/retry-owner: controller``.

Failures are read and classified exactly as the CLI does (the kubernetes execution backend's snapshot and
``tau_core.status_tree.classify``); the policy is the one stamped on the workload; the next attempt is the last
workload's own spec (``tau_core.retry.next_attempt``), never a re-render.  The deterministic retry Event name
(``<run>-retry-<n>``) makes a second resubmission of the same attempt impossible: whoever creates it first wins.
It records the next attempt before the failed workload is deleted; :mod:`tau_controller.handover` finishes a
resubmission a stopped controller left halfway, and says how a run a user cancelled is told apart.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from tau_controller import handover
from tau_controller.api import Kind
from tau_controller.context import COMPONENT, Ctx, log
from tau_core import keys
from tau_core.kube import KubeApiError
from tau_core.lifecycle.base import FailureReason
from tau_core.retry import OWNER_CONTROLLER, next_attempt, policy_from_annotation, retry_event

JOB = Kind("batch/v1", "jobs", "Job", True)
RAYJOB = Kind("ray.io/v1", "rayjobs", "RayJob", True)
KINDS = {"Job": JOB, "RayJob": RAYJOB}
#: the retry queue's key for the sweep over unfinished resubmissions (start-up, then every SWEEP_INTERVAL)
SWEEP = "sweep"


def key_of(obj: dict[str, Any]) -> str | None:
    """The retry queue key of a workload this controller owns the retry of, else None."""
    meta = obj.get("metadata") or {}
    if (meta.get("annotations") or {}).get(keys.RETRY_OWNER) != OWNER_CONTROLLER:
        return None
    return f"{obj.get('kind')}/{meta.get('namespace')}/{meta.get('name')}"


def _backend() -> Any:
    from tau_core.plugins import get_host

    return get_host().registry("execution_backends")["kubernetes"].load()()


def _as_controller(ctx: Ctx, event: dict[str, Any]) -> dict[str, Any]:
    event.update(reportingComponent=COMPONENT, reportingInstance=ctx.instance, source={"component": COMPONENT})
    return event


async def _create_event(ctx: Ctx, event: dict[str, Any]) -> bool:
    """True when this call created the Event (False: it already existed)."""
    ns = event["metadata"]["namespace"]
    try:
        await ctx.client.session.create(f"/api/v1/namespaces/{ns}/events", _as_controller(ctx, event))
    except KubeApiError as exc:
        if exc.status == 409:
            return False
        raise
    return True


def _pod_template(snap: Any) -> dict[str, Any] | None:
    """The Job's pod template as first submitted (Kueue keeps it in the Workload), before admission injected
    node placement."""
    for workload in snap.workloads:
        for podset in (workload.get("spec") or {}).get("podSets") or []:
            if podset.get("template"):
                return dict(podset["template"])
    return None


async def reconcile_retry(ctx: Ctx, key: str) -> float | None:
    if key == SWEEP:
        await handover.sweep(ctx, KINDS)
        return handover.SWEEP_INTERVAL
    kind_name, ns, name = key.split("/", 2)
    from tau_core.status_tree import classify, failure_signature, terminal_state

    snap = await _backend().snapshot(ctx.client.session, ns, name)
    obj = snap.workload
    if obj is None:
        await handover.sweep(ctx, KINDS, ns, name)  # deleted: cancelled, or halfway through its resubmission
        return None
    if obj.get("kind") != kind_name or (obj.get("metadata") or {}).get("deletionTimestamp"):
        return None
    annotations = obj["metadata"].get("annotations") or {}
    if annotations.get(keys.RETRY_OWNER) != OWNER_CONTROLLER:
        return None
    policy = policy_from_annotation(annotations.get(keys.RETRY_POLICY))
    if policy is None:
        log.warning("%s %s/%s has no readable %s annotation; not retrying it", kind_name, ns, name, keys.RETRY_POLICY)
        return None
    terminal, succeeded = terminal_state(snap)
    attempt = int(annotations.get(keys.RETRY_ATTEMPT) or 0)
    uid = obj["metadata"].get("uid")
    common = {"namespace": ns, "name": name, "max_retries": policy.max_retries, "kind": kind_name, "uid": uid}
    if not terminal:
        return None
    if succeeded:
        if attempt:
            reason = FailureReason(annotations.get(keys.RETRY_REASON, FailureReason.UNKNOWN.value))
            await _create_event(ctx, retry_event(attempt=attempt, reason=reason, signature="", outcome="succeeded",
                                                 **common))
        return None
    reason = classify(snap)
    if not policy.allows(reason):
        return None
    if attempt >= policy.max_retries:
        await _create_event(ctx, retry_event(attempt=attempt, reason=reason, signature=failure_signature(snap),
                                             outcome="exhausted", **common))
        return None
    remaining = await _backoff_remaining(ctx, KINDS[kind_name], obj, policy.backoff(attempt + 1))
    if remaining is None or remaining > 0:
        return remaining
    publication = secrets.token_hex(8) if annotations.get(keys.ARTIFACT_PUBLICATION_ID) else None
    new = next_attempt(obj, attempt=attempt + 1, reason=reason, policy=policy, submission_id=secrets.token_hex(12),
                       publication_id=publication, pod_template=_pod_template(snap) if kind_name == "Job" else None)
    new["metadata"]["annotations"].pop(keys.RETRY_DUE, None)
    event = retry_event(attempt=attempt + 1, reason=reason, signature=failure_signature(snap), **common)
    event["metadata"].setdefault("annotations", {}).update({
        keys.RETRY_NEXT: json.dumps(new, separators=(",", ":")), keys.RETRY_STATE: handover.PENDING})
    if not await _create_event(ctx, event):
        existing = await ctx.client.session.get(f"/api/v1/namespaces/{ns}/events/{event['metadata']['name']}",
                                                missing_ok=True)
        recorded = handover.recorded(existing) if existing and handover.state(existing) == handover.PENDING else None
        if existing is None or recorded is None:
            log.info("attempt %d of %s/%s was already resubmitted; not resubmitting again", attempt + 1, ns, name)
            return None
        log.info("finishing the interrupted resubmission of %s/%s as attempt %d", ns, name, attempt + 1)
        event, new = existing, recorded
    if await handover.replace(ctx, KINDS[kind_name], event, new) == handover.SUBMITTED:
        log.info("resubmitted %s/%s as attempt %d/%d after %s", ns, name, attempt + 1, policy.max_retries,
                 reason.value)
    return None


async def _backoff_remaining(ctx: Ctx, kind: Kind, obj: dict[str, Any], backoff: float) -> float | None:
    """Seconds left before the retry may be submitted, counted from the due time stamped on the failed workload
    (``tau.azure.com/retry-due``), so a restarted controller keeps the original backoff.  None: the workload is
    gone (or was replaced) while stamping it."""
    from tau_core.status_tree import parse_time

    meta = obj["metadata"]
    now = datetime.now(UTC)
    due = parse_time((meta.get("annotations") or {}).get(keys.RETRY_DUE))
    if due is None:
        due = now + timedelta(seconds=backoff)
        patch = {"metadata": {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion"),
                              "annotations": {keys.RETRY_DUE: due.isoformat(timespec="milliseconds")}}}
        try:
            await ctx.client.session.patch(kind.path(meta["namespace"], meta["name"]), patch)
        except KubeApiError as exc:
            if exc.status in (404, 409):
                return None  # deleted, replaced or changed meanwhile: the watch brings the current object back
            raise
    return max(0.0, (due - now).total_seconds())
