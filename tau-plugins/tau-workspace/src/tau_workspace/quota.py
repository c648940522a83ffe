"""``tau workspace quota show`` and ``quota request``.

``show`` reads the workspace, its LocalQueue, its ClusterQueue and each ResourceFlavor and reports, per
flavor and resource, nominal quota, what is reserved and used, what remains (nominal - reserved, never
below 0) and the borrowing limit (schema ``tau.workspace.quota.v1``).  Objects the caller may not read
become warnings, never a crash.

``request`` renders a ``TauQuotaRequest`` (offline) and, with ``--apply``, creates it; the controller
and the ``tau-quota-approval-guard`` admission policy own its decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import attrs

from tau_core import keys
from tau_core.errors import ConflictError, UsageError
from tau_core.kube import KubeApiError, KubeSession
from tau_core.output import render_table
from tau_workspace import names, quantity
from tau_workspace.target import KUEUE_API, Target, taugrid_api
from tau_workspace.views import fetch

SCHEMA = "tau.workspace.quota.v1"
MUTATION_MODES = ("ReportOnly", "ControllerManagedBurst")


def _usage(status: Mapping[str, Any], key: str) -> dict[tuple[str, str], Decimal]:
    out: dict[tuple[str, str], Decimal] = {}
    for flavor in status.get(key) or []:
        for res in flavor.get("resources") or []:
            out[(str(flavor.get("name")), str(res.get("name")))] = quantity.parse(res.get("total")) or Decimal(0)
    return out


def _borrowed(status: Mapping[str, Any]) -> dict[tuple[str, str], Decimal]:
    out: dict[tuple[str, str], Decimal] = {}
    for flavor in status.get("flavorsReservation") or []:
        for res in flavor.get("resources") or []:
            out[(str(flavor.get("name")), str(res.get("name")))] = quantity.parse(res.get("borrowed")) or Decimal(0)
    return out


def _resource(flavor: str, res: Mapping[str, Any], reserved: Mapping[tuple[str, str], Decimal],
              used: Mapping[tuple[str, str], Decimal], borrowed: Mapping[tuple[str, str], Decimal]) -> dict[str, Any]:
    name = str(res.get("name"))
    nominal = quantity.parse(res.get("nominalQuota")) or Decimal(0)
    r, u = reserved.get((flavor, name), Decimal(0)), used.get((flavor, name), Decimal(0))
    return {"name": name, "nominal": quantity.show(name, nominal),
            "borrowingLimit": quantity.show(name, quantity.parse(res.get("borrowingLimit"))),
            "lendingLimit": quantity.show(name, quantity.parse(res.get("lendingLimit"))),
            "reserved": quantity.show(name, r), "used": quantity.show(name, u),
            "remaining": quantity.show(name, max(nominal - r, Decimal(0))),
            "borrowed": quantity.show(name, borrowed.get((flavor, name), Decimal(0)))}


async def _optional(session: KubeSession, path: str, what: str, warnings: list[str]) -> dict[str, Any] | None:
    try:
        obj = await session.get(path, missing_ok=True)
    except KubeApiError as exc:
        warnings.append(f"cannot read {what}: {exc.message}")
        return None
    if obj is None:
        warnings.append(f"{what} not found")
    return obj


async def _flavors(session: KubeSession, cq: Mapping[str, Any], warnings: list[str]) -> list[dict[str, Any]]:
    status = cq.get("status") or {}
    reserved, used, borrowed = _usage(status, "flavorsReservation"), _usage(status, "flavorsUsage"), _borrowed(status)
    out = []
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            name = str(flavor.get("name"))
            rf = await _optional(session, f"{KUEUE_API}/resourceflavors/{name}", f'ResourceFlavor "{name}"',
                                 warnings)
            spec = (rf or {}).get("spec") or {}
            out.append({"name": name, "flavorFound": rf is not None,
                        "nodeLabels": dict(spec.get("nodeLabels") or {}),
                        "tolerations": list(spec.get("tolerations") or []) + [
                            {"key": t.get("key"), "operator": "Equal", "value": t.get("value"),
                             "effect": t.get("effect")} for t in spec.get("nodeTaints") or []],
                        "resources": [_resource(name, r, reserved, used, borrowed)
                                      for r in flavor.get("resources") or []]})
    return out


async def show_quota(target: Target, workspace: str, cluster_queue: str | None) -> dict[str, Any]:
    """The ``tau.workspace.quota.v1`` document for ``workspace``."""
    warnings: list[str] = []
    async with taugrid_api(target) as session:
        view = await fetch(session, target, workspace)
        ns, lq_name = view.namespace, view.local_queue
        lq = await _optional(session, f"{KUEUE_API}/namespaces/{ns}/localqueues/{lq_name}",
                             f'LocalQueue "{ns}/{lq_name}"', warnings) if ns and lq_name else None
        cq_name = cluster_queue or view.cluster_queue or str(((lq or {}).get("spec") or {}).get("clusterQueue") or "")
        cq = await _optional(session, f"{KUEUE_API}/clusterqueues/{cq_name}", f'ClusterQueue "{cq_name}"',
                             warnings) if cq_name else None
        if not cq_name:
            warnings.append("the workspace reports no ClusterQueue yet; pass --cluster-queue")
        flavors = await _flavors(session, cq, warnings) if cq else []
    lq_status = (lq or {}).get("status") or {}
    workloads = {"found": lq is not None, "pending": int(lq_status.get("pendingWorkloads") or 0),
                 "admitted": int(lq_status.get("admittedWorkloads") or 0),
                 "reserving": int(lq_status.get("reservingWorkloads") or 0)}
    return {"schema": SCHEMA, "workspace": workspace, "namespace": ns, "localQueue": lq_name,
            "clusterQueue": cq_name, "workloads": workloads, "flavors": flavors, "warnings": warnings}


def quota_text(doc: Mapping[str, Any]) -> str:
    w = doc["workloads"]
    counts = f"{w['admitted']} admitted, {w['pending']} pending, {w['reserving']} reserving" if w["found"] else "-"
    out = [f"Workspace:    {doc['workspace']}", f"Namespace:    {doc['namespace'] or '-'}",
           f"LocalQueue:   {doc['localQueue'] or '-'}", f"ClusterQueue: {doc['clusterQueue'] or '-'}",
           f"Workloads:    {counts}", "", "Quota by flavor:"]
    rows = [[f["name"], r["name"], r["nominal"], r["reserved"], r["used"], r["remaining"], r["borrowingLimit"]]
            for f in doc["flavors"] for r in f["resources"]]
    out.append(render_table(rows, ["FLAVOR", "RESOURCE", "NOMINAL", "RESERVED", "USED", "REMAINING",
                                   "BORROWING_LIMIT"]) if rows else "  (none)")
    out += ["", "Flavor placement:"]
    for f in doc["flavors"]:
        labels = ",".join(f"{k}={v}" for k, v in sorted(f["nodeLabels"].items())) or "-"
        tolerations = ",".join(f"{t.get('key')}={t.get('value') or ''}:{t.get('effect') or ''}"
                               for t in f["tolerations"]) or "-"
        out.append(f"  {f['name']}: nodeLabels {labels}; tolerations {tolerations}"
                   + ("" if f["flavorFound"] else " (flavor not readable)"))
    if doc["warnings"]:
        out += ["", "Warnings:"] + [f"  - {w}" for w in doc["warnings"]]
    return "\n".join(out)


@attrs.frozen
class QuotaRequest:
    workspace: str
    resource: str
    requested: int
    reason: str
    system_namespace: str
    current: int | None = None
    duration: str | None = None
    mutation_mode: str = "ReportOnly"

    @property
    def name(self) -> str:
        return f"{self.workspace}-{self.resource}-quota-request"

    def validated(self) -> QuotaRequest:
        names.dns_label(self.workspace, "workspace name")
        if not self.resource:
            raise UsageError("--resource is required", hint="for example --resource h200")
        names.dns_label(self.resource, "--resource")
        names.dns_label(self.name, "quota request name")
        if self.requested <= 0:
            raise UsageError("--requested must be > 0")
        if not self.reason.strip():
            raise UsageError("--reason is required", hint="say what the extra quota is for")
        names.plain_text(self.reason, "--reason")
        if self.mutation_mode not in MUTATION_MODES:
            raise UsageError(f"--mutation-mode must be one of: {', '.join(MUTATION_MODES)}")
        return self

    def manifest(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"workspace": self.workspace, "resource": self.resource,
                                "requested": self.requested, "reason": self.reason,
                                "mutationMode": self.mutation_mode}
        annotations = {}
        if self.current is not None:
            annotations[f"{keys.DOMAIN}/current"] = str(self.current)
        if self.duration:
            annotations[f"{keys.DOMAIN}/duration"] = self.duration
        meta: dict[str, Any] = {"name": self.name, "namespace": self.system_namespace}
        if annotations:
            meta["annotations"] = annotations
        return {"apiVersion": keys.API_VERSION, "kind": "TauQuotaRequest", "metadata": meta, "spec": spec}


async def submit_request(target: Target, request: QuotaRequest) -> str:
    """Create the request (server dry run first); an identical existing request is reported, not replaced."""
    body = request.manifest()
    async with taugrid_api(target) as session:
        try:
            await session.create(target.quota_requests_path(), body, dry_run=True)
            await session.create(target.quota_requests_path(), body)
        except KubeApiError as exc:
            if not exc.already_exists:
                raise
            existing = await session.get(target.quota_requests_path(request.name)) or {}
            if existing.get("spec") != body["spec"]:
                raise ConflictError(f'TauQuotaRequest "{request.name}" already exists with a different request',
                                    hint="ask the platform team to close it, then request again") from exc
            return f"TauQuotaRequest {target.system_namespace}/{request.name} already exists; no changes made"
    return (f"TauQuotaRequest {target.system_namespace}/{request.name} created; the platform team approves or "
            f"rejects it (kubectl get quotarequests.tau.azure.com {request.name} -n {target.system_namespace})")
