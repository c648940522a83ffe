"""The API kinds the controller reads and writes, their REST paths, and a watch-fed read cache.

Reads of watched kinds go to :class:`Cache` (filled by kopf's watch events, like controller-runtime's informer
cache); a miss falls back to one GET, so a cache that is still filling never makes the controller create a
duplicate.  Writes always go to the API server through ``tau_core``'s :class:`~tau_core.kube.KubeSession`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tau_core import keys
from tau_core.kube import KubeApiError, KubeSession, api_path

KUEUE = "kueue.x-k8s.io/v1beta2"
RBAC = "rbac.authorization.k8s.io/v1"


@dataclass(frozen=True)
class Kind:
    api_version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        return api_path(self.api_version, self.plural, namespace=namespace if self.namespaced else None,
                        name=name, subresource=subresource)


WORKSPACE = Kind(keys.API_VERSION, "workspaces", "TauWorkspace", True)
TAU_CLUSTER = Kind(keys.API_VERSION, "clusters", "TauCluster", False)
QUOTA_REQUEST = Kind(keys.API_VERSION, "quotarequests", "TauQuotaRequest", True)
NAMESPACE = Kind("v1", "namespaces", "Namespace", False)
NODE = Kind("v1", "nodes", "Node", False)
SERVICE_ACCOUNT = Kind("v1", "serviceaccounts", "ServiceAccount", True)
EVENT = Kind("v1", "events", "Event", True)
ROLE = Kind(RBAC, "roles", "Role", True)
ROLE_BINDING = Kind(RBAC, "rolebindings", "RoleBinding", True)
CLUSTER_ROLE_BINDING = Kind(RBAC, "clusterrolebindings", "ClusterRoleBinding", False)
LOCAL_QUEUE = Kind(KUEUE, "localqueues", "LocalQueue", True)
CLUSTER_QUEUE = Kind(KUEUE, "clusterqueues", "ClusterQueue", False)
RESOURCE_FLAVOR = Kind(KUEUE, "resourceflavors", "ResourceFlavor", False)
TOPOLOGY = Kind(KUEUE, "topologies", "Topology", False)
WORKLOAD_PRIORITY_CLASS = Kind(KUEUE, "workloadpriorityclasses", "WorkloadPriorityClass", False)
ADMISSION_CHECK = Kind(KUEUE, "admissionchecks", "AdmissionCheck", False)
MULTIKUEUE_CONFIG = Kind(KUEUE, "multikueueconfigs", "MultiKueueConfig", False)
MULTIKUEUE_CLUSTER = Kind(KUEUE, "multikueueclusters", "MultiKueueCluster", False)
PRIORITY_CLASS = Kind("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", False)
LEASE = Kind("coordination.k8s.io/v1", "leases", "Lease", True)

#: Labels on every object the controller creates for a workspace.
def owned_labels(workspace: str) -> dict[str, str]:
    return {keys.APP_MANAGED_BY: keys.CONTROLLER_MANAGED_BY_VALUE, keys.WORKSPACE: workspace}


def is_owned(obj: Mapping[str, Any] | None, workspace: str | None = None) -> bool:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    if labels.get(keys.APP_MANAGED_BY) != keys.CONTROLLER_MANAGED_BY_VALUE:
        return False
    return workspace is None or labels.get(keys.WORKSPACE) == workspace


TRANSIENT_STATUS = (0, 409, 429, 500, 502, 503, 504)


def transient(exc: KubeApiError) -> bool:
    """An error worth a fast retry with backoff (conflict, throttling, server trouble, lost connection), rather
    than a condition that waits for the next requeue."""
    return exc.status in TRANSIENT_STATUS or type(exc).__name__ == "WriteOutcomeUnknown"


Key = tuple[str, str, str]  # (plural, namespace or "", name)


class Cache:
    """The latest body of every watched object, keyed by (plural, namespace, name)."""

    def __init__(self) -> None:
        self._objects: dict[Key, dict[str, Any]] = {}

    def put(self, kind: Kind, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        key = (kind.plural, str(meta.get("namespace") or ""), str(meta.get("name")))
        self._objects[key] = copy.deepcopy(dict(body))

    def drop(self, kind: Kind, namespace: str | None, name: str) -> None:
        self._objects.pop((kind.plural, namespace or "", name), None)

    def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any] | None:
        found = self._objects.get((kind.plural, namespace or "", name))
        return copy.deepcopy(found) if found is not None else None

    def items(self, kind: Kind, labels: Mapping[str, str] | None = None,
              namespace: str | None = None) -> list[dict[str, Any]]:
        out = []
        for (plural, ns, _), body in sorted(self._objects.items()):
            if plural != kind.plural or (namespace is not None and ns != namespace):
                continue
            have = (body.get("metadata") or {}).get("labels") or {}
            if all(have.get(k) == v for k, v in (labels or {}).items()):
                out.append(copy.deepcopy(body))
        return out


class Client:
    """Reads through the cache (GET on a miss), writes through the session; counts what it sends."""

    def __init__(self, session: KubeSession, cache: Cache, cached: Iterable[Kind]) -> None:
        self.session = session
        self.cache = cache
        self.cached = {k.plural for k in cached}

    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any] | None:
        if kind.plural in self.cached:
            hit = self.cache.get(kind, namespace, name)
            if hit is not None:
                return hit
        found = await self.session.get(kind.path(namespace, name), missing_ok=True)
        if found is not None and kind.plural in self.cached:
            self.cache.put(kind, found)
        return found

    async def list(self, kind: Kind, namespace: str | None = None, labels: Mapping[str, str] | None = None,
                   *, live: bool = False) -> list[dict[str, Any]]:
        if kind.plural in self.cached and not live:
            return self.cache.items(kind, labels, namespace)
        selector = ",".join(f"{k}={v}" for k, v in (labels or {}).items()) or None
        return await self.session.list_items(kind.path(namespace), label_selector=selector)

    async def create(self, kind: Kind, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        created = await self.session.create(kind.path(meta.get("namespace")), body)
        if kind.plural in self.cached:
            self.cache.put(kind, created)
        return created

    async def replace(self, kind: Kind, body: Mapping[str, Any], subresource: str | None = None) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        result: dict[str, Any] = await self.session.request(
            "PUT", kind.path(meta.get("namespace"), meta["name"], subresource), body=dict(body))
        if kind.plural in self.cached:
            self.cache.put(kind, result)
        return result

    async def merge_patch(self, kind: Kind, namespace: str | None, name: str, patch: Mapping[str, Any],
                          subresource: str | None = None) -> dict[str, Any]:
        result = await self.session.patch(kind.path(namespace, name, subresource), dict(patch))
        if kind.plural in self.cached:
            self.cache.put(kind, result)
        return result

    async def delete(self, kind: Kind, namespace: str | None, name: str, uid: str | None = None) -> None:
        try:
            await self.session.delete(kind.path(namespace, name), uid=uid)
        except KubeApiError as exc:
            if exc.status != 409:  # a changed uid precondition: someone else's object now
                raise
        if kind.plural in self.cached:
            self.cache.drop(kind, namespace, name)
