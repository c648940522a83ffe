"""The Kubernetes side of ``tau serve``: the default LocalQueue, server-side apply, reads, scale and delete.

Every call goes through :class:`tau_core.kube.KubeSession` (kubernetes-asyncio).  Writes use server-side
apply with the field manager :data:`FIELD_MANAGER`, so a redeploy of the same intent changes nothing
(no new ``resourceVersion``) and fields other managers own are kept.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from tau_core import keys
from tau_core.errors import ClusterError, ConfigError, UsageError
from tau_core.kube import KubeApiError, KubeSession, api_path

FIELD_MANAGER = "tau-serve"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
APIS: dict[str, tuple[str, str]] = {
    "RayService": ("ray.io/v1", "rayservices"), "Deployment": ("apps/v1", "deployments"),
    "Service": ("v1", "services"), "HorizontalPodAutoscaler": ("autoscaling/v2", "horizontalpodautoscalers"),
}
KIND_OF = {"rayservice": "RayService", "deployment": "Deployment"}
#: What ``delete --kind=deployment`` removes besides the Deployment (rendered companions).
COMPANIONS = {"deployment": ("Service", "HorizontalPodAutoscaler"), "rayservice": ()}


async def connect(context: str | None) -> KubeSession:
    return await KubeSession.connect(context=context or os.environ.get("TAU_CONTEXT") or None)


def namespace_of(session: KubeSession, namespace: str | None) -> str:
    """``-n`` first, then the kubeconfig context's namespace (decision 6: no repository descriptor)."""
    value = namespace or session.default_namespace
    if not value:
        raise UsageError("no namespace for this service: pass -n/--namespace (from your platform handoff)")
    return str(value)


def path(kind: str, namespace: str, name: str | None = None) -> str:
    api, plural = APIS[kind]
    return api_path(api, plural, namespace=namespace, name=name)


async def default_queue(session: KubeSession, namespace: str) -> tuple[str, str]:
    """The namespace's platform default LocalQueue (label ``kueue.x-k8s.io/default-local-queue``).

    A researcher who may not read Namespace objects gets it from the Ready TauWorkspace that targets the
    namespace.  Either way the LocalQueue must exist; otherwise the onboarding error.  Returns
    ``(LocalQueue, its ClusterQueue)``.
    """
    queue = ""
    try:
        ns = await session.get(api_path("v1", "namespaces", name=namespace), missing_ok=True)
        if ns is None:
            raise ConfigError(f'namespace "{namespace}" does not exist on context "{session.context}"',
                              hint="pass the namespace from your platform handoff with -n/--namespace")
        queue = str(((ns.get("metadata") or {}).get("labels") or {}).get(keys.KUEUE_DEFAULT_LOCAL_QUEUE) or "")
    except KubeApiError as exc:
        if exc.status != 403:
            raise
        queue = await _workspace_queue(session, namespace)
    local = await session.get(api_path(KUEUE_API, "localqueues", namespace=namespace, name=queue),
                              missing_ok=True) if queue else None
    if local is not None:
        return queue, str((local.get("spec") or {}).get("clusterQueue") or "")
    missing = f'LocalQueue "{queue}" it names does not exist' if queue else "it has no default LocalQueue"
    raise ConfigError(
        f'namespace "{namespace}" is not onboarded for serving: {missing}, so Kueue would never admit the '
        "service's pods",
        hint=f"ask your platform team to onboard the namespace (a Ready TauWorkspace creates the LocalQueue and "
             f"labels the namespace {keys.KUEUE_DEFAULT_LOCAL_QUEUE}=<queue>), then deploy again")


async def _workspace_queue(session: KubeSession, namespace: str) -> str:
    system = os.environ.get(keys.ENV_SYSTEM_NAMESPACE) or keys.SYSTEM_NAMESPACE_DEFAULT
    try:
        items = await session.list_items(api_path(keys.API_VERSION, "workspaces", namespace=system))
    except KubeApiError:
        return ""
    for ws in items:
        status = ws.get("status") or {}
        target = (status.get("target") or {}).get("resolvedNamespace") or ((ws.get("spec") or {}).get("target")
                                                                           or {}).get("namespace")
        if target == namespace and status.get("phase") == "Ready":
            return str((status.get("queue") or {}).get("localQueue") or "")
    return ""


async def apply(session: KubeSession, objects: Sequence[Mapping[str, Any]], *, dry_run: bool) -> list[dict[str, Any]]:
    """Server-side apply of every object (create or update), workload first."""
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        target = path(str(obj["kind"]), str(meta["namespace"]), str(meta["name"]))
        query = {"fieldManager": FIELD_MANAGER, "force": "true", "dryRun": "All" if dry_run else None}
        result = await session.request("PATCH", target, body=dict(obj), query=query,
                                       content_type="application/apply-patch+yaml")
        out.append(result)
    return out


async def get(session: KubeSession, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    return await session.get(path(kind, namespace, name), missing_ok=True)


async def require(session: KubeSession, kind: str, namespace: str, name: str) -> dict[str, Any]:
    obj = await get(session, kind, namespace, name)
    if obj is None:
        raise ClusterError(f'{kind} "{name}" not found in namespace "{namespace}"',
                           hint=f"deploy it with tau serve deploy {name} -n {namespace} --kind {kind.lower()}")
    return obj


async def delete(session: KubeSession, kind: str, namespace: str, name: str) -> list[str]:
    """Delete the workload and its rendered companions; already gone is fine (idempotent)."""
    removed = []
    key = kind.lower()
    for each in (kind, *COMPANIONS.get(key, ())):
        if await session.delete(path(each, namespace, name), propagation="Background", missing_ok=True) is not None:
            removed.append(each)
    return removed


async def scale_deployment(session: KubeSession, namespace: str, name: str, replicas: int) -> dict[str, Any]:
    await require(session, "Deployment", namespace, name)
    target = path("Deployment", namespace, name) + "/scale"
    return await session.patch(target, {"spec": {"replicas": replicas}}, kind="merge")


async def patch_serve_config(session: KubeSession, namespace: str, name: str, config: str,
                             resource_version: str) -> dict[str, Any]:
    """Replace ``spec.serveConfigV2`` (optimistic: the resourceVersion the new text was computed from)."""
    body = {"metadata": {"resourceVersion": resource_version}, "spec": {"serveConfigV2": config}}
    return await session.patch(path("RayService", namespace, name), body, kind="merge")


def is_conflict(exc: KubeApiError) -> bool:
    return exc.status == 409
