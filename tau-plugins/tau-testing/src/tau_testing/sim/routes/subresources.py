"""Subresources with their own shape: scale, pods/binding, pods/eviction, and the access reviews."""

from __future__ import annotations

from typing import Any

from tau_testing.sim import errors
from tau_testing.sim.auth import Attributes, User
from tau_testing.sim.errors import ApiError
from tau_testing.sim.resources import ResourceType
from tau_testing.sim.routes.base import RouteBase
from tau_testing.sim.routes.wire import Request, Response, Target


class SubresourceRoutes(RouteBase):
    """scale, binding, eviction and the reviews."""

    def _scale_paths(self, rtype: ResourceType) -> tuple[str, str, str | None]:
        if rtype.custom:
            paths = rtype.scale_paths
            return (paths.get("specReplicasPath", ".spec.replicas"), paths.get("statusReplicasPath",
                    ".status.replicas"), paths.get("labelSelectorPath"))
        return ".spec.replicas", ".status.replicas", None

    @staticmethod
    def _dig(obj: Any, path: str) -> Any:
        for part in path.strip(".").split("."):
            if not isinstance(obj, dict):
                return None
            obj = obj.get(part)
        return obj

    def _scale_of(self, obj: dict[str, Any], rtype: ResourceType) -> dict[str, Any]:
        spec_path, status_path, selector_path = self._scale_paths(rtype)
        meta = obj["metadata"]
        selector = ""
        if selector_path:
            selector = str(self._dig(obj, selector_path) or "")
        else:
            sel = (obj.get("spec") or {}).get("selector") or {}
            selector = ",".join(f"{k}={v}" for k, v in (sel.get("matchLabels") or {}).items())
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                             if k in meta},
                "spec": {"replicas": int(self._dig(obj, spec_path) or 0)},
                "status": {"replicas": int(self._dig(obj, status_path) or 0), "selector": selector}}

    async def _scale(self, request: Request, response: Response, target: Target) -> bool:
        rtype = target.rtype
        assert target.name is not None
        obj = self.store.get_or_404(rtype.api_version, rtype.kind, target.namespace, target.name)
        scale = self._scale_of(obj, rtype)
        if request.method == "GET":
            await response.json(200, scale)
            return False
        dry = self._dry_run(request)
        if request.method == "PUT":
            new_scale = request.json() or {}
        elif request.method == "PATCH":
            from tau_testing.sim.patch import json_patch, merge_patch

            patch_type = self._patch_type(request)
            patch = request.json()
            new_scale = json_patch(scale, patch) if patch_type == "json" else merge_patch(scale, patch)
        else:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        replicas = (new_scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise errors.invalid("Scale", "autoscaling", target.name, [errors.field_invalid(
                "spec.replicas", replicas, "must be greater than or equal to 0")])
        rv = (new_scale.get("metadata") or {}).get("resourceVersion")
        if rv and request.method == "PUT" and rv != obj["metadata"]["resourceVersion"]:
            raise errors.conflict(rtype.plural, rtype.group, target.name)
        spec_path = self._scale_paths(rtype)[0].strip(".").split(".")
        node = obj
        for part in spec_path[:-1]:
            node = node.setdefault(part, {})
        node[spec_path[-1]] = replicas
        updated = self.store.update(obj, dry_run=dry)
        await response.json(200, self._scale_of(updated, rtype))
        return not dry

    # -- pod actions, reviews --------------------------------------------------------------------------------

    async def _pod_action(self, request: Request, response: Response, target: Target) -> bool:
        assert target.name is not None
        body = request.json() or {}
        pod = self.store.get_or_404("v1", "Pod", target.namespace, target.name)
        dry = self._dry_run(request, body.get("deleteOptions") if isinstance(body, dict) else None)
        if target.subresource == "binding":
            node = ((body or {}).get("target") or {}).get("name")
            if not node:
                raise errors.invalid("Binding", "", target.name, [errors.field_required("target.name")])
            if (pod.get("spec") or {}).get("nodeName"):
                raise errors.conflict("pods", "", target.name,
                                      f'pod {target.name} is already assigned to node "{pod["spec"]["nodeName"]}"')
            if not dry:
                self.store.patch("v1", "Pod", target.namespace, target.name, {"spec": {"nodeName": node}}, "merge")
        elif not dry:
            self.store.delete("v1", "Pod", target.namespace, target.name, "Background")
        await response.json(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                  "code": 201})
        return not dry

    async def _review(self, request: Request, response: Response, target: Target, user: User) -> None:
        body = request.json() or {}
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        kind = target.rtype.kind
        spec = body.get("spec") or {}
        out = {"kind": kind, "apiVersion": target.rtype.api_version, "metadata": {"creationTimestamp": None},
               "spec": spec}
        if kind == "SelfSubjectReview":
            out["status"] = {"userInfo": {"username": user.name, "uid": user.uid, "groups": user.all_groups}}
            await response.json(201, out)
            return
        subject = user
        if kind == "SubjectAccessReview":
            if not spec.get("user") and not spec.get("groups"):
                raise errors.invalid(kind, "authorization.k8s.io", "", [errors.field_required(
                    "spec.user", "at least one of user or group must be specified")])
            subject = User(spec.get("user", ""), [g for g in spec.get("groups") or []
                                                   if g != "system:authenticated"])
        if kind == "SelfSubjectRulesReview":
            namespace = spec.get("namespace") or ""
            rules = self.cluster.authorizer.rules_for(subject, namespace) if "system:masters" not in \
                subject.groups else [("", {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
                                     ("", {"verbs": ["*"], "nonResourceURLs": ["*"]})]
            resource_rules = [{k: r.get(k, []) for k in ("verbs", "apiGroups", "resources", "resourceNames")
                               if r.get(k) is not None or k != "resourceNames"}
                              for _, r in rules if "nonResourceURLs" not in r]
            non_resource = [{"verbs": r.get("verbs", []), "nonResourceURLs": r["nonResourceURLs"]}
                            for _, r in rules if "nonResourceURLs" in r]
            out["status"] = {"resourceRules": resource_rules, "nonResourceRules": non_resource, "incomplete": False}
            await response.json(201, out)
            return
        ra = spec.get("resourceAttributes")
        nra = spec.get("nonResourceAttributes")
        if ra:
            attrs = Attributes(verb=ra.get("verb", ""), group=ra.get("group", ""), resource=ra.get("resource", ""),
                               subresource=ra.get("subresource", ""), name=ra.get("name", ""),
                               namespace=ra.get("namespace", ""))
        elif nra:
            attrs = Attributes(verb=nra.get("verb", ""), path=nra.get("path", ""), resource_request=False)
        else:
            raise errors.invalid(kind, "authorization.k8s.io", "", [errors.field_required(
                "spec.resourceAttributes", "exactly one of nonResourceAttributes or resourceAttributes must be "
                                           "specified")])
        allowed, why = self.cluster.authorizer.authorize(subject, attrs)
        status: dict[str, Any] = {"allowed": allowed}
        if allowed and why:
            status["reason"] = why
        out["status"] = status
        await response.json(201, out)
