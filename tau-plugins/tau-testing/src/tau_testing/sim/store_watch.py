"""The store's event fan-out: subscribers, watches replaying the history, and compaction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tau_testing.sim import errors
from tau_testing.sim.errors import ApiError
from tau_testing.sim.store_core import Callback, StoreCore


class Watching(StoreCore):
    """Delivers committed changes to subscribers and watches."""

    def subscribe(self, callback: Callback) -> Callable[[], None]:
        """Call ``callback(event_type, obj)`` after every committed change (ADDED, MODIFIED, DELETED)."""
        return self._subscribe(callback, raw=False)

    def _subscribe(self, callback: Callback, raw: bool) -> Callable[[], None]:
        entry = (callback, raw)
        with self._lock:
            self._subscribers.append(entry)

        def unsubscribe() -> None:
            with self._lock:
                if entry in self._subscribers:
                    self._subscribers.remove(entry)

        return unsubscribe

    def watch(self, api_version: str, kind: str, resource_version: str | None,
              callback: Callable[[str, dict[str, Any], dict[str, Any] | None], None], *,
              namespace: str | None = None, send_initial: bool = False) -> Callable[[], None]:
        """Replay history after ``resource_version`` (or the current objects as ADDED when ``send_initial``),
        then deliver live events for this kind as ``callback(event_type, obj, previous_obj)``. Objects are
        read-only snapshots. Raises 410 Gone for versions older than the retained history."""
        rtype = self.rtype(api_version, kind)
        group_kind = rtype.group_kind

        def relevant(obj: dict[str, Any]) -> bool:
            if (obj["apiVersion"].rpartition("/")[0], obj["kind"]) != group_kind:
                return False
            return not (namespace and rtype.namespaced and obj["metadata"].get("namespace") != namespace)

        def deliver(event_type: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> None:
            if relevant(obj):
                callback(event_type, obj, old)

        with self._lock:
            if send_initial:
                for key in sorted(self._objects.get(group_kind, {})):
                    obj = self._objects[group_kind][key]
                    if relevant(obj):
                        callback("ADDED", obj, None)
            elif resource_version not in (None, "", "0"):
                try:
                    since = int(str(resource_version))
                except ValueError as exc:
                    raise errors.bad_request(f"invalid resource version {resource_version!r}") from exc
                if since < self._floor:
                    raise ApiError(410, "Expired", f"too old resource version: {since} ({self._floor + 1})")
                for rv, event_type, obj, old in self._history:
                    if rv > since and relevant(obj):
                        callback(event_type, obj, old)
            return self._subscribe(deliver, raw=True)  # raw subscribers are called with (type, obj, old)

    def compact(self) -> str:
        """Forget the watch history, as etcd compaction does: older resourceVersions now answer 410 Gone."""
        with self._lock:
            self._history.clear()
            self._floor = self._rv
            return str(self._rv)
