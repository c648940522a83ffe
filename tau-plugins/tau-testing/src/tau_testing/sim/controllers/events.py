"""Record core/v1 Events the way Kubernetes components do (with count aggregation of repeats)."""

from __future__ import annotations

from typing import Any

from tau_testing.sim.controllers import _util as u


def involved(obj: dict[str, Any], field_path: str | None = None) -> dict[str, Any]:
    meta = obj["metadata"]
    ref = {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", ""),
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    if field_path:
        ref["fieldPath"] = field_path
    return ref


def record(cluster: Any, obj: dict[str, Any], reason: str, message: str, *, type: str = "Normal",
           component: str, host: str | None = None, field_path: str | None = None,
           when: Any = None) -> dict[str, Any] | None:
    """Record an Event about ``obj``; a repeat of the same reason and message bumps ``count`` instead.

    Events of cluster-scoped objects (Nodes, ClusterQueues) go to the ``default`` namespace, as in Kubernetes.
    """
    when = when or u.now(cluster)
    namespace = obj["metadata"].get("namespace") or "default"
    uid = obj["metadata"].get("uid", "")
    name = f"{obj['metadata']['name']}.{u.hex_hash(uid, reason, message, field_path or '', length=16)}"
    existing = u.get(cluster, "v1", "Event", namespace, name)
    if existing is not None:
        existing["count"] = int(existing.get("count") or 1) + 1
        existing["lastTimestamp"] = u.ts(when)
        return u.update(cluster, existing)
    source: dict[str, Any] = {"component": component}
    if host:
        source["host"] = host
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": involved(obj, field_path),
        "reason": reason,
        "message": message,
        "type": type,
        "source": source,
        "firstTimestamp": u.ts(when),
        "lastTimestamp": u.ts(when),
        "count": 1,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": host or "",
    }
    return u.create(cluster, event)


def for_object(cluster: Any, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Events whose involvedObject is ``obj`` (by uid), oldest first."""
    namespace = obj["metadata"].get("namespace") or "default"
    uid = obj["metadata"].get("uid")
    events = [e for e in u.list_objects(cluster, "v1", "Event", namespace)
              if (e.get("involvedObject") or {}).get("uid") == uid]
    return sorted(events, key=lambda e: (e.get("firstTimestamp") or "", e["metadata"]["name"]))


def reasons(cluster: Any, obj: dict[str, Any]) -> list[str]:
    return [e["reason"] for e in for_object(cluster, obj)]
