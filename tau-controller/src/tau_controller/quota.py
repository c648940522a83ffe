"""The TauQuotaRequest reconciler (control-plane.md §2.4): reports decisions, never changes quota."""

from __future__ import annotations

from typing import Any

from tau_controller.api import QUOTA_REQUEST
from tau_controller.conditions import FALSE, TRUE, cond
from tau_controller.context import Ctx
from tau_controller.workspace import write_status
from tau_core import keys


def decide(obj: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(status without conditions, conditions)`` from the decision annotations (rejection wins)."""
    annotations = obj["metadata"].get("annotations") or {}
    reviewer = annotations.get(keys.QUOTA_REVIEWED_BY)
    status: dict[str, Any] = {}
    if reviewer:
        status["approvedBy"] = str(reviewer)
    if annotations.get(keys.QUOTA_REJECTED) == "true":
        status.update(phase="Rejected", decision="request rejected by platform")
        return status, [cond("Approved", FALSE, "Rejected", "request rejected by platform")]
    if annotations.get(keys.QUOTA_APPROVED) == "true":
        status.update(phase="Approved", decision="approved in ReportOnly mode; waiting for GitOps quota update")
        return status, [cond("Approved", TRUE, "Approved", "request approved by platform"),
                        cond("QuotaMutated", FALSE, "ReportOnly",
                             "the controller reports decisions and never changes quota")]
    status.update(phase="PendingApproval", decision="waiting for platform approval")
    return status, [cond("Approved", FALSE, "PendingApproval", "waiting for platform approval")]


async def reconcile_quota(ctx: Ctx, name: str) -> float | None:
    obj = await ctx.client.get(QUOTA_REQUEST, ctx.system_namespace, name)
    if obj is None:
        return None
    status, conditions = decide(obj)
    if await write_status(ctx, obj, status, conditions, kind=QUOTA_REQUEST):
        await ctx.event(obj, f"Quota{status['phase']}", status["decision"])
    return None
