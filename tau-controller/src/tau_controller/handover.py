"""Finishing a resubmission that a controller started and did not finish, without reviving cancelled runs.

A resubmission is four writes: (1) the retry Event ``<run>-retry-<n>`` records the whole next attempt
(``tau.azure.com/retry-next``) with ``tau.azure.com/retry-state: pending``, the failed workload's uid in
``involvedObject.uid`` and this process in ``reportingInstance``; (2) DELETE of the failed workload with that uid
as precondition; (3) CREATE of the next attempt; (4) ``retry-state: submitted``.  A controller can stop between
any two of them.  The record is finished on the next start-up sweep, every :data:`SWEEP_INTERVAL` after that, and
whenever a retried workload is deleted.

Who deleted the failed workload, the controller or a user (``tau run cancel`` and ``kubectl delete`` both just
delete it and leave no mark)?  The rule, for the newest record of a run that is still ``pending``:

* the failed workload (same uid) still exists: nothing is decided; the normal retry path finishes the record;
* another workload holds the name: ``submitted`` when it carries the recorded submission id (the next attempt
  exists), else ``cancelled`` (someone replaced the run); nothing is created;
* the name is free and **this process** recorded it: this process knows whether it deleted the failed workload.
  If it did not (its DELETE was refused, never sent, or found the object gone), a user deleted the run:
  ``cancelled``, never resubmitted;
* the name is free and **another process** recorded it: that controller stopped between its DELETE and its
  CREATE, so the recorded attempt is created now (once: the create is refused while the name is taken) and the
  record becomes ``submitted``.  The one case this cannot tell apart: that controller stopped *before* sending its
  DELETE and, while no controller ran, someone deleted the failed run; it is then resubmitted once (and can be
  cancelled again; the record is final after that).  Closing it would need ``tau run cancel`` to mark the record,
  which the researcher role (read-only on Events, as in the reference) does not allow.
* ``submitted``, ``cancelled`` and records without ``retry-state`` (older controllers) are never acted on, and only
  a run's newest record counts.  Events expire (one hour by default): a controller down for longer finishes
  nothing.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tau_controller.api import EVENT, Kind
from tau_controller.context import COMPONENT, Ctx, log
from tau_core import keys
from tau_core.kube import KubeApiError, WriteOutcomeUnknown
from tau_core.retry import (
    RETRY_ATTEMPT_REASON,
    RETRY_STATE_CANCELLED,
    RETRY_STATE_PENDING,
    RETRY_STATE_SUBMITTED,
)

PENDING, SUBMITTED, CANCELLED = RETRY_STATE_PENDING, RETRY_STATE_SUBMITTED, RETRY_STATE_CANCELLED
ATTEMPT_REASON = RETRY_ATTEMPT_REASON  # the retry Event's reason (tau_core.retry.retry_event)
SWEEP_INTERVAL = 300.0


def state(event: dict[str, Any]) -> str | None:
    return str(((event.get("metadata") or {}).get("annotations") or {}).get(keys.RETRY_STATE) or "") or None


def recorded(event: dict[str, Any]) -> dict[str, Any] | None:
    """The next attempt recorded on a retry Event, or None."""
    text = ((event.get("metadata") or {}).get("annotations") or {}).get(keys.RETRY_NEXT)
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _submission(obj: dict[str, Any] | None) -> str | None:
    return (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(keys.SUBMISSION_ID)


async def mark(ctx: Ctx, event: dict[str, Any], value: str) -> None:
    meta = event["metadata"]
    patch = {"metadata": {"annotations": {keys.RETRY_STATE: value}}}
    try:
        await ctx.client.session.patch(EVENT.path(meta["namespace"], meta["name"]), patch)
    except KubeApiError as exc:
        if exc.status != 404:  # an expired Event: nothing left to finish
            raise
    meta.setdefault("annotations", {})[keys.RETRY_STATE] = value


async def replace(ctx: Ctx, kind: Kind, event: dict[str, Any], new: dict[str, Any]) -> str:
    """Delete the failed workload (uid precondition) and create ``new``; returns the record's final state."""
    involved = event["involvedObject"]
    ns, name, uid = involved["namespace"], involved["name"], involved.get("uid")
    mine_before = uid in ctx.deleted
    ctx.deleted.add(uid)  # before sending: a DELETE whose reply is lost may still have deleted it
    try:
        result = await ctx.client.session.delete(kind.path(ns, name), propagation="Background", uid=uid)
    except KubeApiError as exc:
        if not isinstance(exc, WriteOutcomeUnknown) and not mine_before:
            ctx.deleted.discard(uid)  # the server answered: it did not delete it
        if exc.status != 409:
            raise
        result = None  # the uid precondition failed: the name holds another object now
    if result is None and not mine_before:
        ctx.deleted.discard(uid)
        log.info("%s %s/%s was deleted or replaced by someone else before its retry; not resubmitting it",
                 kind.kind, ns, name)
        await mark(ctx, event, CANCELLED)
        return CANCELLED
    return await create_next(ctx, kind, event, new)


