"""Small helpers every simulated controller shares: store access, quantities, conditions, names, time."""

from __future__ import annotations

import copy
import hashlib
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any, cast

from tau_testing.sim.errors import ApiError

# ----------------------------------------------------------------------------------------------- store


def get(cluster: Any, api_version: str, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
    """The stored object, or ``None`` when it does not exist."""
    try:
        obj = cluster.store.get(api_version, kind, namespace, name)
    except ApiError as exc:
        if exc.code == 404:
            return None
        raise
    return cast("dict[str, Any] | None", obj)


def list_objects(cluster: Any, api_version: str, kind: str, namespace: str | None = None, *,
                 label_selector: str | None = None, field_selector: str | None = None) -> list[dict[str, Any]]:
    """All objects of a kind (optionally in one namespace, optionally filtered by the store's selectors before
    they are copied), sorted by namespace and name for determinism."""
    try:
        result = cluster.store.list(api_version, kind, namespace, label_selector=label_selector,
                                    field_selector=field_selector)
    except ApiError as exc:
        if exc.code == 404:
            return []
        raise
    items = result.get("items", []) if isinstance(result, dict) else list(result)
    return sorted(items, key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]))


def create(cluster: Any, obj: dict[str, Any]) -> dict[str, Any] | None:
    """Create ``obj``; ``None`` when it already exists (another pass made it)."""
    try:
        return cast("dict[str, Any]", cluster.store.create(obj))
    except ApiError as exc:
        if exc.code == 409:
            return None
        raise


def update(cluster: Any, obj: dict[str, Any]) -> dict[str, Any] | None:
    """Write spec/metadata changes; ``None`` on a conflict or when the object is gone (retried next pass)."""
    try:
        return cast("dict[str, Any]", cluster.store.update(obj))
    except ApiError as exc:
        if exc.code in (404, 409):
            return None
        raise


def update_status(cluster: Any, obj: dict[str, Any]) -> dict[str, Any] | None:
    """Write the status subresource; ``None`` on a conflict or when the object is gone."""
    try:
        return cast("dict[str, Any]", cluster.store.update_status(obj))
    except ApiError as exc:
        if exc.code in (404, 409):
            return None
        raise


def delete(cluster: Any, api_version: str, kind: str, namespace: str | None, name: str,
           propagation: str = "Background") -> bool:
    try:
        cluster.store.delete(api_version, kind, namespace, name, propagation=propagation)
    except ApiError as exc:
        if exc.code in (404, 409):
            return False
        raise
    return True


def write_status_if_changed(cluster: Any, obj: dict[str, Any], new_status: dict[str, Any]) -> bool:
    """Store ``new_status`` when it differs from the object's current status."""
    if (obj.get("status") or {}) == new_status:
        return False
    fresh = copy.deepcopy(obj)
    fresh["status"] = new_status
    return update_status(cluster, fresh) is not None


# ------------------------------------------------------------------------------------------------ time


def now(cluster: Any) -> datetime:
    value = cluster.clock.now()
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, UTC)
    return cast(datetime, value if value.tzinfo else value.replace(tzinfo=UTC))


def ts(value: datetime) -> str:
    """Kubernetes' timestamp format (second precision, ``Z``)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ts_micro(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_ts(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def plus(value: datetime, seconds: float) -> datetime:
    return value + timedelta(seconds=seconds)


def seconds_between(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds()


# ------------------------------------------------------------------------------------------ quantities

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal(10**3),
            "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15),
            "E": Decimal(10**18)}


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes quantity (``500m``, ``4Gi``, ``1.5``, ``2e3``) as an exact decimal."""
    if value is None:
        return Decimal(0)
    if isinstance(value, (int, float, Decimal)):
        return Decimal(str(value))
    text = str(value).strip()
    if not text:
        raise ValueError("empty quantity")
    for suffix, factor in _BINARY.items():
        if text.endswith(suffix):
            return _number(text[: -len(suffix)], text) * factor
    if text[-1] in "numkMGTPE" and not text[-1].isdigit():
        return _number(text[:-1], text) * _DECIMAL[text[-1]]
    return _number(text, text)


