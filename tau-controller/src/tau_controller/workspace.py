"""The TauWorkspace reconciler, the 13 steps of control-plane.md §2.3."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tau_controller import access
from tau_controller.api import NAMESPACE, TAU_CLUSTER, WORKSPACE, is_owned, transient
from tau_controller.conditions import FALSE, TRUE, UNKNOWN, cond, merge_conditions, status_equal
from tau_controller.context import Ctx, ReconcileError, log
from tau_core import keys
from tau_core.kube import KubeApiError

REQUEUE_NOT_READY = 30.0
REQUEUE_READY = 300.0
FINALIZER = keys.WORKSPACE_CLEANUP_FINALIZER
BLOCKED = "AdditionalWorkspaceBlocked"
NO_DRIFT = ("False", "NoDrift", "No owned resource drift detected")
NAMESPACE_LABELS = (keys.APP_MANAGED_BY, keys.WORKSPACE, keys.LOCAL_QUEUE, keys.KUEUE_DEFAULT_LOCAL_QUEUE)
PSA = {keys.PSA_ENFORCE: "baseline", keys.PSA_AUDIT: "restricted", keys.PSA_WARN: "restricted"}


class StepFailed(Exception):
    """A step's failure that becomes a condition (not an error of the reconcile loop)."""


def _created(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return str(meta.get("creationTimestamp") or ""), str(meta["name"])


def _blocked(obj: Mapping[str, Any]) -> bool:
    return any(c.get("reason") == BLOCKED for c in (obj.get("status") or {}).get("conditions") or [])


def select_primary(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Step 4: the marked workspace, else the oldest incumbent, else the oldest non-terminating one."""
    marked = [i for i in items if (i["metadata"].get("annotations") or {}).get(keys.V0_PRIMARY_WORKSPACE) == "true"]
    if len(marked) > 1:
        a, b = sorted(i["metadata"]["name"] for i in marked)[:2]
        raise ReconcileError(f"multiple TauWorkspaces claim the v0 primary marker: {a!r} and {b!r}")
    if marked:
        return marked[0]
    live = [i for i in items if not i["metadata"].get("deletionTimestamp")]
    incumbents = [i for i in live if i.get("status") and not _blocked(i)]
    pool = incumbents or live
    if not pool:
        raise ReconcileError("no non-terminating TauWorkspace exists")
    return min(pool, key=_created)


def reserved_reason(namespace: str, system_namespace: str) -> str | None:
    if namespace in (system_namespace, "tau-system", "tau-platform"):
        return "the Tau system namespace is owned by the platform installer"
    if namespace.startswith("kube-"):
        return "kube-* namespaces are reserved by Kubernetes"
    if namespace == "default":
        return "the default namespace is shared cluster-wide"
    return None


async def reconcile_workspace(ctx: Ctx, name: str) -> float | None:
    items = await ctx.client.list(WORKSPACE, ctx.system_namespace, live=True)  # the uncached reader of step 4
    ws = next((i for i in items if i["metadata"]["name"] == name), None)
    if ws is None:
        return None
    meta = ws["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    if meta.get("deletionTimestamp"):
        if FINALIZER in finalizers:
            await access.cleanup_access(ctx, name)
            finalizers.remove(FINALIZER)
            await ctx.client.merge_patch(WORKSPACE, ctx.system_namespace, name,
                                         {"metadata": {"finalizers": finalizers,
                                                       "resourceVersion": meta["resourceVersion"]}})
        return None
    if FINALIZER not in finalizers:
        await ctx.client.merge_patch(WORKSPACE, ctx.system_namespace, name,
                                     {"metadata": {"finalizers": [*finalizers, FINALIZER],
                                                   "resourceVersion": meta["resourceVersion"]}})
        return 0.0
    primary = select_primary(items)
    target = str(((ws.get("spec") or {}).get("target") or {}).get("namespace") or name)
    if primary["metadata"]["name"] != name:
        return await _block(ctx, ws, primary["metadata"]["name"], target)
    if (meta.get("annotations") or {}).get(keys.V0_PRIMARY_WORKSPACE) != "true":
        await ctx.client.merge_patch(WORKSPACE, ctx.system_namespace, name,
                                     {"metadata": {"annotations": {keys.V0_PRIMARY_WORKSPACE: "true"}}})
        await ctx.event(ws, "PrimaryWorkspace", f"TauWorkspace {name!r} is the active (primary) workspace")
        return 0.0
    return await _reconcile_primary(ctx, ws, items, target)


async def _block(ctx: Ctx, ws: dict[str, Any], primary: str, target: str) -> float:
    """Step 5: the single-active-workspace rule."""
    name = ws["metadata"]["name"]
    await access.cleanup_access(ctx, name, live=False)
    message = f"TauGrid v0 activates one workspace; {primary!r} is primary and {name!r} is blocked"
    conditions = [cond("RBACReady", FALSE, BLOCKED, message), cond("QueueReady", FALSE, BLOCKED, message),
                  cond("DriftDetected", *NO_DRIFT)]
    status = {"phase": "Degraded", "target": {"resolvedNamespace": target}}
    await write_status(ctx, ws, status, conditions)
    return REQUEUE_NOT_READY


async def default_queue(ctx: Ctx, ws: Mapping[str, Any]) -> str:
    """Step 7: ``spec.queue``, else the TauCluster default (StepFailed when neither is available)."""
    queue = str((ws.get("spec") or {}).get("queue") or "")
    if queue:
        return queue
    try:
        cluster = await ctx.client.get(TAU_CLUSTER, None, "cluster")
    except KubeApiError as exc:
        if transient(exc):
            raise
        raise StepFailed(f"spec.queue is empty and the TauCluster default is unavailable: {exc}") from exc
    if cluster is None:
        raise StepFailed("spec.queue is empty and the TauCluster default is unavailable: TauCluster \"cluster\" "
                         "not found")
    default = ((cluster.get("spec") or {}).get("workspaceDefaults") or {}).get("defaultQueue")
    if not default:
        raise StepFailed("spec.queue is empty and TauCluster \"cluster\" declares no workspaceDefaults.defaultQueue")
    return str(default)


async def _reconcile_primary(ctx: Ctx, ws: dict[str, Any], items: list[dict[str, Any]], target: str) -> float:
    name = ws["metadata"]["name"]
    spec = ws.get("spec") or {}
    try:
        queue = await default_queue(ctx, ws)
    except StepFailed as exc:
        unresolved = [cond("RBACReady", FALSE, "QueueUnresolved", str(exc)),
                      cond("QueueReady", FALSE, "QueueUnresolved", str(exc)),
                      cond("WorkloadIdentityReady", UNKNOWN, "QueueUnresolved", str(exc)),
                      cond("DriftDetected", *NO_DRIFT)]
        await write_status(ctx, ws, {"phase": "Degraded", "target": {"resolvedNamespace": target}}, unresolved)
        return REQUEUE_NOT_READY
    conditions: dict[str, dict[str, Any]] = {}
    drift = await _namespace_step(ctx, ws, items, target, queue)
    conditions["DriftDetected"] = drift
    status: dict[str, Any] = {"target": {"resolvedNamespace": target}}
    mode = (spec.get("authorization") or {}).get("mode") or "workspace-rbac"
    if drift["reason"] == "NamespaceReconcileFailed":
        # no namespace to grant in: every grant, queue and ServiceAccount the workspace still holds elsewhere
        # is withdrawn (pruned below with nothing kept), and each condition says why
        message = drift["message"]
        conditions["RBACReady"] = cond("RBACReady", FALSE, "AuthorizationNotReady", message)
        conditions["QueueReady"] = cond("QueueReady", FALSE, "QueueNotReady", message)
        conditions["WorkloadIdentityReady"] = cond(
            "WorkloadIdentityReady", *((FALSE, "ServiceAccountNotReady", message) if spec.get("workloadIdentity")
                                       else (UNKNOWN, "NotConfigured", "spec.workloadIdentity is not set")))
        status["queue"] = {"localQueue": queue}
        await _prune_queues(ctx, name, None, conditions)
        kept: str | None = None
    else:
        conditions["RBACReady"] = await _rbac_step(ctx, ws, target, mode)
        conditions["QueueReady"], status["queue"] = await _queue_step(ctx, name, target, queue, conditions)
        conditions["WorkloadIdentityReady"] = cond("WorkloadIdentityReady",
                                                   *await access.reconcile_service_account(ctx, ws, target))
        kept = target
    try:
        await access.prune_stale(ctx, ws, kept, mode)
    except KubeApiError as exc:
        if transient(exc):
            raise
        conditions["DriftDetected"] = cond("DriftDetected", TRUE, "RBACCleanupFailed", str(exc))
    status["phase"] = phase(conditions)
    order = ("RBACReady", "QueueReady", "WorkloadIdentityReady", "DriftDetected")
    await write_status(ctx, ws, status, [conditions[t] for t in order if t in conditions])
    return REQUEUE_READY if status["phase"] == "Ready" else REQUEUE_NOT_READY


def phase(conditions: Mapping[str, Mapping[str, Any]]) -> str:
    """Step 13."""
    if (conditions.get("DriftDetected") or {}).get("status") == TRUE:
        return "Degraded"
    gates = [(conditions.get(t) or {}).get("status") for t in ("RBACReady", "QueueReady")]
    if FALSE in gates:
        return "Degraded"
    return "Ready" if gates == [TRUE, TRUE] else "Pending"


async def _rbac_step(ctx: Ctx, ws: Mapping[str, Any], target: str, mode: str) -> dict[str, Any]:
    try:
        await access.reconcile_rbac(ctx, ws, target)
    except (access.NotOurs, ValueError, KubeApiError) as exc:
        if isinstance(exc, KubeApiError) and transient(exc):
            raise
        return cond("RBACReady", FALSE, "AuthorizationNotReady", str(exc))
    if mode == "cluster-wide":
        return cond("RBACReady", TRUE, "ExistingClusterAuthorization", "workspace relies on pre-existing cluster "
                    "authorization; the controller grants no researcher access")
    return cond("RBACReady", TRUE, "RoleBindingReady",
                "researcher namespace and ClusterQueue reader bindings are reconciled")


async def _queue_step(ctx: Ctx, name: str, target: str, queue: str,
                      conditions: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    try:
        ready, message, cq = await access.reconcile_local_queue(ctx, name, target, queue)
    except (access.NotOurs, KubeApiError) as exc:
        if isinstance(exc, KubeApiError) and transient(exc):
            raise
        ready, message, cq = False, str(exc), ""
    await _prune_queues(ctx, name, (target, queue), conditions)
    # the effective queue is reported even while it is not ready (the CLI shows a defaulted queue from here)
    queue_status = {"localQueue": queue, **({"clusterQueue": cq} if cq else {})}
    if ready:
        return cond("QueueReady", TRUE, "QueueReady", message), queue_status
    return cond("QueueReady", FALSE, "QueueNotReady", message), queue_status


async def _prune_queues(ctx: Ctx, name: str, keep: tuple[str, str] | None,
                        conditions: dict[str, dict[str, Any]]) -> None:
    try:
        await access.prune_local_queues(ctx, name, keep)
    except KubeApiError as exc:
        if transient(exc):
            raise
        conditions["DriftDetected"] = cond("DriftDetected", TRUE, "QueueCleanupFailed", str(exc))


async def _namespace_step(ctx: Ctx, ws: Mapping[str, Any], items: list[dict[str, Any]], target: str,
                          queue: str) -> dict[str, Any]:
    """Step 8; returns the DriftDetected condition."""
    try:
        await ensure_namespace(ctx, ws, items, target, queue)
    except (StepFailed, KubeApiError) as exc:
        if isinstance(exc, KubeApiError) and transient(exc):
            raise
        return cond("DriftDetected", TRUE, "NamespaceReconcileFailed", str(exc))
    previous = str(((ws.get("status") or {}).get("target") or {}).get("resolvedNamespace") or "")
    if previous and previous != target and not reserved_reason(previous, ctx.system_namespace):
        try:
            await release_namespace(ctx, ws["metadata"]["name"], previous)
        except KubeApiError as exc:
            if transient(exc):
                raise
            return cond("DriftDetected", TRUE, "NamespaceCleanupFailed", str(exc))
    return cond("DriftDetected", FALSE, "NoDrift", "target namespace is reconciled")


async def ensure_namespace(ctx: Ctx, ws: Mapping[str, Any], items: list[dict[str, Any]], target: str,
                           queue: str) -> None:
    name = ws["metadata"]["name"]
    spec = ws.get("spec") or {}
    reason = reserved_reason(target, ctx.system_namespace)
    if reason:
        raise StepFailed(f"refusing to manage namespace {target!r}: {reason}")
    create = bool((spec.get("target") or {}).get("createNamespace"))
    output_root = (spec.get("defaults") or {}).get("outputRoot")
    labels = {keys.WORKSPACE: name, keys.LOCAL_QUEUE: queue, keys.KUEUE_DEFAULT_LOCAL_QUEUE: queue}
    if create:
        labels.update({keys.APP_MANAGED_BY: keys.CONTROLLER_MANAGED_BY_VALUE, **PSA})
    ns = await ctx.client.get(NAMESPACE, None, target)
    if ns is None:
        if not create:
            raise StepFailed(f"target namespace {target!r} does not exist and spec.target.createNamespace is false")
        meta: dict[str, Any] = {"name": target, "labels": labels}
        if output_root:
            meta["annotations"] = {keys.RESULT_SCOPE: str(output_root)}
        await ctx.client.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
        return
    have = ns["metadata"].get("labels") or {}
    owner = have.get(keys.WORKSPACE)
    if owner and owner != name:
        if any(i["metadata"]["name"] == owner for i in items):
            raise StepFailed(f"target namespace {target!r} is already assigned to TauWorkspace {owner!r}")
        log.info("reclaiming namespace %s from deleted workspace %s", target, owner)
    patch: dict[str, Any] = {}
    changed = {k: v for k, v in labels.items() if have.get(k) != v}
    if changed:
        patch["labels"] = changed
    scope = (ns["metadata"].get("annotations") or {}).get(keys.RESULT_SCOPE)
    if scope != output_root and (output_root or scope is not None):
        patch["annotations"] = {keys.RESULT_SCOPE: str(output_root) if output_root else None}
    if patch:
        await ctx.client.merge_patch(NAMESPACE, None, target, {"metadata": patch})


async def release_namespace(ctx: Ctx, workspace: str, namespace: str) -> None:
    """Strip our labels and the result scope from a namespace the workspace no longer targets."""
    ns = await ctx.client.get(NAMESPACE, None, namespace)
    if ns is None or (ns["metadata"].get("labels") or {}).get(keys.WORKSPACE) != workspace:
        return
    labels = {k: None for k in NAMESPACE_LABELS if k in (ns["metadata"].get("labels") or {})}
    if not is_owned(ns):
        labels.pop(keys.APP_MANAGED_BY, None)
    await ctx.client.merge_patch(NAMESPACE, None, namespace, {"metadata": {
        "labels": labels, "annotations": {keys.RESULT_SCOPE: None}}})


async def write_status(ctx: Ctx, obj: dict[str, Any], status: dict[str, Any],
                       conditions: list[dict[str, Any]], kind: Any = WORKSPACE) -> bool:
    """Replace ``status`` (with ``observedGeneration``, also on each condition) when it changed semantically;
    True when written."""
    previous = obj.get("status") or {}
    generation = int(obj["metadata"].get("generation") or 0)
    conditions = [{"observedGeneration": generation, **c} for c in conditions]
    desired = dict(status, observedGeneration=generation,
                   conditions=merge_conditions(previous.get("conditions"), conditions))
    if status_equal(previous, desired):
        return False
    await ctx.client.replace(kind, dict(obj, status=desired), subresource="status")
    return True
