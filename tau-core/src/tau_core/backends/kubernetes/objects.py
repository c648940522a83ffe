"""Constants and small object helpers shared by the capabilities of the Kubernetes backend."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from tau_core import keys
from tau_core.kube import KubeApiError, KubeSession, api_path
from tau_core.lifecycle.base import FailureReason

JOB_API = ("batch/v1", "jobs")
RAYJOB_API = ("ray.io/v1", "rayjobs")
WORKLOAD_API = ("kueue.x-k8s.io/v1beta2", "workloads")
WORKSPACE_API = (keys.API_VERSION, "workspaces")
CLAIM_API = ("resource.k8s.io/v1", "resourceclaims")
VISIBILITY_API = "visibility.kueue.x-k8s.io/v1beta1"
RETRY_ATTEMPT = keys.RETRY_ATTEMPT
RETRY_MAX = keys.RETRY_MAX
RETRY_REASON = keys.RETRY_REASON
DEFAULT_PRIORITY_CLASSES = ("taugrid-default", "taugrid-priority")
LOG_OFFLOAD_CONTAINER = "ray-driver-log-offload"
Obj = dict[str, Any]

_PLURALS = {"Job": "jobs", "RayJob": "rayjobs", "Service": "services", "ConfigMap": "configmaps",
            "Secret": "secrets", "RayService": "rayservices", "Deployment": "deployments", "Pod": "pods",
            "PersistentVolumeClaim": "persistentvolumeclaims", "Event": "events",
            "HorizontalPodAutoscaler": "horizontalpodautoscalers", "ServiceAccount": "serviceaccounts",
            "SecretProviderClass": "secretproviderclasses", "NetworkPolicy": "networkpolicies"}


def _meta(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict((obj or {}).get("metadata") or {})


def _ann(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(_meta(obj).get("annotations") or {})


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return dict(_meta(obj).get("labels") or {})


def new_submission_id() -> str:
    return secrets.token_hex(12)


def _reason(value: str | None) -> FailureReason:
    try:
        return FailureReason.parse(value or "")
    except ValueError:
        return FailureReason.UNKNOWN


def _path_of(obj: Mapping[str, Any], named: bool = False) -> str:
    api = str(obj.get("apiVersion") or "")
    kind = str(obj.get("kind") or "")
    plural = _PLURALS.get(kind) or kind.lower() + "s"
    meta = _meta(obj)
    return api_path(api, plural, namespace=meta.get("namespace"), name=meta.get("name") if named else None)


def _labels_ref(obj: Obj) -> dict[str, str]:
    meta = obj.setdefault("metadata", {})
    labels: dict[str, str] = meta.setdefault("labels", {})
    return labels


def _pod_specs(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec") or {}
    out: list[dict[str, Any]] = []
    if obj.get("kind") in ("Job", "Deployment"):
        out.append(((spec.get("template") or {}).get("spec")) or {})
    elif obj.get("kind") in ("RayJob", "RayService"):
        cluster = spec.get("rayClusterSpec") or {}
        head = ((cluster.get("headGroupSpec") or {}).get("template") or {}).get("spec")
        if head:
            out.append(head)
        for group in cluster.get("workerGroupSpecs") or []:
            s = (group.get("template") or {}).get("spec")
            if s:
                out.append(s)
        submitter = ((spec.get("submitterPodTemplate") or {}).get("spec"))
        if submitter:
            out.append(submitter)
    elif obj.get("kind") == "Pod":
        out.append(spec)
    return out


def _all_containers(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for spec in _pod_specs(obj):
        out.extend(spec.get("initContainers") or [])
        out.extend(spec.get("containers") or [])
    return out


def _stamp_attempt(obj: Obj, attempt: int, max_retries: int, reason: FailureReason) -> None:
    ann = obj.setdefault("metadata", {}).setdefault("annotations", {})
    ann[RETRY_ATTEMPT] = str(attempt)
    ann[RETRY_MAX] = str(max_retries)
    ann[RETRY_REASON] = reason.value


async def _optional_list(session: KubeSession, path: str, selector: str | None) -> list[Obj]:
    try:
        return await session.list_items(path, label_selector=selector)
    except KubeApiError as exc:
        if exc.status == 404:
            return []  # KubeRay not installed: no RayJobs
        raise


async def _create_event(session: KubeSession, event: Obj) -> None:
    ns = event["metadata"]["namespace"]
    try:
        await session.create(api_path("v1", "events", namespace=ns), event)
    except KubeApiError as exc:
        if exc.already_exists:
            return
        if exc.status == 403:
            from tau_core.output import warning

            warning(f"could not record the retry Event in {ns}: {exc.message}")
            return
        raise
