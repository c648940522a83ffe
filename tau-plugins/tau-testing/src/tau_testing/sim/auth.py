"""Bearer-token authentication and RBAC authorization evaluated from the stored roles and bindings."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tau_testing.sim.selectors import label_selector_from_dict, labels_match

if TYPE_CHECKING:
    from tau_testing.sim.store import Store

RBAC = "rbac.authorization.k8s.io/v1"


@dataclass
class User:
    name: str
    groups: list[str] = field(default_factory=list)
    token: str = ""
    uid: str = ""

    @property
    def all_groups(self) -> list[str]:
        groups = list(self.groups)
        if "system:authenticated" not in groups:
            groups.append("system:authenticated")
        return groups


@dataclass
class Attributes:
    """What a request asks to do."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    namespace: str = ""
    path: str = ""  # non-resource URL
    resource_request: bool = True


class Users:
    """Token → user table."""

    def __init__(self) -> None:
        self._by_token: dict[str, User] = {}
        self._by_name: dict[str, User] = {}
        self._lock = threading.Lock()
        #: extra authenticators (token -> User or None), e.g. an Entra fake's issued tokens for an AKS stand-in
        self.verifiers: list[Callable[[str], User | None]] = []

    def add(self, name: str, groups: list[str] | tuple[str, ...] = (), token: str | None = None) -> User:
        user = User(name, list(groups), token or secrets.token_urlsafe(24), uid=secrets.token_hex(8))
        with self._lock:
            old = self._by_name.pop(name, None)
            if old is not None:
                self._by_token.pop(old.token, None)
            self._by_token[user.token] = user
            self._by_name[name] = user
        return user

    def by_token(self, token: str) -> User | None:
        user = self._by_token.get(token)
        for verify in self.verifiers if user is None else ():
            user = verify(token)
            if user is not None:
                break
        return user

    def __getitem__(self, name: str) -> User:
        return self._by_name[name]

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[User]:
        return iter(list(self._by_name.values()))

    @property
    def tokens(self) -> dict[str, str]:
        return {u.name: u.token for u in self._by_name.values()}


def _rule(verbs: list[str], groups: list[str] | None = None, resources: list[str] | None = None,
          urls: list[str] | None = None) -> dict[str, Any]:
    if urls is not None:
        return {"verbs": verbs, "nonResourceURLs": urls}
    return {"verbs": verbs, "apiGroups": groups or [""], "resources": resources or []}


READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]


