"""What a TauWorkspace grants and owns: RBAC, its LocalQueue, its workload ServiceAccount (§2.3 steps 9-12).

Every object is created with :func:`~tau_controller.api.owned_labels`; an existing object without them is never
adopted, changed or deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tau_controller import api
from tau_controller.api import (
    CLUSTER_QUEUE,
    CLUSTER_ROLE_BINDING,
    LOCAL_QUEUE,
    ROLE,
    ROLE_BINDING,
    SERVICE_ACCOUNT,
    Kind,
    is_owned,
    owned_labels,
)
from tau_controller.context import Ctx, log
from tau_core import keys
from tau_core.kube import KubeApiError

RESEARCHER_ROLE = "tau-researcher-v1"
CLUSTERQUEUE_READER_ROLE = "tau-clusterqueue-reader-v1"
RBAC_GROUP = "rbac.authorization.k8s.io"


class NotOurs(Exception):
    """An object of that name exists and this workspace does not own it."""


def reader_name(workspace: str) -> str:
    return f"tau-workspace-reader-{workspace}"


def clusterqueue_reader_name(workspace: str) -> str:
    return f"tau-clusterqueue-reader-{workspace}"


def _kind_label(kind: Kind) -> str:
    return kind.kind


async def ensure_owned(ctx: Ctx, kind: Kind, workspace: str, body: dict[str, Any],
                       compare: tuple[str, ...]) -> dict[str, Any]:
    """Create ``body`` or bring our existing object's ``compare`` fields and labels back to it."""
    meta = body["metadata"]
    meta.setdefault("labels", {}).update(owned_labels(workspace))
    existing = await ctx.client.get(kind, meta.get("namespace"), meta["name"])
    if existing is None:
        try:
            return await ctx.client.create(kind, body)
        except KubeApiError as exc:
            if exc.status != 409:
                raise
            existing = await ctx.client.session.get(kind.path(meta.get("namespace"), meta["name"]), missing_ok=True)
            if existing is None:
                raise
    if not is_owned(existing, workspace):
        where = f"{meta['namespace']}/" if meta.get("namespace") else ""
        raise NotOurs(f"{_kind_label(kind)} {where}{meta['name']} already exists and is not owned by workspace "
                      f"{workspace!r}")
    labels = existing["metadata"].get("labels") or {}
    stale_labels = any(labels.get(k) != v for k, v in meta["labels"].items())
    annotations = meta.get("annotations") or {}
    stale_annotations = any((existing["metadata"].get("annotations") or {}).get(k) != v
                            for k, v in annotations.items())
    stale = [f for f in compare if existing.get(f) != body.get(f)]
    if not (stale or stale_labels or stale_annotations):
        return existing
    if "roleRef" in stale:  # immutable: replace the binding
        await ctx.client.delete(kind, meta.get("namespace"), meta["name"], uid=existing["metadata"].get("uid"))
        return await ctx.client.create(kind, body)
    updated = dict(existing)
    updated["metadata"] = dict(existing["metadata"], labels={**labels, **meta["labels"]},
                               annotations={**(existing["metadata"].get("annotations") or {}), **annotations})
    for f in compare:
        updated[f] = body.get(f)
    return await ctx.client.replace(kind, updated)


