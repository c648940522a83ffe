"""Defaulting and validation done by the simulated API server before it stores an object."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tau_testing.sim import errors
from tau_testing.sim.resources import ResourceType

if TYPE_CHECKING:
    from tau_testing.sim.store import Store

_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_NAME_KINDS = {("", "Namespace"), ("", "Service")}
_NONAME_KINDS = {("authorization.k8s.io", "SelfSubjectAccessReview"),
                 ("authorization.k8s.io", "SubjectAccessReview"),
                 ("authorization.k8s.io", "SelfSubjectRulesReview"),
                 ("authentication.k8s.io", "SelfSubjectReview")}


def _validate_meta(rtype: ResourceType, obj: dict[str, Any]) -> list[dict[str, Any]]:
    causes: list[dict[str, Any]] = []
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    if rtype.group_kind in _LABEL_NAME_KINDS:
        if len(name) > 63 or not _LABEL.fullmatch(name):
            causes.append(errors.field_invalid(
                "metadata.name", name, "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                "characters or '-', and must start and end with an alphanumeric character"))
    elif rtype.group_kind in (("rbac.authorization.k8s.io", "ClusterRole"),
                              ("rbac.authorization.k8s.io", "Role"),
                              ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
                              ("rbac.authorization.k8s.io", "RoleBinding")):
        if "/" in name or name in (".", "..") or "%" in name:
            causes.append(errors.field_invalid("metadata.name", name, "may not contain '/' or '%'"))
    elif len(name) > 253 or not _SUBDOMAIN.fullmatch(name):
        causes.append(errors.field_invalid(
            "metadata.name", name, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character"))
    for field in ("labels", "annotations"):
        if field in meta and not isinstance(meta[field], dict):
            causes.append(errors.field_invalid(f"metadata.{field}", meta[field], "must be a map of strings"))
            meta.pop(field)
    finalizers = meta.get("finalizers")
    if finalizers is not None and (not isinstance(finalizers, list) or
                                   not all(isinstance(f, str) and f for f in finalizers)):
        causes.append(errors.field_invalid("metadata.finalizers", finalizers, "must be a list of names"))
    refs = meta.get("ownerReferences")
    if refs is not None:
        if not isinstance(refs, list):
            causes.append(errors.field_invalid("metadata.ownerReferences", refs, "must be a list"))
        else:
            for i, ref in enumerate(refs):
                for key in ("apiVersion", "kind", "name", "uid"):
                    if not isinstance(ref, dict) or not isinstance(ref.get(key), str) or not ref.get(key):
                        causes.append(errors.field_required(f"metadata.ownerReferences[{i}].{key}"))
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, label_name = key.rpartition("/")
        if not _QUALIFIED_NAME.fullmatch(label_name) or len(label_name) > 63 or (
                prefix and not _SUBDOMAIN.fullmatch(prefix)):
            causes.append(errors.field_invalid("metadata.labels", key, "name part must consist of alphanumeric "
                                               "characters, '-', '_' or '.'"))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
            causes.append(errors.field_invalid("metadata.labels", value, "a valid label must be an empty string "
                                               "or consist of alphanumeric characters, '-', '_' or '.'"))
    for key, value in (meta.get("annotations") or {}).items():
        if not isinstance(value, str):
            causes.append(errors.field_invalid(f"metadata.annotations[{key}]", value, "must be a string"))
    return causes


def _image_pull_policy(image: str) -> str:
    tag = image.rsplit("/", 1)[-1]
    if "@" in tag:
        return "IfNotPresent"
    return "Always" if ":" not in tag or tag.endswith(":latest") else "IfNotPresent"


def _default_containers(spec: dict[str, Any]) -> None:
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or []:
            if isinstance(c, dict):
                c.setdefault("imagePullPolicy", _image_pull_policy(str(c.get("image", ""))))
                c.setdefault("terminationMessagePath", "/dev/termination-log")
                c.setdefault("terminationMessagePolicy", "File")
                c.setdefault("resources", {})
                for port in c.get("ports") or []:
                    if isinstance(port, dict):
                        port.setdefault("protocol", "TCP")


def _default_pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    if "serviceAccountName" not in spec:
        spec["serviceAccountName"] = spec.get("serviceAccount") or "default"
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("priority", 0)
    _default_containers(spec)


def _validate_pod_spec(spec: Any, path: str) -> list[dict[str, Any]]:
    causes: list[dict[str, Any]] = []
    if not isinstance(spec, dict):
        return [errors.field_required(path)]
    containers = spec.get("containers")
    if not containers:
        causes.append(errors.field_required(f"{path}.containers"))
    seen: set[str] = set()
    for field in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field) or []):
            where = f"{path}.{field}[{i}]"
            if not isinstance(c, dict):
                causes.append(errors.field_invalid(where, c, "must be an object"))
                continue
            name = c.get("name")
            if not name:
                causes.append(errors.field_required(f"{where}.name"))
            elif not _LABEL.fullmatch(str(name)):
                causes.append(errors.field_invalid(f"{where}.name", name, "a lowercase RFC 1123 label must "
                                                   "consist of lower case alphanumeric characters or '-'"))
            elif name in seen:
                causes.append({"reason": "FieldValueDuplicate", "message": f'Duplicate value: "{name}"',
                               "field": f"{where}.name"})
            else:
                seen.add(str(name))
            if not c.get("image"):
                causes.append(errors.field_required(f"{where}.image"))
    policy = spec.get("restartPolicy")
    if policy not in (None, "Always", "OnFailure", "Never"):
        causes.append(errors.field_not_supported(f"{path}.restartPolicy", policy, ["Always", "OnFailure", "Never"]))
    return causes


def _default_builtin(rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None,
                     store: Store) -> None:
    gk = rtype.group_kind
    spec = obj.get("spec")
    meta = obj["metadata"]
    if gk == ("", "Namespace"):
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = (old or {}).get("status") or {"phase": "Active"}
        if meta.get("deletionTimestamp"):
            obj["status"] = {"phase": "Terminating"}
    elif gk == ("", "Pod"):
        if isinstance(spec, dict):
            _default_pod_spec(spec)
        if old is None:
            obj["status"] = {"phase": "Pending", "qosClass": _qos(spec if isinstance(spec, dict) else {})}
    elif gk == ("", "Service") and isinstance(spec, dict):
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if old is None and spec.get("clusterIP") != "None":
            n = store.count() % 65000 + 10
            spec.setdefault("clusterIP", f"10.96.{n // 256}.{n % 256}")
        elif old is not None:
            spec["clusterIP"] = (old.get("spec") or {}).get("clusterIP", spec.get("clusterIP"))
        if spec.get("clusterIP"):
            spec["clusterIPs"] = [spec["clusterIP"]]
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                port.setdefault("targetPort", port.get("port"))
    elif gk == ("batch", "Job") and isinstance(spec, dict):
        if "parallelism" not in spec and "completions" not in spec:
            spec["completions"] = 1
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("manualSelector", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        template = spec.setdefault("template", {})
        tmeta = template.setdefault("metadata", {})
        labels = tmeta.setdefault("labels", {})
        if old is None:
            uid = meta.get("uid", "")
            labels.setdefault("controller-uid", uid)
            labels.setdefault("batch.kubernetes.io/controller-uid", uid)
            labels.setdefault("job-name", meta["name"])
            labels.setdefault("batch.kubernetes.io/job-name", meta["name"])
            if not spec.get("manualSelector"):
                spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        if isinstance(template.get("spec"), dict):
            _default_pod_spec(template["spec"])
    elif gk in (("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet")) and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        if gk == ("apps", "Deployment"):
            spec.setdefault("progressDeadlineSeconds", 600)
            spec.setdefault("strategy", {"type": "RollingUpdate",
                                         "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        template = spec.get("template")
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            _default_pod_spec(template["spec"])
    elif gk == ("scheduling.k8s.io", "PriorityClass"):
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    elif gk == ("", "Secret"):
        obj.setdefault("type", "Opaque")
    elif gk == ("", "Node") and old is None:
        obj.setdefault("spec", {})


def _qos(spec: dict[str, Any]) -> str:
    containers = spec.get("containers") or []
    requests_any = False
    guaranteed = bool(containers)
    for c in containers:
        res = (c or {}).get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            requests_any = True
        for r in ("cpu", "memory"):
            if r not in lim or str(req.get(r, lim.get(r))) != str(lim.get(r)):
                guaranteed = False
    if guaranteed:
        return "Guaranteed"
    return "Burstable" if requests_any else "BestEffort"


def _without_image(containers: Any) -> list[Any]:
    return [{k: v for k, v in (c or {}).items() if k != "image"} if isinstance(c, dict) else c
            for c in containers or []]


def _only_added_tolerations(new: list[Any], old: list[Any]) -> bool:
    """Every existing toleration is still there (its ``tolerationSeconds`` may change)."""
    for toleration in old:
        base = {k: v for k, v in (toleration or {}).items() if k != "tolerationSeconds"}
        if not any(isinstance(t, dict) and {k: v for k, v in t.items() if k != "tolerationSeconds"} == base
                   for t in new):
            return False
    return True


def _term_only_adds(new: dict[str, Any], old: dict[str, Any]) -> bool:
    for field in ("matchExpressions", "matchFields"):
        old_reqs, new_reqs = old.get(field) or [], new.get(field) or []
        if len(old_reqs) > len(new_reqs) or new_reqs[: len(old_reqs)] != old_reqs:
            return False
    return True


def _node_affinity_mutation(new: Any, old: Any) -> list[dict[str, Any]]:
    """What Kubernetes allows on a gated pod: required node selector terms that only gain requirements
    (anything when there were none); preferred terms are free."""
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    old_terms = (((old or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
                 .get("nodeSelectorTerms") or [])
    if not old_terms:
        return []
    new_terms = (((new or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
                 .get("nodeSelectorTerms") or [])
    if len(new_terms) != len(old_terms):
        return [errors.field_invalid(path, new_terms, "no additions/deletions to non-empty NodeSelectorTerms list "
                                                      "are allowed")]
    return [errors.field_invalid(f"{path}[{i}]", new_term, "only additions are allowed (no mutations or deletions)")
            for i, (new_term, old_term) in enumerate(zip(new_terms, old_terms, strict=True))
            if not _term_only_adds(new_term or {}, old_term or {})]


def _validate_pod_update(old_spec: dict[str, Any], new_spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Pod spec immutability as ``ValidatePodUpdate`` has it: images, ``activeDeadlineSeconds``, toleration
    additions and scheduling-gate removals always; while the pod is still gated (Kubernetes 1.27+), also
    ``nodeSelector`` additions and ``affinity.nodeAffinity`` changes that only narrow it.  (``nodeName`` is
    left writable: the simulated scheduler binds through updates.)"""
    causes: list[dict[str, Any]] = []
    old_munged, new_munged = dict(old_spec), dict(new_spec)
    for mutable in ("activeDeadlineSeconds", "nodeName"):
        old_munged.pop(mutable, None)
        new_munged.pop(mutable, None)
    for field in ("containers", "initContainers"):
        old_munged[field] = _without_image(old_spec.get(field))
        new_munged[field] = _without_image(new_spec.get(field))
    old_tolerations = old_munged.pop("tolerations", None) or []
    new_tolerations = new_munged.pop("tolerations", None) or []
    if not _only_added_tolerations(new_tolerations, old_tolerations):
        causes.append(errors.field_forbidden("spec.tolerations",
                                             "existing toleration can not be modified except its tolerationSeconds"))
    old_gates = old_munged.pop("schedulingGates", None) or []
    new_gates = new_munged.pop("schedulingGates", None) or []
    for gate in new_gates:
        if gate not in old_gates:
            name = gate.get("name") if isinstance(gate, dict) else gate
            causes.append(errors.field_forbidden("spec.schedulingGates",
                                                 f"only deletion is allowed, but found new scheduling gate '{name}'"))
    if old_gates:
        old_selector = old_munged.pop("nodeSelector", None) or {}
        new_selector = new_munged.pop("nodeSelector", None) or {}
        if any(new_selector.get(k) != v for k, v in old_selector.items()):
            causes.append(errors.field_invalid("spec.nodeSelector", new_selector, "only additions to "
                                               "spec.nodeSelector are allowed (no mutations or deletions)"))
        old_affinity = dict(old_munged.pop("affinity", None) or {})
        new_affinity = dict(new_munged.pop("affinity", None) or {})
        causes += _node_affinity_mutation(new_affinity.pop("nodeAffinity", None),
                                          old_affinity.pop("nodeAffinity", None))
        if old_affinity != new_affinity:
            old_munged["affinity"], new_munged["affinity"] = old_affinity, new_affinity
    if old_munged != new_munged:
        causes.append(errors.field_forbidden("spec", "pod updates may not change fields other than "
                                             "`spec.containers[*].image`, "
                                             "`spec.initContainers[*].image`, "
                                             "`spec.activeDeadlineSeconds`, `spec.tolerations` "
                                             "(only additions to existing tolerations), "
                                             "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it "
                                             "was previously negative)"))
    return causes


