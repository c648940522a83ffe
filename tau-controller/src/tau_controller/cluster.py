"""The TauCluster reconciler (control-plane.md §2.2)."""

from __future__ import annotations

from tau_controller.context import Ctx

RESYNC = 600.0


async def reconcile_cluster(ctx: Ctx, name: str) -> float | None:
    return RESYNC
