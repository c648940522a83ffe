"""The TauCluster reconciler (control-plane.md §2.2): node labels, MultiKueue capability, workload profiles."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from tau_controller.api import ADMISSION_CHECK, MULTIKUEUE_CLUSTER, MULTIKUEUE_CONFIG, TAU_CLUSTER
from tau_controller.conditions import FALSE, TRUE, UNKNOWN, cond, find, merge_conditions
from tau_controller.context import Ctx, ReconcileError
from tau_controller.nodes import reconcile_nodes
from tau_controller.profiles import MULTIKUEUE_CONTROLLER, resolve_all
from tau_controller.workspace import write_status
from tau_core.kube import KubeApiError
from tau_core.retry import RETRY_CAPABILITY

RESYNC = 600.0
SINGLETON = "cluster"
DEFAULT_QUEUE = "jobqueue"


def desired_state_hash(spec: Mapping[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of the defaulted spec."""
    defaulted = json.loads(json.dumps(spec))
    defaults = defaulted.setdefault("workspaceDefaults", {})
    defaults.setdefault("defaultQueue", DEFAULT_QUEUE)
    blob = json.dumps(defaulted, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


async def multikueue_ready(ctx: Ctx) -> tuple[bool, str]:
    """Step 2: ``(ready, message)``."""
    try:
        checks = await ctx.client.list(ADMISSION_CHECK, live=True)
    except KubeApiError as exc:
        return False, f"cannot list AdmissionChecks: {exc}"
    checks = [c for c in checks if (c.get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER]
    if not checks:
        return False, f"no AdmissionCheck uses controller {MULTIKUEUE_CONTROLLER}"
    problems = []
    for check in sorted(checks, key=lambda c: c["metadata"]["name"]):
        name = check["metadata"]["name"]
        active = find((check.get("status") or {}).get("conditions"), "Active")
        params = (check.get("spec") or {}).get("parameters") or {}
        if not active or active.get("status") != TRUE:
            problems.append(f"AdmissionCheck {name!r} is not Active")
            continue
        if params.get("apiGroup") != "kueue.x-k8s.io" or params.get("kind") != "MultiKueueConfig" or \
                not params.get("name"):
            problems.append(f"AdmissionCheck {name!r} does not reference a MultiKueueConfig")
            continue
        config = await ctx.client.get(MULTIKUEUE_CONFIG, None, str(params["name"]))
        workers = list(((config or {}).get("spec") or {}).get("clusters") or [])
        if not workers:
            problems.append(f"MultiKueueConfig {params['name']!r} has no worker clusters")
            continue
        for worker in workers:
            mkc = await ctx.client.get(MULTIKUEUE_CLUSTER, None, str(worker))
            if (find(((mkc or {}).get("status") or {}).get("conditions"), "Active") or {}).get("status") == TRUE:
                return True, f"AdmissionCheck {name!r} has an active MultiKueue config and worker"
        problems.append(f"MultiKueueConfig {params['name']!r} has no Active worker clusters")
    return False, "; ".join(problems)


def _invalid_singleton() -> tuple[str, list[dict[str, Any]]]:
    msg = "TauCluster must be named cluster"
    skipped = "this TauCluster is not the singleton"
    return "Degraded", [
        *(cond(t, UNKNOWN, "ObservationSkipped", skipped) for t in ("NodesReady", "WorkloadProfilesReady",
                                                                      "MultiKueueReady", "DriftDetected")),
        cond("QueuesReady", UNKNOWN, "ObservationPending", "queue observation is not enabled"),
        cond("WorkspacesReady", UNKNOWN, "ObservationPending", "workspace aggregation is not enabled"),
        cond("OwnershipConflict", FALSE, "NoConflictObserved", "no ownership conflict observed"),
        cond("DeletionBlocked", FALSE, "NoDeletionBlock", "node labels are retained when TauCluster is deleted"),
        cond("ObserveOnly", TRUE, "InvalidSingletonName", msg), cond("ReconcilePaused", TRUE, "InvalidSingletonName",
                                                                     msg),
        cond("Ready", FALSE, "InvalidSingletonName", msg)]


async def reconcile_cluster(ctx: Ctx, name: str) -> float | None:
    obj = await ctx.client.get(TAU_CLUSTER, None, name)
    if obj is None:
        return RESYNC if name == SINGLETON else None
    generation = int(obj["metadata"].get("generation") or 0)
    spec = obj.get("spec") or {}
    if name != SINGLETON:
        phase, conditions = _invalid_singleton()
        await write_status(ctx, obj, {"phase": phase, "desiredStateHash": desired_state_hash(spec),
                                      "managedResources": []}, conditions, kind=TAU_CLUSTER)
        return None
    reconcile = (spec.get("managementMode") or "Observe") == "Reconcile"
    nodes = await reconcile_nodes(ctx, spec, reconcile)
    mk_ok, mk_message = await multikueue_ready(ctx)
    multikueue = cond("MultiKueueReady", TRUE if mk_ok else FALSE, "Ready" if mk_ok else "PrerequisitesNotReady",
                      mk_message, generation)
    profiles, profiles_ready = await resolve_all(ctx, spec, generation, multikueue)
    nodes_ready = (find(nodes.conditions, "NodesReady") or {}).get("status") == TRUE
    conditions = [*nodes.conditions, profiles_ready, multikueue,
                  cond("QueuesReady", UNKNOWN, "ObservationPending", "queue observation is not enabled"),
                  cond("WorkspacesReady", UNKNOWN, "ObservationPending", "workspace aggregation is not enabled"),
                  cond("DeletionBlocked", FALSE, "NoDeletionBlock",
                       "node labels are retained when TauCluster is deleted")]
    if ctx.server_side_retry:
        conditions.append(cond(RETRY_CAPABILITY, TRUE, "ControllerRetries", "the Tau controller resubmits failed "
                               "runs stamped tau.azure.com/retry-owner: controller", generation))
    if reconcile:
        phase = "Ready" if nodes_ready and not nodes.failed else ("Degraded" if nodes.failed else "Pending")
        conditions += [cond("ObserveOnly", FALSE, "ReconcileMode", "managementMode is Reconcile"),
                       cond("ReconcilePaused", FALSE, "NodeReconciliationActive", "node reconciliation is active"),
                       cond("Ready", TRUE, "NodeReconciliationReady", "node labels are reconciled") if phase == "Ready"
                       else cond("Ready", FALSE, "PartialReconciliation", "node reconciliation is incomplete")]
    else:
        phase = "Degraded" if nodes.failed else "Pending"
        conditions += [cond("ObserveOnly", TRUE, "ObserveMode", "managementMode is Observe: nothing is changed"),
                       cond("ReconcilePaused", FALSE, "ObserveMode", "managementMode is Observe"),
                       cond("Ready", FALSE, "ObservationPending", "Observe mode reports drift without repairing it")]
    previous = {p.get("name"): p for p in ((obj.get("status") or {}).get("workloadProfiles") or {}).get("profiles")
                or []}
    for profile in profiles["profiles"]:
        before = previous.get(profile["name"]) or {}
        profile["conditions"] = merge_conditions(before.get("conditions"), profile["conditions"])
    status = {"phase": phase, "desiredStateHash": desired_state_hash(spec),
              "nodes": {"observed": nodes.observed, "ready": nodes.ready, "drifted": nodes.drifted},
              "workloadProfiles": profiles, "managedResources": []}
    await write_status(ctx, obj, status, conditions, kind=TAU_CLUSTER)
    if nodes.error:  # the status says what failed; the work queue retries it with backoff, not in 10 min
        raise ReconcileError(f"node label reconciliation failed: {nodes.error}")
    return RESYNC