def _validate_builtin(rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> list[dict[str, Any]]:
    gk = rtype.group_kind
    spec = obj.get("spec")
    causes: list[dict[str, Any]] = []
    if gk == ("", "Pod"):
        causes += _validate_pod_spec(spec, "spec")
        if old is not None and isinstance(spec, dict):
            causes += _validate_pod_update(old.get("spec") or {}, spec)
    elif gk == ("batch", "Job"):
        causes += _validate_job(spec, old)
    elif gk in (("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet")):
        causes += _validate_workload(spec)
    elif gk == ("", "ConfigMap") or gk == ("", "Secret"):
        for field in ("data", "binaryData", "stringData"):
            for key in (obj.get(field) or {}):
                if not re.fullmatch(r"[-._a-zA-Z0-9]+", key):
                    causes.append(errors.field_invalid(f"{field}[{key}]", key, "a valid config key must consist "
                                                       "of alphanumeric characters, '-', '_' or '.'"))
    elif gk == ("scheduling.k8s.io", "PriorityClass"):
        if not isinstance(obj.get("value"), int):
            causes.append(errors.field_required("value"))
        if old is not None and old.get("value") != obj.get("value"):
            causes.append(errors.field_forbidden("value", "may not be changed in an update."))
    elif gk in (("rbac.authorization.k8s.io", "RoleBinding"), ("rbac.authorization.k8s.io", "ClusterRoleBinding")):
        ref = obj.get("roleRef") or {}
        if not ref.get("name"):
            causes.append(errors.field_required("roleRef.name"))
        if ref.get("kind") not in ("Role", "ClusterRole"):
            causes.append(errors.field_not_supported("roleRef.kind", ref.get("kind"), ["Role", "ClusterRole"]))
        if old is not None and (old.get("roleRef") or {}) != ref:
            causes.append(errors.field_invalid("roleRef", ref, "cannot change roleRef"))
    elif gk == ("apiextensions.k8s.io", "CustomResourceDefinition"):
        causes += _validate_crd(obj, spec)
    return causes


def _validate_job(spec: Any, old: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A Job: its pod template, counts, and the fields an update may not change."""
    causes: list[dict[str, Any]] = []
    if not isinstance(spec, dict):
        causes.append(errors.field_required("spec"))
    else:
        template = spec.get("template") or {}
        causes += _validate_pod_spec(template.get("spec"), "spec.template.spec")
        policy = (template.get("spec") or {}).get("restartPolicy")
        if policy not in ("OnFailure", "Never"):
            causes.append(errors.field_not_supported("spec.template.spec.restartPolicy", policy,
                                                     ["OnFailure", "Never"]))
        for field in ("parallelism", "completions", "backoffLimit"):
            value = spec.get(field)
            if value is not None and (not isinstance(value, int) or value < 0):
                causes.append(errors.field_invalid(f"spec.{field}", value,
                                                   "must be greater than or equal to 0"))
        if old is not None:
            old_spec = old.get("spec") or {}
            if old_spec.get("completions") != spec.get("completions") and \
                    spec.get("completionMode") == "Indexed":
                causes.append(errors.field_invalid("spec.completions", spec.get("completions"),
                                                   "field is immutable"))
            if old_spec.get("selector") != spec.get("selector"):
                causes.append(errors.field_invalid("spec.selector", spec.get("selector"), "field is immutable"))
            if old_spec.get("completionMode") != spec.get("completionMode"):
                causes.append(errors.field_invalid("spec.completionMode", spec.get("completionMode"),
                                                   "field is immutable"))
            old_tpl = (old_spec.get("template") or {})
            started = (old.get("status") or {}).get("startTime") is not None
            if old_tpl != spec.get("template") and not old_spec.get("suspend") and started:
                causes.append(errors.field_invalid("spec.template", spec.get("template"),
                                                   "field is immutable"))
    return causes


def _validate_workload(spec: Any) -> list[dict[str, Any]]:
    """A Deployment, ReplicaSet or StatefulSet: its pod template, selector and replicas."""
    causes: list[dict[str, Any]] = []
    if not isinstance(spec, dict):
        causes.append(errors.field_required("spec"))
    else:
        template = spec.get("template") or {}
        causes += _validate_pod_spec(template.get("spec"), "spec.template.spec")
        selector = spec.get("selector")
        if not selector:
            causes.append(errors.field_required("spec.selector"))
        else:
            from tau_testing.sim.selectors import label_selector_from_dict, labels_match

            labels = (template.get("metadata") or {}).get("labels") or {}
            if not labels_match(label_selector_from_dict(selector), labels):
                causes.append(errors.field_invalid("spec.template.metadata.labels", labels,
                                                   "`selector` does not match template `labels`"))
        replicas = spec.get("replicas")
        if replicas is not None and (not isinstance(replicas, int) or replicas < 0):
            causes.append(errors.field_invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    return causes


def _validate_crd(obj: dict[str, Any], spec: Any) -> list[dict[str, Any]]:
    """A CustomResourceDefinition: its names, group, versions and scope."""
    causes: list[dict[str, Any]] = []
    crd_spec = spec if isinstance(spec, dict) else {}
    names = crd_spec.get("names") or {}
    for field in ("plural", "kind"):
        if not names.get(field):
            causes.append(errors.field_required(f"spec.names.{field}"))
    if not crd_spec.get("group"):
        causes.append(errors.field_required("spec.group"))
    if names.get("plural") and crd_spec.get("group") and \
            obj["metadata"].get("name") != f"{names['plural']}.{crd_spec['group']}":
        causes.append(errors.field_invalid("metadata.name", obj["metadata"].get("name"),
                                           "must be spec.names.plural+\".\"+spec.group"))
    versions = crd_spec.get("versions") or []
    if not versions:
        causes.append(errors.field_required("spec.versions"))
    if sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(errors.field_invalid("spec.versions", [v.get("name") for v in versions],
                                           "must have exactly one version marked as storage version"))
    if crd_spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(errors.field_not_supported("spec.scope", crd_spec.get("scope"), ["Cluster", "Namespaced"]))
    return causes


def _decode_check(store: Store, rtype: ResourceType, obj: dict[str, Any], field_validation: str,
                  warnings: list[str] | None) -> None:
    """What decoding into the Go type does: wrong types are 400, unknown fields are dropped (400 when Strict)."""
    from tau_testing.sim.builtin_schema import check

    unknown, type_errors = check(obj, getattr(store, "kubernetes_version", "1.30"))
    prefix = f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
    if type_errors:
        raise errors.ApiError(400, "BadRequest", prefix + "; ".join(type_errors))
    if unknown and field_validation.lower() == "strict":
        raise errors.ApiError(400, "BadRequest", prefix + "strict decoding error: " +
                              ", ".join(f'unknown field "{u}"' for u in unknown))
    if unknown and field_validation.lower() == "warn" and warnings is not None:
        warnings.extend(f'unknown field "{u}"' for u in unknown)


def admit(store: Store, operation: str, rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, *,
          field_validation: str | None = None, warnings: list[str] | None = None) -> None:
    """Default and validate ``obj`` in place; raise a 422 ``ApiError`` with field causes when invalid."""
    name = (obj.get("metadata") or {}).get("name") or ""
    if rtype.group_kind in _NONAME_KINDS:
        return
    causes = _validate_meta(rtype, obj)
    if rtype.custom and rtype.schema is not None:
        from tau_testing.sim.schema import validate_custom

        unknown: list[str] = []
        causes += validate_custom(rtype.schema, obj, unknown, old)
        if unknown:
            if (field_validation or "").lower() == "strict":
                raise errors.ApiError(400, "BadRequest", f'{rtype.kind} in version "{rtype.version}" cannot be '
                                      "handled as a " + rtype.kind + ": strict decoding error: " +
                                      ", ".join(f'unknown field "{u}"' for u in unknown))
            if warnings is not None and (field_validation or "").lower() == "warn":
                warnings.extend(f'unknown field "{u}"' for u in unknown)
    elif not rtype.custom:
        if field_validation is not None:
            _decode_check(store, rtype, obj, field_validation, warnings)
        _default_builtin(rtype, obj, old, store)
        causes += _validate_builtin(rtype, obj, old)
    if causes:
        raise errors.invalid(rtype.kind, rtype.group, name, causes)
