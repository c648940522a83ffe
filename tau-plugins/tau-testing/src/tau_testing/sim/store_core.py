"""The store's core: its state, the JSON helpers, and how a write is put, indexed and announced.
``tau_testing.sim.store.Store`` builds the API on it."""

from __future__ import annotations

import builtins
import random
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tau_testing.sim.clock import rfc3339
from tau_testing.sim.errors import ApiError
from tau_testing.sim.resources import ResourceType, TypeRegistry

Key = tuple[str, str, str, str]  # (group, kind, namespace, name)
Callback = Callable[[str, dict[str, Any]], None]
AdmissionHook = Callable[[str, ResourceType, dict[str, Any], dict[str, Any] | None], None]

def clone(value: Any) -> Any:
    """A fast deep copy for JSON-like data."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class StoreCore:
    """The state of a ``Store`` (set by its constructor) and the helpers every part of it uses."""

    clock: Any
    kubernetes_version: str
    types: TypeRegistry
    _lock: threading.RLock
    _objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]]
    _by_uid: dict[str, Key]
    _dependents: dict[str, set[Key]]
    _rv: int
    _history: deque[tuple[int, str, dict[str, Any], dict[str, Any] | None]]
    _floor: int
    _subscribers: builtins.list[tuple[Callback, bool]]
    admission_hooks: builtins.list[AdmissionHook]
    _random: random.Random

    # -- helpers ---------------------------------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        with self._lock:
            return str(self._rv)

    def rtype(self, api_version: str, kind: str) -> ResourceType:
        rtype = self.types.by_kind(api_version, kind)
        if rtype is None:
            raise ApiError(404, "NotFound", f'the server could not find the requested resource '
                                           f'(no kind "{kind}" is registered for version "{api_version}")')
        return rtype

    def _bucket(self, rtype: ResourceType) -> dict[tuple[str, str], dict[str, Any]]:
        return self._objects.setdefault(rtype.group_kind, {})

    def _ns(self, rtype: ResourceType, namespace: str | None) -> str:
        if not rtype.namespaced:
            return ""
        return namespace or "default"

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _now(self) -> str:
        return rfc3339(self.clock.now())

    def _present(self, obj: dict[str, Any], rtype: ResourceType) -> dict[str, Any]:
        """A copy of a stored object in ``rtype``'s version (converted when that is not the storage version)."""
        out: dict[str, Any] = clone(obj)
        if rtype.custom and out.get("apiVersion") != rtype.api_version:
            from tau_testing.sim.conversion import convert

            return convert(out, rtype.group, rtype.kind, rtype.version)
        out["apiVersion"] = rtype.api_version
        return out

    def view(self, obj: dict[str, Any], rtype: ResourceType) -> dict[str, Any]:
        """A read-only view of a stored (or watched) object in ``rtype``'s version; copies only when needed."""
        if obj.get("apiVersion") == rtype.api_version:
            return obj
        return self._present(obj, rtype)

    def _to_storage(self, obj: dict[str, Any], rtype: ResourceType) -> dict[str, Any]:
        storage = self._storage_type(rtype)
        if storage is rtype or not rtype.custom:
            obj["apiVersion"] = storage.api_version
            return obj
        from tau_testing.sim.conversion import convert

        return convert(obj, rtype.group, rtype.kind, storage.version)

    def _emit(self, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        self._history.append((rv, event_type, obj, old))
        if len(self._history) == self._history.maxlen:
            self._floor = max(self._floor, self._history[0][0] - 1)
        for callback, raw in list(self._subscribers):
            if raw:
                callback(event_type, obj, old)  # type: ignore[call-arg]
            else:
                callback(event_type, clone(obj))

    def _index(self, key: Key, obj: dict[str, Any] | None, old: dict[str, Any] | None) -> None:
        if old is not None:
            self._by_uid.pop(old["metadata"].get("uid", ""), None)
            for ref in old["metadata"].get("ownerReferences") or []:
                deps = self._dependents.get(ref.get("uid", ""))
                if deps is not None:
                    deps.discard(key)
                    if not deps:
                        del self._dependents[ref.get("uid", "")]
        if obj is not None:
            self._by_uid[obj["metadata"]["uid"]] = key
            for ref in obj["metadata"].get("ownerReferences") or []:
                self._dependents.setdefault(ref.get("uid", ""), set()).add(key)

    def _put(self, rtype: ResourceType, obj: dict[str, Any], event_type: str, old: dict[str, Any] | None) -> None:
        meta = obj["metadata"]
        key = (rtype.group, rtype.kind, meta.get("namespace", ""), meta["name"])
        self._bucket(rtype)[(key[2], key[3])] = obj
        self._index(key, obj, old)
        self._emit(event_type, obj, old)

    def _remove(self, rtype_group: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        bucket = self._objects.get((rtype_group, kind), {})
        old = bucket.pop((namespace, name), None)
        if old is None:
            return None
        final = dict(old)
        final["metadata"] = dict(old["metadata"], resourceVersion=str(self._next_rv()))
        self._index((rtype_group, kind, namespace, name), None, old)
        self._emit("DELETED", final)
        if (rtype_group, kind) == ("apiextensions.k8s.io", "CustomResourceDefinition"):
            self._unregister_crd(final)
        return final

    def _storage_type(self, rtype: ResourceType) -> ResourceType:
        if not rtype.custom or rtype.storage:
            return rtype
        for other in self.types.for_group_kind(rtype.group, rtype.kind):
            if other.storage:
                return other
        return rtype

    if TYPE_CHECKING:  # defined by ``CrdRegistry``, which ``Store`` combines with this core
        def _unregister_crd(self, crd: dict[str, Any]) -> None: ...