async def create_next(ctx: Ctx, kind: Kind, event: dict[str, Any], new: dict[str, Any]) -> str:
    """Create the recorded attempt once the name is free; ``submitted`` (also when it already exists) or
    ``cancelled`` (another object took the name)."""
    session = ctx.client.session
    ns = event["involvedObject"]["namespace"]
    for attempt in range(50):  # the name frees once the old object (and any finalizer on it) is gone
        try:
            await session.create(kind.path(ns), new)
            break
        except KubeApiError as exc:
            if exc.status != 409:
                raise
            holder = await session.get(kind.path(ns, new["metadata"]["name"]), missing_ok=True)
            if holder is not None and not (holder.get("metadata") or {}).get("deletionTimestamp"):
                result = SUBMITTED if _submission(holder) == _submission(new) else CANCELLED
                await mark(ctx, event, result)
                return result
            if attempt == 49:
                raise
            await asyncio.sleep(0.1)
    await mark(ctx, event, SUBMITTED)
    return SUBMITTED


async def settle(ctx: Ctx, kinds: dict[str, Kind], event: dict[str, Any]) -> str | None:
    """Apply the rule (module docstring) to one pending record; returns its new state (None: undecided)."""
    new = recorded(event)
    involved = event.get("involvedObject") or {}
    kind = kinds.get(str(involved.get("kind")))
    if state(event) != PENDING or new is None or kind is None:
        return None
    ns, name, uid = involved.get("namespace"), str(involved.get("name")), involved.get("uid")
    current = await ctx.client.session.get(kind.path(ns, name), missing_ok=True)
    if current is not None:
        if (current.get("metadata") or {}).get("uid") == uid:
            return None  # the failed workload still stands: the retry path finishes the record
        result = SUBMITTED if _submission(current) == _submission(new) else CANCELLED
        await mark(ctx, event, result)
        return result
    if event.get("reportingInstance") == ctx.instance and uid not in ctx.deleted:
        log.info("%s/%s was deleted before this controller deleted it for attempt %s; a cancelled run is not "
                 "resubmitted", ns, name, new["metadata"].get("annotations", {}).get(keys.RETRY_ATTEMPT))
        await mark(ctx, event, CANCELLED)
        return CANCELLED
    log.info("finishing the resubmission of %s/%s that a stopped controller left after deleting the failed workload",
             ns, name)
    return await create_next(ctx, kind, event, new)


def _attempt(event: dict[str, Any]) -> int:
    try:
        meta = (recorded(event) or {}).get("metadata") or {}
        return int((meta.get("annotations") or {}).get(keys.RETRY_ATTEMPT) or 0)
    except (TypeError, ValueError):
        return 0


async def newest_records(ctx: Ctx, namespace: str | None = None, run: str | None = None) -> list[dict[str, Any]]:
    """The newest retry record of every run (in ``namespace``, of ``run``) that this controller wrote."""
    selector = f"reason={ATTEMPT_REASON},reportingComponent={COMPONENT}"
    if run:
        selector += f",involvedObject.name={run}"
    scopes: tuple[str | None, ...] = (namespace,) if namespace else (ctx.namespaces or (None,))
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for scope in scopes:
        for event in await ctx.client.session.list_items(EVENT.path(scope), field_selector=selector):
            if recorded(event) is None:
                continue
            involved = event.get("involvedObject") or {}
            key = (str(involved.get("namespace")), str(involved.get("name")))
            if key not in newest or _attempt(event) > _attempt(newest[key]):
                newest[key] = event
    return [newest[k] for k in sorted(newest)]


async def sweep(ctx: Ctx, kinds: dict[str, Kind], namespace: str | None = None, run: str | None = None) -> int:
    """Settle every pending newest record (of ``run`` in ``namespace``, or everywhere); returns how many were
    decided.  One failing record does not stop the others."""
    decided, failure = 0, None
    for event in await newest_records(ctx, namespace, run):
        try:
            decided += await settle(ctx, kinds, event) is not None
        except KubeApiError as exc:
            failure = exc
            log.warning("could not finish retry record %s/%s: %s", event["metadata"].get("namespace"),
                        event["metadata"].get("name"), exc)
    ctx.memo["retry-sweeps"] = int(ctx.memo.get("retry-sweeps") or 0) + (run is None)
    if failure is not None:
        raise failure
    return decided
