"""The resource-type registry: which (group, version, plural) the server serves, and how."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
CREATE_ONLY = ("create",)


@dataclass
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    verbs: tuple[str, ...] = ALL_VERBS
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    singular: str = ""
    categories: tuple[str, ...] = ()
    schema: dict[str, Any] | None = field(default=None, repr=False)  # openAPIV3Schema of a custom resource version
    custom: bool = False  # served from a CustomResourceDefinition
    storage: bool = True  # the storage version among the group's versions of this kind
    scale_paths: dict[str, str] = field(default_factory=dict)  # CRD scale subresource paths
    preferred: bool = True

    def __post_init__(self) -> None:
        if not self.singular:
            self.singular = self.kind.lower()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_kind(self) -> tuple[str, str]:
        return (self.group, self.kind)

    def discovery_entries(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        main: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        main["storageVersionHash"] = _hash(f"{self.group}/{self.version}/{self.plural}")
        entries.append(main)
        for sub in self.subresources:
            entry: dict[str, Any] = {"name": f"{self.plural}/{sub}", "singularName": "", "namespaced": self.namespaced}
            if sub == "status":
                entry.update(kind=self.kind, verbs=["get", "patch", "update"])
            elif sub == "scale":
                entry.update(kind="Scale", group="autoscaling", version="v1", verbs=["get", "patch", "update"])
            elif sub == "log":
                entry.update(kind="Pod", verbs=["get"])
            elif sub == "eviction":
                entry.update(kind="Eviction", group="policy", version="v1", verbs=["create"])
            elif sub == "binding":
                entry.update(kind="Binding", verbs=["create"])
            elif sub == "finalize":
                entry.update(kind=self.kind, verbs=["update"])
            else:
                entry.update(kind=self.kind, verbs=["get"])
            entries.append(entry)
        return entries


def _hash(text: str) -> str:
    import base64
    import hashlib

    return base64.b64encode(hashlib.sha256(text.encode()).digest()[:8]).decode()


def builtin_types() -> list[ResourceType]:
    """Every built-in type the simulator serves: those it acts on, then those it only stores."""
    return _served_types() + _stored_types()


def _served_types() -> list[ResourceType]:
    r = ResourceType
    return [
        # core/v1
        r("", "v1", "namespaces", "Namespace", namespaced=False, short_names=("ns",),
          subresources=("status", "finalize"), verbs=("create", "delete", "get", "list", "patch", "update", "watch")),
        r("", "v1", "pods", "Pod", short_names=("po",), subresources=("status", "log", "binding", "eviction"),
          categories=("all",)),
        r("", "v1", "services", "Service", short_names=("svc",), subresources=("status",), categories=("all",)),
        r("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",)),
        r("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
        r("", "v1", "secrets", "Secret"),
        r("", "v1", "events", "Event", short_names=("ev",)),
        r("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",),
          subresources=("status",)),
        r("", "v1", "nodes", "Node", namespaced=False, short_names=("no",), subresources=("status",)),
        r("", "v1", "endpoints", "Endpoints", short_names=("ep",)),
        r("", "v1", "resourcequotas", "ResourceQuota", short_names=("quota",), subresources=("status",)),
        r("", "v1", "limitranges", "LimitRange", short_names=("limits",)),
        # batch
        r("batch", "v1", "jobs", "Job", subresources=("status",), categories=("all",)),
        r("batch", "v1", "cronjobs", "CronJob", short_names=("cj",), subresources=("status",), categories=("all",)),
        # apps
        r("apps", "v1", "deployments", "Deployment", short_names=("deploy",), subresources=("status", "scale"),
          categories=("all",)),
        r("apps", "v1", "replicasets", "ReplicaSet", short_names=("rs",), subresources=("status", "scale"),
          categories=("all",)),
        r("apps", "v1", "statefulsets", "StatefulSet", short_names=("sts",), subresources=("status", "scale"),
          categories=("all",)),
        # rbac
        r("rbac.authorization.k8s.io", "v1", "roles", "Role"),
        r("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
        r("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
        r("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
        # authn / authz reviews
        r("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", namespaced=False,
          verbs=CREATE_ONLY),
        r("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False,
          verbs=CREATE_ONLY),
        r("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", namespaced=False,
          verbs=CREATE_ONLY),
        r("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", namespaced=False,
          verbs=CREATE_ONLY),
        # scheduling, coordination, admission
        r("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False, short_names=("pc",)),
        r("coordination.k8s.io", "v1", "leases", "Lease"),
        r("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy",
          namespaced=False, subresources=("status",)),
        r("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
          "ValidatingAdmissionPolicyBinding", namespaced=False),
        # CRDs
        r("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False,
          short_names=("crd", "crds"), subresources=("status",)),
    ]


def _stored_types() -> list[ResourceType]:
    r = ResourceType
    return [
        # what Helm charts (Kueue, KubeRay, TauGrid) commonly carry besides the above; stored, not acted upon
        r("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False, short_names=("pv",),
          subresources=("status",)),
        r("", "v1", "podtemplates", "PodTemplate"),
        r("apps", "v1", "daemonsets", "DaemonSet", short_names=("ds",), subresources=("status",),
          categories=("all",)),
        r("apps", "v1", "controllerrevisions", "ControllerRevision"),
        r("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
          namespaced=False),
        r("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
          "ValidatingWebhookConfiguration", namespaced=False),
        r("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short_names=("pdb",),
          subresources=("status",)),
        r("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", short_names=("netpol",)),
        r("networking.k8s.io", "v1", "ingresses", "Ingress", short_names=("ing",), subresources=("status",)),
        r("networking.k8s.io", "v1", "ingressclasses", "IngressClass", namespaced=False),
        r("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", short_names=("hpa",),
          subresources=("status",), categories=("all",)),
        r("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False, short_names=("sc",)),
        r("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", namespaced=False),
        r("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
        r("events.k8s.io", "v1", "events", "Event", short_names=("ev",)),
        r("apiregistration.k8s.io", "v1", "apiservices", "APIService", namespaced=False, subresources=("status",)),
        r("flowcontrol.apiserver.k8s.io", "v1", "flowschemas", "FlowSchema", namespaced=False,
          subresources=("status",)),
        r("flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations", "PriorityLevelConfiguration",
          namespaced=False, subresources=("status",)),
    ]


class TypeRegistry:
    """Maps (group, version, plural) and (apiVersion, kind) to a ``ResourceType``."""

    def __init__(self, types: list[ResourceType] | None = None) -> None:
        self._lock = threading.RLock()
        self._by_plural: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str, str], ResourceType] = {}
        self._group_order: list[str] = []
        self._version_order: dict[str, list[str]] = {}
        for t in types or []:
            self.add(t)

    def add(self, rtype: ResourceType) -> None:
        with self._lock:
            self._by_plural[(rtype.group, rtype.version, rtype.plural)] = rtype
            self._by_kind[(rtype.group, rtype.version, rtype.kind)] = rtype
            if rtype.group not in self._group_order:
                self._group_order.append(rtype.group)
            versions = self._version_order.setdefault(rtype.group, [])
            if rtype.version not in versions:
                versions.append(rtype.version)

    def remove_group_kind(self, group: str, kind: str) -> None:
        with self._lock:
            for key, t in list(self._by_kind.items()):
                if t.group == group and t.kind == kind:
                    del self._by_kind[key]
                    self._by_plural.pop((t.group, t.version, t.plural), None)
            still = {t.version for t in self._by_kind.values() if t.group == group}
            self._version_order[group] = [v for v in self._version_order.get(group, []) if v in still]
            if not self._version_order[group]:
                del self._version_order[group]
                self._group_order.remove(group)

    def by_plural(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_plural.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        return self._by_kind.get((group, version, kind))

    def for_group_kind(self, group: str, kind: str) -> list[ResourceType]:
        return [t for t in self._by_kind.values() if t.group == group and t.kind == kind]

    def __iter__(self) -> Iterator[ResourceType]:
        with self._lock:
            return iter(list(self._by_plural.values()))

    def __contains__(self, key: tuple[str, str, str]) -> bool:
        return key in self._by_plural

    def __getitem__(self, key: tuple[str, str, str]) -> ResourceType:
        return self._by_plural[key]

    def items(self) -> list[tuple[tuple[str, str, str], ResourceType]]:
        with self._lock:
            return list(self._by_plural.items())

    def groups(self) -> list[str]:
        with self._lock:
            return list(self._group_order)

    def versions(self, group: str) -> list[str]:
        with self._lock:
            return list(self._version_order.get(group, []))

    def preferred_version(self, group: str) -> str | None:
        versions = self.versions(group)
        if not versions:
            return None
        with self._lock:
            for t in self._by_kind.values():
                if t.group == group and t.preferred:
                    return t.version
        return versions[0]

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        with self._lock:
            return [t for (g, v, _), t in self._by_plural.items() if g == group and v == version]


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """Every served version of a CustomResourceDefinition as a ``ResourceType``."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    out: list[ResourceType] = []
    versions = spec.get("versions") or []
    storage_version = next((v.get("name") for v in versions if v.get("storage")), None)
    # the preferred version is the highest-priority served one; Kubernetes sorts by version priority
    served = [v.get("name") for v in versions if v.get("served", True)]
    preferred = _sort_versions(served)[0] if served else None
    for v in versions:
        if not v.get("served", True):
            continue
        subs = v.get("subresources") or spec.get("subresources") or {}
        subresources: list[str] = []
        scale_paths: dict[str, str] = {}
        if "status" in subs:
            subresources.append("status")
        if "scale" in subs:
            subresources.append("scale")
            scale_paths = dict(subs.get("scale") or {})
        schema = ((v.get("schema") or spec.get("validation") or {}).get("openAPIV3Schema"))
        out.append(ResourceType(
            group, v["name"], names["plural"], names["kind"], namespaced=namespaced,
            short_names=tuple(names.get("shortNames") or ()), subresources=tuple(subresources),
            singular=names.get("singular") or names["kind"].lower(),
            categories=tuple(names.get("categories") or ()), schema=schema, custom=True,
            storage=v.get("name") == storage_version, scale_paths=scale_paths,
            preferred=v.get("name") == preferred,
        ))
    return out


def _version_key(version: str) -> tuple[int, int, int]:
    import re

    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (3, 0, 0)
    major = int(m.group(1))
    stage = {"alpha": 2, "beta": 1, None: 0}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor)


def _sort_versions(versions: list[str]) -> list[str]:
    return sorted(versions, key=_version_key)