def _number(text: str, whole: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation as exc:
        raise ValueError(f"quantity {whole!r} is not a valid Kubernetes quantity") from exc


def milli(value: Any) -> int:
    """A quantity in thousandths, rounded up the way Kubernetes rounds requests."""
    return int((parse_quantity(value) * 1000).to_integral_value(rounding=ROUND_CEILING))


def format_quantity(resource: str, amount_milli: int) -> str:
    """Render an amount (in thousandths) the way ``resource.Quantity.String()`` would for the resource."""
    if amount_milli % 1000:
        return f"{amount_milli}m"
    whole = amount_milli // 1000
    if resource == "memory" or resource.endswith("storage"):
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            factor = _BINARY[suffix]
            if whole and whole % factor == 0:
                return f"{whole // factor}{suffix}"
    return str(whole)


def pod_requests(pod_spec: dict[str, Any]) -> dict[str, int]:
    """Effective requests of one pod (in thousandths): max(sum of containers, largest init container)."""
    total: dict[str, int] = {}
    for container in pod_spec.get("containers") or []:
        for name, amount in container_requests(container).items():
            total[name] = total.get(name, 0) + amount
    sidecars: dict[str, int] = {}
    for container in pod_spec.get("initContainers") or []:
        reqs = container_requests(container)
        if container.get("restartPolicy") == "Always":  # native sidecar: runs alongside the main containers
            for name, amount in reqs.items():
                sidecars[name] = sidecars.get(name, 0) + amount
            continue
        for name, amount in reqs.items():
            total[name] = max(total.get(name, 0), amount)
    for name, amount in sidecars.items():
        total[name] = total.get(name, 0) + amount
    for name, amount in ((pod_spec.get("overhead") or {}).items()):
        total[name] = total.get(name, 0) + milli(amount)
    return total


def container_requests(container: dict[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    requests = dict(resources.get("limits") or {})
    requests.update(resources.get("requests") or {})
    return {name: milli(value) for name, value in requests.items()}


# ------------------------------------------------------------------------------------------ conditions


def find_condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cast("dict[str, Any]", cond)
    return None


def condition_true(obj: dict[str, Any], ctype: str) -> bool:
    cond = find_condition(obj, ctype)
    return bool(cond and cond.get("status") == "True")


def set_condition(conditions: list[dict[str, Any]], ctype: str, status: str, reason: str, message: str,
                  when: datetime, *, probe_times: bool = False, observed_generation: int | None = None) -> bool:
    """Set a condition in place, keeping ``lastTransitionTime`` when the status does not change."""
    for cond in conditions:
        if cond.get("type") != ctype:
            continue
        changed = cond.get("status") != status or cond.get("reason") != reason or cond.get("message") != message
        if cond.get("status") != status:
            cond["lastTransitionTime"] = ts(when)
            if probe_times:
                cond["lastProbeTime"] = ts(when)
        elif probe_times and changed:
            cond["lastProbeTime"] = ts(when)
        cond["status"], cond["reason"], cond["message"] = status, reason, message
        if observed_generation is not None:
            cond["observedGeneration"] = observed_generation
        return changed
    cond = {"type": ctype, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": ts(when)}
    if probe_times:
        cond["lastProbeTime"] = ts(when)
    if observed_generation is not None:
        cond["observedGeneration"] = observed_generation
    conditions.append(cond)
    return True


def remove_condition(conditions: list[dict[str, Any]], ctype: str) -> bool:
    before = len(conditions)
    conditions[:] = [c for c in conditions if c.get("type") != ctype]
    return len(conditions) != before


# ------------------------------------------------------------------------------------------- metadata

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet Kubernetes uses for generated suffixes


def suffix(*seed: Any, length: int = 5) -> str:
    """A deterministic name suffix in Kubernetes' generateName alphabet."""
    digest = hashlib.sha256("\x00".join(str(s) for s in seed).encode()).digest()
    return "".join(_NAME_ALPHABET[b % len(_NAME_ALPHABET)] for b in digest[:length])


def hex_hash(*seed: Any, length: int = 10) -> str:
    return hashlib.sha256("\x00".join(str(s) for s in seed).encode()).hexdigest()[:length]


def owner_ref(obj: dict[str, Any], *, controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return cast("dict[str, Any]", ref)
    return None


def owned_by(obj: dict[str, Any], owner_uid: str) -> bool:
    ref = controller_of(obj)
    return bool(ref and ref.get("uid") == owner_uid)


def labels(obj: dict[str, Any]) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def key(obj: dict[str, Any]) -> tuple[str, str]:
    return (obj["metadata"].get("namespace") or "", obj["metadata"]["name"])


def is_deleting(obj: dict[str, Any]) -> bool:
    return bool(obj.get("metadata", {}).get("deletionTimestamp"))


def selector_matches(selector: dict[str, Any] | None, lbls: dict[str, str], *, nil_matches: bool = True) -> bool:
    """Evaluate a ``LabelSelector`` (matchLabels + matchExpressions) against a label map."""
    if selector is None:
        return nil_matches
    for k, v in (selector.get("matchLabels") or {}).items():
        if lbls.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        k, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and lbls.get(k) not in values:
            return False
        if op == "NotIn" and k in lbls and lbls[k] in values:
            return False
        if op == "Exists" and k not in lbls:
            return False
        if op == "DoesNotExist" and k in lbls:
            return False
    return True


NOT_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"


def pod_is_terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_is_ready(pod: dict[str, Any]) -> bool:
    return condition_true(pod, "Ready")
