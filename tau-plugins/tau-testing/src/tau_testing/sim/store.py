"""The in-memory object store behind the simulated API server.

Objects are plain JSON-like dicts. The store never hands out its own dicts: every read returns a copy, and
every write replaces the stored dict, so snapshots kept in the watch history stay valid.
"""

from __future__ import annotations

import base64
import builtins
import json
import random
import threading
import uuid
from collections import deque
from typing import Any

from tau_testing.sim import errors
from tau_testing.sim.clock import RealClock
from tau_testing.sim.errors import ApiError
from tau_testing.sim.resources import ResourceType, TypeRegistry, builtin_types
from tau_testing.sim.selectors import labels_match, parse_field_selector, parse_label_selector
from tau_testing.sim.store_core import AdmissionHook, Callback, Key, StoreCore, _content, _meta, clone
from tau_testing.sim.store_crds import CrdRegistry
from tau_testing.sim.store_gc import GarbageCollector
from tau_testing.sim.store_watch import Watching

__all__ = ["DEFAULT_NAMESPACES", "AdmissionHook", "Callback", "Key", "Store", "StoreCore", "clone"]

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


class Store(GarbageCollector, CrdRegistry, Watching):
    """Thread-safe, in-memory Kubernetes object storage with API-server semantics."""

    def __init__(self, clock: Any = None, *, history_limit: int = 20000,
                 namespaces: tuple[str, ...] = DEFAULT_NAMESPACES) -> None:
        self.clock = clock or RealClock()
        self.kubernetes_version = "1.30"  # selects the built-in schemas used to decode API requests
        self.types = TypeRegistry(builtin_types())
        self._lock = threading.RLock()
        self._objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}
        self._by_uid: dict[str, Key] = {}
        self._dependents: dict[str, set[Key]] = {}
        self._rv = 100
        self._history: deque[tuple[int, str, dict[str, Any], dict[str, Any] | None]] = deque(maxlen=history_limit)
        self._floor = self._rv  # the oldest resourceVersion a watch may start from
        self._subscribers: builtins.list[tuple[Callback, bool]] = []
        self.admission_hooks: builtins.list[AdmissionHook] = []
        self._random = random.Random(0x7A0)
        for ns in namespaces:
            self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    def _admit(self, operation: str, rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None,
               field_validation: str | None, warnings: builtins.list[str] | None) -> None:
        from tau_testing.sim import admission

        admission.admit(self, operation, rtype, obj, old, field_validation=field_validation, warnings=warnings)
        for hook in list(self.admission_hooks):
            hook(operation, rtype, obj, old)

    # -- reads -----------------------------------------------------------------------------------------------

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        rtype = self.rtype(api_version, kind)
        with self._lock:
            obj = self._objects.get(rtype.group_kind, {}).get((self._ns(rtype, namespace), name))
            return self._present(obj, rtype) if obj is not None else None

    def get_or_404(self, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self.get(api_version, kind, namespace, name)
        if obj is None:
            rtype = self.rtype(api_version, kind)
            raise errors.not_found(rtype.plural, rtype.group, name)
        return obj

    def get_by_uid(self, uid: str) -> dict[str, Any] | None:
        with self._lock:
            key = self._by_uid.get(uid)
            if key is None:
                return None
            obj = self._objects.get((key[0], key[1]), {}).get((key[2], key[3]))
            return clone(obj) if obj is not None else None

    def list(self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> builtins.list[dict[str, Any]]:
        return self.list_page(api_version, kind, namespace, label_selector, field_selector)[0]

    def list_page(self, api_version: str, kind: str, namespace: str | None = None,
                  label_selector: str | None = None, field_selector: str | None = None, limit: int | None = None,
                  continue_token: str | None = None
                  ) -> tuple[builtins.list[dict[str, Any]], str, str | None, int | None]:
        """One page of a list: (items, list resourceVersion, continue token, remaining item count)."""
        rtype = self.rtype(api_version, kind)
        reqs = parse_label_selector(label_selector)
        fmatch = parse_field_selector(field_selector, rtype.group, rtype.kind)
        start_after: tuple[str, str] | None = None
        if continue_token:
            try:
                token = json.loads(base64.urlsafe_b64decode(continue_token.encode()).decode())
                start_after = (token["ns"], token["name"])
                token_rv = int(token["rv"])
            except (ValueError, KeyError, TypeError) as exc:
                raise errors.bad_request(f"invalid continue token: {continue_token!r}") from exc
            if token_rv < self._floor:
                raise ApiError(410, "Expired", "The provided continue parameter is too old to display a "
                                               "consistent list result. You can start a new list without "
                                               "the continue parameter.")
        with self._lock:
            list_rv = str(self._rv)
            bucket = self._objects.get(rtype.group_kind, {})
            keys = sorted(bucket)
            selected: builtins.list[dict[str, Any]] = []
            for key in keys:
                if rtype.namespaced and namespace and key[0] != namespace:
                    continue
                if start_after is not None and key <= start_after:
                    continue
                obj = bucket[key]
                if reqs and not labels_match(reqs, obj["metadata"].get("labels")):
                    continue
                if field_selector and not fmatch(obj):
                    continue
                selected.append(obj)
            token_out: str | None = None
            remaining: int | None = None
            if limit and limit > 0 and len(selected) > limit:
                remaining = len(selected) - limit
                selected = selected[:limit]
                last = selected[-1]["metadata"]
                token_out = base64.urlsafe_b64encode(json.dumps(
                    {"rv": int(list_rv), "ns": last.get("namespace", ""), "name": last["name"]}).encode()).decode()
            items = [self._present(o, rtype) for o in selected]
        return items, list_rv, token_out, remaining

    def all_objects(self) -> builtins.list[dict[str, Any]]:
        with self._lock:
            return [clone(o) for bucket in self._objects.values() for o in bucket.values()]

    def count(self) -> int:
        with self._lock:
            return sum(len(b) for b in self._objects.values())

    # -- writes ----------------------------------------------------------------------------------------------

    def create(self, obj: dict[str, Any], *, dry_run: bool = False, field_validation: str | None = None,
               warnings: builtins.list[str] | None = None) -> dict[str, Any]:
        obj = clone(obj)
        rtype = self.rtype(obj.get("apiVersion", ""), obj.get("kind", ""))
        meta = _meta(obj)
        with self._lock:
            if rtype.namespaced:
                meta["namespace"] = meta.get("namespace") or "default"
            else:
                meta.pop("namespace", None)
            if not meta.get("name") and meta.get("generateName"):
                bucket = self._bucket(rtype)
                for _ in range(100):
                    candidate = meta["generateName"] + "".join(self._random.choice(_NAME_CHARS) for _ in range(5))
                    if (meta.get("namespace", ""), candidate) not in bucket:
                        meta["name"] = candidate
                        break
            if not meta.get("name"):
                raise errors.invalid(rtype.kind, rtype.group, "", [errors.field_required(
                    "metadata.name", "name or generateName is required")])
            ns = meta.get("namespace", "")
            if rtype.namespaced:
                namespace_obj = self._objects.get(("", "Namespace"), {}).get(("", ns))
                if namespace_obj is None:
                    raise errors.not_found("namespaces", "", ns)
                if namespace_obj["metadata"].get("deletionTimestamp") and not dry_run:
                    raise ApiError(403, "Forbidden", f'{rtype.plural} "{meta["name"]}" is forbidden: unable to '
                                                     f'create new content in namespace {ns} because it is being '
                                                     f'terminated', name=meta["name"], kind=rtype.plural,
                                   group=rtype.group)
            if (ns, meta["name"]) in self._bucket(rtype):
                raise errors.already_exists(rtype.plural, rtype.group, meta["name"])
            for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "selfLink"):
                meta.pop(field, None)
            meta["uid"] = str(uuid.UUID(int=self._random.getrandbits(128), version=4))
            meta["generation"] = 1
            meta["creationTimestamp"] = self._now()
            if "status" in rtype.subresources and rtype.kind != "Node" and rtype.kind != "CustomResourceDefinition":
                # the API server resets status on create: a built-in kind answers with an empty status object (its
                # Go struct is not a pointer), a custom resource with none
                obj.pop("status", None)
                if not rtype.custom:
                    obj["status"] = {}
            self._admit("CREATE", rtype, obj, None, field_validation, warnings)
            if dry_run:
                return self._present(obj, rtype)
            storage = self._storage_type(rtype)
            obj = self._to_storage(obj, rtype)
            meta = obj["metadata"]
            meta["resourceVersion"] = str(self._next_rv())
            self._put(storage, obj, "ADDED", None)
            if rtype.group_kind == ("apiextensions.k8s.io", "CustomResourceDefinition"):
                self._register_crd(obj)
            refs = meta.get("ownerReferences") or []
            if refs and not any(ref.get("uid") in self._by_uid for ref in refs):
                # every owner is already gone: the garbage collector removes the new dependent
                self._collect_garbage()
                created = self._bucket(rtype).get((ns, meta["name"]))
                return self._present(created if created is not None else obj, rtype)
            return self._present(self._bucket(rtype)[(ns, meta["name"])], rtype)

    def _existing(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        old = self._objects.get(rtype.group_kind, {}).get((namespace, name))
        if old is None:
            raise errors.not_found(rtype.plural, rtype.group, name)
        return old

    def _check_preconditions(self, rtype: ResourceType, old: dict[str, Any], meta: dict[str, Any]) -> None:
        name = old["metadata"]["name"]
        rv = meta.get("resourceVersion")
        if rv and str(rv) != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rtype.plural, rtype.group, name)
        uid = meta.get("uid")
        if uid and uid != old["metadata"]["uid"]:
            raise errors.conflict(rtype.plural, rtype.group, name,
                                  f"Precondition failed: UID in precondition: {uid}, "
                                  f"UID in object meta: {old['metadata']['uid']}")

    def update(self, obj: dict[str, Any], *, dry_run: bool = False, field_validation: str | None = None,
               warnings: builtins.list[str] | None = None) -> dict[str, Any]:
        return self._update(clone(obj), None, dry_run, field_validation, warnings)

    def update_status(self, obj: dict[str, Any], *, dry_run: bool = False,
                      warnings: builtins.list[str] | None = None) -> dict[str, Any]:
        return self._update(clone(obj), "status", dry_run, None, warnings)

    def _update(self, obj: dict[str, Any], subresource: str | None, dry_run: bool, field_validation: str | None,
                warnings: builtins.list[str] | None) -> dict[str, Any]:
        rtype = self.rtype(obj.get("apiVersion", ""), obj.get("kind", ""))
        meta = _meta(obj)
        if subresource == "status" and "status" not in rtype.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        with self._lock:
            ns = self._ns(rtype, meta.get("namespace"))
            name = meta.get("name") or ""
            old = self._existing(rtype, ns, name)
            self._check_preconditions(rtype, old, meta)
            old_meta = old["metadata"]
            old_view = self._present(old, rtype)  # the stored object in the request's version
            if subresource == "status":
                new = old_view
                if "status" in obj:
                    new["status"] = obj["status"]
                else:
                    new.pop("status", None)
                if rtype.custom and rtype.schema is not None:
                    from tau_testing.sim.schema import validate_custom

                    new = clone(new)
                    causes = validate_custom(rtype.schema, new, [], self._present(old, rtype))
                    if causes:
                        raise errors.invalid(rtype.kind, rtype.group, name, causes)
            else:
                new = obj
                if "status" in rtype.subresources and rtype.kind != "Namespace":
                    if "status" in old_view:
                        new["status"] = old_view["status"]
                    else:
                        new.pop("status", None)
                fixed = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                         "generation", "namespace", "name")
                new_meta = {k: v for k, v in meta.items() if k not in fixed}
                for k in fixed:
                    if k in old_meta:
                        new_meta[k] = old_meta[k]
                if "managedFields" not in new_meta and "managedFields" in old_meta:
                    new_meta["managedFields"] = old_meta["managedFields"]
                new["metadata"] = new_meta
                if old_meta.get("deletionTimestamp"):
                    added = set(new_meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
                    if added:
                        raise errors.invalid(rtype.kind, rtype.group, name, [errors.field_forbidden(
                            "metadata.finalizers", "no new finalizers can be added if the object is being "
                                                   "deleted, found new finalizers " + json.dumps(sorted(added)))])
                self._admit("UPDATE", rtype, new, old_view, field_validation, warnings)
            new["apiVersion"] = rtype.api_version
            new = self._to_storage(new, rtype)
            new["apiVersion"] = old["apiVersion"]
            new["kind"] = rtype.kind
            new_meta = new["metadata"]
            new_meta["resourceVersion"] = old_meta["resourceVersion"]
            if _content(new) != _content(old):
                new_meta["generation"] = int(old_meta.get("generation") or 1) + 1
            if new == old:
                return self._present(old, rtype)
            if dry_run:
                return self._present(new, rtype)
            new_meta["resourceVersion"] = str(self._next_rv())
            storage = self._storage_type(rtype)
            self._put(storage, new, "MODIFIED", old)
            if rtype.group_kind == ("apiextensions.k8s.io", "CustomResourceDefinition"):
                self._register_crd(new)
            if new_meta.get("deletionTimestamp"):
                self._collect_garbage()
            current = self._objects.get(rtype.group_kind, {}).get((ns, name))
            return self._present(current if current is not None else new, rtype)

    def patch(self, api_version: str, kind: str, namespace: str | None, name: str, patch: Any,
              patch_type: str = "merge", subresource: str | None = None, *, dry_run: bool = False,
              field_validation: str | None = None, warnings: builtins.list[str] | None = None) -> dict[str, Any]:
        from tau_testing.sim.patch import json_patch, merge_patch, strategic_merge_patch

        rtype = self.rtype(api_version, kind)
        with self._lock:
            current = self._present(self._existing(rtype, self._ns(rtype, namespace), name), rtype)
            if patch_type == "merge":
                result = merge_patch(current, patch)
            elif patch_type == "strategic":
                if rtype.custom:
                    raise ApiError(415, "UnsupportedMediaType",
                                   "the body of the request was in an unknown format - accepted media types "
                                   "include: application/json-patch+json, application/merge-patch+json, "
                                   "application/apply-patch+yaml")
                result = strategic_merge_patch(current, patch)
            elif patch_type == "json":
                result = json_patch(current, patch)
            else:
                raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {patch_type!r}")
            if not isinstance(result, dict):
                raise errors.bad_request("the patch did not produce an object")
            result["apiVersion"] = current["apiVersion"]
            result["kind"] = current["kind"]
            rmeta = _meta(result)
            rmeta["name"] = name
            if rtype.namespaced:
                rmeta["namespace"] = current["metadata"]["namespace"]
            patch_rv = None
            if isinstance(patch, dict):
                patch_rv = (patch.get("metadata") or {}).get("resourceVersion")
            if not patch_rv:
                rmeta["resourceVersion"] = current["metadata"]["resourceVersion"]
            if subresource == "status":
                return self._update(result, "status", dry_run, None, warnings)
            return self._update(result, None, dry_run, field_validation, warnings)

    def apply(self, api_version: str, kind: str, namespace: str | None, name: str, config: dict[str, Any],
              field_manager: str | None, *, force: bool = False, subresource: str | None = None,
              dry_run: bool = False, field_validation: str | None = None,
              warnings: builtins.list[str] | None = None) -> dict[str, Any]:
        """Server-side apply of ``config`` by ``field_manager`` (see ``tau_testing.sim.ssa``)."""
        from tau_testing.sim import ssa

        rtype = self.rtype(api_version, kind)
        if not field_manager:
            raise errors.invalid("PatchOptions", "meta.k8s.io", "", [errors.field_required(
                "fieldManager", "is required for apply patch")])
        if not isinstance(config, dict):
            raise errors.bad_request("an apply configuration must be an object")
        if config.get("apiVersion") != rtype.api_version or config.get("kind") != rtype.kind:
            raise errors.bad_request(f"the apply configuration must name apiVersion {rtype.api_version!r} and kind "
                                     f"{rtype.kind!r}")
        config = clone(config)
        meta = _meta(config)
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL "
                                     f"({name})")
        meta["name"] = name
        if rtype.namespaced:
            meta["namespace"] = self._ns(rtype, namespace)
        with self._lock:
            stored = self._objects.get(rtype.group_kind, {}).get((self._ns(rtype, namespace), name))
            status = subresource == "status"
            if stored is None:
                if status:
                    raise errors.not_found(rtype.plural, rtype.group, name)
                created = ssa.apply(None, config, field_manager, custom=rtype.custom, force=force, now=self._now())
                return self.create(created, dry_run=dry_run, field_validation=field_validation, warnings=warnings)
            current = self._present(stored, rtype)
            result = ssa.apply(current, config, field_manager, custom=rtype.custom, force=force, now=self._now(),
                               status=status)
            rv = meta.get("resourceVersion")
            result["metadata"]["resourceVersion"] = rv or current["metadata"]["resourceVersion"]
            if status:
                return self._update(result, "status", dry_run, None, warnings)
            return self._update(result, None, dry_run, field_validation, warnings)

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str,
               propagation: str | None = "Background", preconditions: dict[str, Any] | None = None, *,
               dry_run: bool = False) -> dict[str, Any] | None:
        """Delete an object. Returns the final object when it is gone, or the object marked for deletion
        (``deletionTimestamp`` set) while finalizers still hold it."""
        rtype = self.rtype(api_version, kind)
        propagation = propagation or "Background"
        if propagation not in ("Background", "Foreground", "Orphan"):
            raise errors.bad_request(f'propagationPolicy "{propagation}" is not supported: supported values: '
                                     f'"Background", "Foreground", "Orphan"')
        with self._lock:
            ns = self._ns(rtype, namespace)
            old = self._existing(rtype, ns, name)
            self._check_preconditions(rtype, old, preconditions or {})
            if dry_run:
                return self._present(old, rtype)
            meta = old["metadata"]
            finalizers = list(meta.get("finalizers") or [])
            has_dependents = bool(self._dependents.get(meta["uid"]))
            if propagation == "Foreground" and has_dependents and "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            if propagation == "Orphan" and has_dependents and "orphan" not in finalizers:
                finalizers.append("orphan")
            is_namespace = rtype.group_kind == ("", "Namespace")
            if finalizers or is_namespace:
                if meta.get("deletionTimestamp") and finalizers == list(meta.get("finalizers") or []):
                    return self._present(old, rtype)
                new = dict(old)
                new["metadata"] = dict(meta, finalizers=finalizers, resourceVersion=str(self._next_rv()))
                if not finalizers:
                    new["metadata"].pop("finalizers")
                new["metadata"].setdefault("deletionTimestamp", self._now())
                new["metadata"].setdefault("deletionGracePeriodSeconds", 0)
                if is_namespace:
                    new["status"] = dict(new.get("status") or {}, phase="Terminating")
                self._put(rtype, new, "MODIFIED", old)
                self._collect_garbage()
                current = self._objects.get(rtype.group_kind, {}).get((ns, name))
                return self._present(current if current is not None else new, rtype)
            final = self._remove(rtype.group, rtype.kind, ns, name)
            self._collect_garbage()
            return self._present(final, rtype) if final is not None else None

    def delete_collection(self, api_version: str, kind: str, namespace: str | None = None,
                          label_selector: str | None = None, field_selector: str | None = None,
                          propagation: str | None = "Background", *,
                          dry_run: bool = False) -> builtins.list[dict[str, Any]]:
        out: builtins.list[dict[str, Any]] = []
        with self._lock:
            for item in self.list(api_version, kind, namespace, label_selector, field_selector):
                meta = item["metadata"]
                try:
                    deleted = self.delete(api_version, kind, meta.get("namespace"), meta["name"], propagation,
                                          dry_run=dry_run)
                except ApiError as exc:
                    if exc.code == 404:
                        continue
                    raise
                if deleted is not None:
                    out.append(deleted)
        return out