def default_rbac_objects() -> list[dict[str, Any]]:
    """The bootstrap ClusterRoles and ClusterRoleBindings a fresh cluster has."""
    workload_groups = ["", "apps", "batch", "kueue.x-k8s.io", "ray.io", "coordination.k8s.io"]
    workload_resources = ["pods", "pods/log", "pods/status", "services", "configmaps", "secrets",
                          "serviceaccounts", "persistentvolumeclaims", "events", "deployments", "deployments/scale",
                          "replicasets", "statefulsets", "jobs", "cronjobs", "leases", "workloads", "localqueues",
                          "rayjobs", "rayclusters", "rayservices"]
    view_resources = [r for r in workload_resources if r != "secrets"] + [
        "namespaces", "resourcequotas", "limitranges", "endpoints", "jobs/status", "deployments/status",
        "rayjobs/status", "workloads/status", "localqueues/status"]

    def role(name: str, rules: list[dict[str, Any]], labels: dict[str, str] | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}
        meta["labels"].update(labels or {})
        return {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": meta, "rules": rules}

    def binding(name: str, role_name: str, group: str) -> dict[str, Any]:
        return {"apiVersion": RBAC, "kind": "ClusterRoleBinding",
                "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]}

    return [
        role("cluster-admin", [_rule(["*"], ["*"], ["*"]), _rule(["*"], urls=["*"])]),
        role("admin", [_rule(["*"], workload_groups, workload_resources),
                       _rule(["*"], ["rbac.authorization.k8s.io"], ["roles", "rolebindings"])]),
        role("edit", [_rule(["*"], workload_groups, workload_resources)]),
        role("view", [_rule(READ, workload_groups, view_resources)]),
        role("system:discovery", [_rule(["get"], urls=["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                                                       "/openapi", "/openapi/*", "/readyz", "/version",
                                                       "/version/"])]),
        role("system:basic-user", [_rule(["create"], ["authorization.k8s.io"],
                                         ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
                                   _rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"])]),
        role("system:public-info-viewer", [_rule(["get"], urls=["/healthz", "/livez", "/readyz", "/version",
                                                                "/version/"])]),
        binding("cluster-admin", "cluster-admin", "system:masters"),
        binding("system:discovery", "system:discovery", "system:authenticated"),
        binding("system:basic-user", "system:basic-user", "system:authenticated"),
        binding("system:public-info-viewer", "system:public-info-viewer", "system:authenticated"),
    ]


def _match_one(values: list[str] | None, wanted: str) -> bool:
    values = values or []
    return "*" in values or wanted in values


def _resource_matches(resources: list[str] | None, resource: str, subresource: str) -> bool:
    resources = resources or []
    combined = f"{resource}/{subresource}" if subresource else resource
    if "*" in resources or combined in resources:
        return True
    if subresource and f"*/{subresource}" in resources:
        return True
    return bool(not subresource and resource and f"{resource}/*" in resources and False)


def _url_matches(urls: list[str] | None, path: str) -> bool:
    for url in urls or []:
        if url == "*" or url == path:
            return True
        if url.endswith("*") and path.startswith(url[:-1]):
            return True
    return False


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    if not _match_one(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        return _url_matches(rule.get("nonResourceURLs"), attrs.path)
    if not _match_one(rule.get("apiGroups"), attrs.group):
        return False
    if not _resource_matches(rule.get("resources"), attrs.resource, attrs.subresource):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _subject_matches(subject: dict[str, Any], user: User, binding_ns: str) -> bool:
    kind = subject.get("kind")
    name = subject.get("name")
    if kind == "User":
        return name == user.name
    if kind == "Group":
        return name in user.all_groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return user.name == f"system:serviceaccount:{ns}:{name}"
    return False


class Authorizer:
    """RBAC over the roles and bindings in a ``Store``."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _cluster_role_rules(self, name: str) -> list[dict[str, Any]]:
        role = self.store.get(RBAC, "ClusterRole", None, name)
        if role is None:
            return []
        rules = list(role.get("rules") or [])
        aggregation = role.get("aggregationRule") or {}
        for selector in aggregation.get("clusterRoleSelectors") or []:
            reqs = label_selector_from_dict(selector)
            for other in self.store.list(RBAC, "ClusterRole"):
                if other["metadata"]["name"] != name and labels_match(reqs, other["metadata"].get("labels")):
                    rules.extend(other.get("rules") or [])
        return rules

    def _role_rules(self, ref: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
        if ref.get("kind") == "ClusterRole":
            return self._cluster_role_rules(ref.get("name", ""))
        role = self.store.get(RBAC, "Role", namespace, ref.get("name", ""))
        return list((role or {}).get("rules") or [])

    def rules_for(self, user: User, namespace: str | None) -> list[tuple[str, dict[str, Any]]]:
        """(why, rule) pairs that apply to ``user`` in ``namespace`` (cluster-wide rules included)."""
        out: list[tuple[str, dict[str, Any]]] = []
        for crb in self.store.list(RBAC, "ClusterRoleBinding"):
            for subject in crb.get("subjects") or []:
                if _subject_matches(subject, user, ""):
                    ref = crb.get("roleRef") or {}
                    why = (f'RBAC: allowed by ClusterRoleBinding "{crb["metadata"]["name"]}" of ClusterRole '
                           f'"{ref.get("name")}" to {subject.get("kind")} "{subject.get("name")}"')
                    out.extend((why, r) for r in self._cluster_role_rules(ref.get("name", "")))
                    break
        if namespace:
            for rb in self.store.list(RBAC, "RoleBinding", namespace):
                for subject in rb.get("subjects") or []:
                    if _subject_matches(subject, user, namespace):
                        ref = rb.get("roleRef") or {}
                        why = (f'RBAC: allowed by RoleBinding "{rb["metadata"]["name"]}/{namespace}" of '
                               f'{ref.get("kind")} "{ref.get("name")}" to {subject.get("kind")} '
                               f'"{subject.get("name")}"')
                        out.extend((why, r) for r in self._role_rules(ref, namespace))
                        break
        return out

    def authorize(self, user: User, attrs: Attributes) -> tuple[bool, str]:
        if "system:masters" in user.groups:
            return True, ""
        for why, rule in self.rules_for(user, attrs.namespace if attrs.resource_request else None):
            if rule_allows(rule, attrs):
                return True, why
        return False, ""


def forbidden_message(user: User, attrs: Attributes) -> str:
    if not attrs.resource_request:
        return f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return (f'{subject} is forbidden: User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group '
            f'"{attrs.group}" {scope}')
