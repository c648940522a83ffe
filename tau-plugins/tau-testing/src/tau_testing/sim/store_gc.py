"""The store's garbage collector and namespace controller: owner references, finalizers, propagation."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from tau_testing.sim.resources import ResourceType
from tau_testing.sim.store_core import Key, StoreCore


class GarbageCollector(StoreCore):
    """Deletes dependents whose owners are gone and finishes deletions whose finalizers are done."""

    if TYPE_CHECKING:  # defined by ``Store``, which combines this mixin
        def delete(self, api_version: str, kind: str, namespace: str | None, name: str,
                   propagation: str | None = "Background", preconditions: dict[str, Any] | None = None, *,
                   dry_run: bool = False) -> dict[str, Any] | None: ...

    def _type_of(self, group: str, kind: str) -> ResourceType | None:
        candidates = self.types.for_group_kind(group, kind)
        for c in candidates:
            if c.storage:
                return c
        return candidates[0] if candidates else None

    def _set_finalizers(self, key: Key, finalizers: builtins.list[str]) -> None:
        old = self._objects[(key[0], key[1])][(key[2], key[3])]
        new = dict(old)
        new["metadata"] = dict(old["metadata"], resourceVersion=str(self._next_rv()))
        if finalizers:
            new["metadata"]["finalizers"] = finalizers
        else:
            new["metadata"].pop("finalizers", None)
        rtype = self._type_of(key[0], key[1])
        assert rtype is not None
        self._put(rtype, new, "MODIFIED", old)

    def _collect_garbage(self) -> None:
        """Run the garbage collector and the namespace controller until nothing changes."""
        for _ in range(1000):
            if not self._gc_round():
                return

    def _gc_round(self) -> bool:
        changed = False
        for (group, kind), bucket in list(self._objects.items()):
            for (ns, name), obj in list(bucket.items()):
                if (ns, name) not in bucket or bucket[(ns, name)] is not obj:
                    continue
                meta = obj["metadata"]
                key = (group, kind, ns, name)
                uid = meta["uid"]
                if meta.get("ownerReferences") and not meta.get("deletionTimestamp"):
                    owners = [r for r in meta["ownerReferences"] if r.get("uid") in self._by_uid]
                    live = [r for r in owners if not self._being_deleted_foreground(r.get("uid", ""))]
                    if not owners:
                        self._gc_delete(key, "Background")
                        changed = True
                        continue
                    if not live:
                        self._gc_delete(key, "Foreground")
                        changed = True
                        continue
                if not meta.get("deletionTimestamp"):
                    continue
                finalizers = list(meta.get("finalizers") or [])
                if "orphan" in finalizers:
                    for dep in list(self._dependents.get(uid, ())):
                        self._drop_owner(dep, uid)
                    finalizers.remove("orphan")
                    self._set_finalizers(key, finalizers)
                    changed = True
                    continue
                if "foregroundDeletion" in finalizers:
                    if not self._dependents.get(uid):
                        finalizers.remove("foregroundDeletion")
                        self._set_finalizers(key, finalizers)
                        changed = True
                    continue
                if (group, kind) == ("", "Namespace"):
                    if self._empty_namespace(name):
                        if not finalizers:
                            self._remove(group, kind, ns, name)
                            changed = True
                    else:
                        changed = self._drain_namespace(name) or changed
                    continue
                if not finalizers:
                    self._remove(group, kind, ns, name)
                    changed = True
        return changed

    def _being_deleted_foreground(self, uid: str) -> bool:
        key = self._by_uid.get(uid)
        if key is None:
            return True
        obj = self._objects.get((key[0], key[1]), {}).get((key[2], key[3]))
        if obj is None:
            return True
        return "foregroundDeletion" in (obj["metadata"].get("finalizers") or [])

    def _gc_delete(self, key: Key, propagation: str) -> None:
        rtype = self._type_of(key[0], key[1])
        if rtype is None:
            return
        self.delete(rtype.api_version, rtype.kind, key[2] or None, key[3], propagation)

    def _drop_owner(self, key: Key, owner_uid: str) -> None:
        old = self._objects.get((key[0], key[1]), {}).get((key[2], key[3]))
        if old is None:
            return
        refs = [r for r in old["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
        new = dict(old)
        new["metadata"] = dict(old["metadata"], resourceVersion=str(self._next_rv()))
        if refs:
            new["metadata"]["ownerReferences"] = refs
        else:
            new["metadata"].pop("ownerReferences", None)
        rtype = self._type_of(key[0], key[1])
        assert rtype is not None
        self._put(rtype, new, "MODIFIED", old)

    def _empty_namespace(self, namespace: str) -> bool:
        return not any(key[0] == namespace for bucket in self._objects.values() for key in bucket)

    def _drain_namespace(self, namespace: str) -> bool:
        changed = False
        for (group, kind), bucket in list(self._objects.items()):
            for (ns, name), obj in list(bucket.items()):
                if ns != namespace or obj["metadata"].get("deletionTimestamp"):
                    continue
                self._gc_delete((group, kind, ns, name), "Background")
                changed = True
        return changed
