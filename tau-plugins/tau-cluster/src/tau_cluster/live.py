"""Cluster reads and writes of ``install`` that go through the Kubernetes API (not Helm)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tau_core.errors import ConflictError, TauError
from tau_core.kube import KubeApiError, KubeSession, api_path, condition

CRD_API = "apiextensions.k8s.io/v1"
CRD_MANAGER = "taugrid-crds"


async def refuse_namespace_move(session: KubeSession, namespace: str) -> None:
    """Tau system objects living in another namespace mean the system namespace would move: refuse."""
    stray: list[str] = []
    for plural in ("workspaces", "quotarequests"):
        try:
            items = await session.list_items(api_path("tau.azure.com/v1alpha1", plural))
        except KubeApiError as exc:
            if exc.status == 404:
                continue
            raise
        stray += [f"{plural}/{o['metadata']['name']} in {o['metadata']['namespace']}" for o in items
                  if o["metadata"].get("namespace") != namespace]
    if stray:
        raise ConflictError(
            f"cannot move the TauGrid system namespace to {namespace}: Tau system objects still live elsewhere "
            f"({', '.join(sorted(stray)[:5])})",
            hint="rerun with the namespace those objects live in, or migrate them first")


async def apply_crds(session: KubeSession, crds: list[dict[str, Any]], *, timeout: float) -> list[str]:
    """Server-side apply each CRD as field manager ``taugrid-crds`` (dry run first), then wait for Established."""
    names = [c["metadata"]["name"] for c in crds]
    for dry in (True, False):
        for crd in crds:
            path = api_path(CRD_API, "customresourcedefinitions", name=crd["metadata"]["name"])
            query = {"fieldManager": CRD_MANAGER, "force": "true", "dryRun": "All" if dry else None}
            await session.request("PATCH", path, query=query, body=crd,
                                  content_type="application/apply-patch+yaml")
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            current = await session.get(api_path(CRD_API, "customresourcedefinitions", name=name))
            established = condition(current, "Established")
            if established and established.get("status") == "True":
                break
            if time.monotonic() > deadline:
                raise TauError(f"CRD {name} was applied but is not Established after {timeout:.0f}s")
            await asyncio.sleep(1.0)
    return names