def _subject(spec: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    subject = spec.get("kubernetesSubject") or {}
    kind, name = str(subject.get("kind")), str(subject.get("name"))
    if kind == "ServiceAccount":
        return {"kind": kind, "name": name, "namespace": namespace}
    return {"kind": kind, "name": name, "apiGroup": RBAC_GROUP}


def _binding(kind: str, name: str, namespace: str | None, role_kind: str, role: str,
             subjects: list[dict[str, Any]]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api.RBAC, "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role}, "subjects": subjects}


async def reconcile_rbac(ctx: Ctx, ws: Mapping[str, Any], target: str) -> None:
    """workspace-rbac: the three bindings and the reader Role; cluster-wide: remove our bindings."""
    name = ws["metadata"]["name"]
    spec = ws.get("spec") or {}
    mode = (spec.get("authorization") or {}).get("mode") or "workspace-rbac"
    sysns = ctx.system_namespace
    if mode == "cluster-wide":
        await delete_owned(ctx, ROLE_BINDING, target, RESEARCHER_ROLE, name)
        await delete_owned(ctx, CLUSTER_ROLE_BINDING, None, clusterqueue_reader_name(name), name)
        await delete_owned(ctx, ROLE_BINDING, sysns, reader_name(name), name)
        await delete_owned(ctx, ROLE, sysns, reader_name(name), name)
        return
    if not spec.get("principalRef") or not spec.get("kubernetesSubject"):
        raise ValueError("workspace-rbac authorization requires principalRef and kubernetesSubject")
    compare = ("roleRef", "subjects")
    await ensure_owned(ctx, ROLE_BINDING, name, _binding("RoleBinding", RESEARCHER_ROLE, target, "ClusterRole",
                                                         RESEARCHER_ROLE, [_subject(spec, target)]), compare)
    # a ServiceAccount subject lives in the target namespace, except in the system-namespace reader binding
    await ensure_owned(ctx, CLUSTER_ROLE_BINDING, name, _binding(
        "ClusterRoleBinding", clusterqueue_reader_name(name), None, "ClusterRole", CLUSTERQUEUE_READER_ROLE,
        [_subject(spec, target)]), compare)
    role = {"apiVersion": api.RBAC, "kind": "Role", "metadata": {"name": reader_name(name), "namespace": sysns},
            "rules": [{"apiGroups": [keys.API_GROUP], "resources": ["workspaces", "workspaces/status"],
                       "resourceNames": [name], "verbs": ["get"]},
                      {"apiGroups": [keys.API_GROUP], "resources": ["quotarequests"], "verbs": ["create", "get"]}]}
    await ensure_owned(ctx, ROLE, name, role, ("rules",))
    await ensure_owned(ctx, ROLE_BINDING, name, _binding("RoleBinding", reader_name(name), sysns, "Role",
                                                         reader_name(name), [_subject(spec, sysns)]), compare)


async def delete_owned(ctx: Ctx, kind: Kind, namespace: str | None, name: str, workspace: str,
                       live: bool = True) -> None:
    """Delete our object of that name (``live=False``: only if the watch cache knows it)."""
    existing = await ctx.client.get(kind, namespace, name) if live else ctx.client.cache.get(kind, namespace, name)
    if existing is not None and is_owned(existing, workspace):
        await ctx.client.delete(kind, namespace, name, uid=existing["metadata"].get("uid"))


async def reconcile_local_queue(ctx: Ctx, workspace: str, target: str, queue: str) -> tuple[bool, str, str]:
    """``(ready, message, clusterQueue)`` for LocalQueue ``queue`` in ``target`` (step 10)."""
    lq = await ctx.client.get(LOCAL_QUEUE, target, queue)
    if lq is None or is_owned(lq, workspace):
        cq = await ctx.client.get(CLUSTER_QUEUE, None, queue)
        if cq is None:
            return False, f"backing ClusterQueue {queue!r} is not ready: clusterqueues {queue!r} not found", queue
        body = {"apiVersion": api.KUEUE, "kind": "LocalQueue",
                "metadata": {"name": queue, "namespace": target}, "spec": {"clusterQueue": queue}}
        if lq is None:
            await ensure_owned(ctx, LOCAL_QUEUE, workspace, body, ())
        elif (lq.get("spec") or {}).get("clusterQueue") != queue:  # immutable: recreate ours
            await ctx.client.delete(LOCAL_QUEUE, target, queue, uid=lq["metadata"].get("uid"))
            await ensure_owned(ctx, LOCAL_QUEUE, workspace, body, ())
        return True, "workspace LocalQueue and its ClusterQueue are reconciled", queue
    owner = (lq["metadata"].get("labels") or {}).get(keys.WORKSPACE)
    cq_name = str((lq.get("spec") or {}).get("clusterQueue") or "")
    if owner and owner != workspace and is_owned(lq):
        return False, f"LocalQueue {queue!r} is owned by TauWorkspace {owner!r}", cq_name
    if not cq_name:
        return False, f"LocalQueue {queue!r} does not reference a ClusterQueue", ""
    if await ctx.client.get(CLUSTER_QUEUE, None, cq_name) is None:
        return False, f"backing ClusterQueue {cq_name!r} is not ready: clusterqueues {cq_name!r} not found", cq_name
    return True, "workspace queue and backing ClusterQueue are readable", cq_name


async def prune_local_queues(ctx: Ctx, workspace: str, keep: tuple[str, str] | None) -> None:
    for lq in await ctx.client.list(LOCAL_QUEUE, labels=owned_labels(workspace)):
        meta = lq["metadata"]
        if (meta.get("namespace"), meta["name"]) != keep:
            await ctx.client.delete(LOCAL_QUEUE, meta.get("namespace"), meta["name"], uid=meta.get("uid"))


async def reconcile_service_account(ctx: Ctx, ws: Mapping[str, Any], target: str) -> tuple[str, str, str]:
    """WorkloadIdentityReady as ``(status, reason, message)`` (step 11)."""
    identity = (ws.get("spec") or {}).get("workloadIdentity")
    if not identity:
        return "Unknown", "NotConfigured", "spec.workloadIdentity is not set"
    sa_name = str(identity.get("serviceAccountName"))
    body = {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": sa_name, "namespace": target,
                         "labels": {keys.WORKLOAD_IDENTITY_USE: "true"},
                         "annotations": {keys.WORKLOAD_IDENTITY_CLIENT_ID: str(identity.get("clientId"))}}}
    try:
        await ensure_owned(ctx, SERVICE_ACCOUNT, ws["metadata"]["name"], body, ())
    except (NotOurs, KubeApiError) as exc:
        if isinstance(exc, KubeApiError) and api.transient(exc):
            raise
        return "False", "ServiceAccountNotReady", str(exc)
    return "True", "ServiceAccountReady", f"workload identity ServiceAccount {target}/{sa_name} is reconciled"


async def prune_stale(ctx: Ctx, ws: Mapping[str, Any], target: str | None, rbac_mode: str) -> None:
    """Delete our Roles, RoleBindings and ServiceAccounts outside the system namespace that are not wanted
    (``target`` None: the target namespace is not usable, nothing is kept)."""
    name = ws["metadata"]["name"]
    identity = (ws.get("spec") or {}).get("workloadIdentity") or {}
    keep: set[tuple[str, str | None, str]] = set()
    if target is not None and rbac_mode == "workspace-rbac":
        keep.add((ROLE_BINDING.plural, target, RESEARCHER_ROLE))
    if target is not None and identity.get("serviceAccountName"):
        keep.add((SERVICE_ACCOUNT.plural, target, str(identity["serviceAccountName"])))
    for kind in (ROLE, ROLE_BINDING, SERVICE_ACCOUNT):
        for obj in await ctx.client.list(kind, labels=owned_labels(name)):
            meta = obj["metadata"]
            ns = meta.get("namespace")
            if ns == ctx.system_namespace or (kind.plural, ns, meta["name"]) in keep:
                continue
            log.info("deleting stale %s %s/%s of workspace %s", kind.kind, ns, meta["name"], name)
            await ctx.client.delete(kind, ns, meta["name"], uid=meta.get("uid"))


async def cleanup_access(ctx: Ctx, workspace: str, *, live: bool = True) -> None:
    """``cleanupWorkspaceAccess``: every grant and queue of the workspace; namespaces and data are retained.

    ``live=False`` lists from the watch cache (the periodic re-check of a blocked workspace); the finalizer lists
    from the API server so that nothing is left behind."""
    for kind in (ROLE, ROLE_BINDING, SERVICE_ACCOUNT):
        for obj in await ctx.client.list(kind, labels=owned_labels(workspace), live=live):
            meta = obj["metadata"]
            if meta.get("namespace") != ctx.system_namespace:
                await ctx.client.delete(kind, meta.get("namespace"), meta["name"], uid=meta.get("uid"))
    await delete_owned(ctx, CLUSTER_ROLE_BINDING, None, clusterqueue_reader_name(workspace), workspace, live)
    for lq in await ctx.client.list(LOCAL_QUEUE, labels=owned_labels(workspace), live=live):
        meta = lq["metadata"]
        await ctx.client.delete(LOCAL_QUEUE, meta.get("namespace"), meta["name"], uid=meta.get("uid"))
    await delete_owned(ctx, ROLE_BINDING, ctx.system_namespace, reader_name(workspace), workspace, live)
    await delete_owned(ctx, ROLE, ctx.system_namespace, reader_name(workspace), workspace, live)
