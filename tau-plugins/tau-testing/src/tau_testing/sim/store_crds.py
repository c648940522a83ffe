"""The store's CustomResourceDefinitions: registering their types, and installing them at start-up."""

from __future__ import annotations

import uuid
from typing import Any

from tau_testing.sim.resources import types_from_crd
from tau_testing.sim.store_core import StoreCore


class CrdRegistry(StoreCore):
    """Serves the types a CRD defines while the CRD exists."""

    def _register_crd(self, crd: dict[str, Any]) -> None:
        new_types = types_from_crd(crd)
        if not new_types:
            return
        group, kind = new_types[0].group, new_types[0].kind
        for existing in self.types.for_group_kind(group, kind):
            if existing.version not in {t.version for t in new_types}:
                self.types.remove_group_kind(group, kind)
                break
        for t in new_types:
            self.types.add(t)
        names = (crd.get("spec") or {}).get("names") or {}
        status = {
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": self._now()},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": self._now()},
            ],
            "acceptedNames": {k: v for k, v in names.items() if k != "listKind"} | {
                "listKind": names.get("listKind") or names.get("kind", "") + "List"},
            "storedVersions": [t.version for t in new_types if t.storage],
        }
        key = ("apiextensions.k8s.io", "CustomResourceDefinition", "", crd["metadata"]["name"])
        old = self._objects.get((key[0], key[1]), {}).get(("", key[3]))
        if old is not None and old.get("status") != status:
            if (old.get("status") or {}).get("conditions"):
                status["conditions"] = old["status"]["conditions"]
                if old["status"] == status:
                    return
            new = dict(old, status=status)
            new["metadata"] = dict(old["metadata"], resourceVersion=str(self._next_rv()))
            rtype = self.types.by_kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
            assert rtype is not None
            self._put(rtype, new, "MODIFIED", old)

    def _unregister_crd(self, crd: dict[str, Any]) -> None:
        spec = crd.get("spec") or {}
        group, kind = spec.get("group", ""), (spec.get("names") or {}).get("kind", "")
        for (ns, name) in list(self._objects.get((group, kind), {})):
            self._remove(group, kind, ns, name)
        self._objects.pop((group, kind), None)
        self.types.remove_group_kind(group, kind)

    def load_crd(self, crd: dict[str, Any]) -> None:
        """Install a CRD at start-up without copying it (the dict must not be mutated afterwards)."""
        with self._lock:
            rtype = self.types.by_kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
            assert rtype is not None
            name = crd["metadata"]["name"]
            if ("", name) in self._bucket(rtype):
                return
            obj = dict(crd)
            obj["metadata"] = dict(crd.get("metadata") or {}, uid=str(uuid.UUID(
                int=self._random.getrandbits(128), version=4)), generation=1, creationTimestamp=self._now(),
                resourceVersion=str(self._next_rv()))
            self._put(rtype, obj, "ADDED", None)
            self._register_crd(obj)
