"""Label and field selectors with the Kubernetes grammar."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tau_testing.sim.errors import ApiError

_KEY = r"[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?"


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op in ("gt", "lt"):
            if not present:
                return False
            try:
                number = int(value or "")
            except ValueError:
                return False
            bound = int(self.values[0])
            return number > bound if self.op == "gt" else number < bound
        return False


def _split_top(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def _bad(text: str, why: str) -> ApiError:
    return ApiError(400, "BadRequest", f"unable to parse requirement: {why} (selector {text!r})")


def parse_label_selector(text: str | None) -> list[Requirement]:
    if not text or not text.strip():
        return []
    reqs: list[Requirement] = []
    for part in _split_top(text):
        m = re.fullmatch(rf"({_KEY})\s+(in|notin)\s+\((.*)\)", part)
        if m:
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip() or True)
            reqs.append(Requirement(m.group(1), m.group(2), tuple(v for v in values)))
            continue
        m = re.fullmatch(rf"!\s*({_KEY})", part)
        if m:
            reqs.append(Requirement(m.group(1), "!"))
            continue
        m = re.fullmatch(rf"({_KEY})\s*(==|=|!=|>|<)\s*([-A-Za-z0-9_.]*)", part)
        if m:
            op = {"==": "=", "=": "=", "!=": "!=", ">": "gt", "<": "lt"}[m.group(2)]
            if op in ("gt", "lt") and not re.fullmatch(r"-?\d+", m.group(3)):
                raise _bad(text, f"for 'gt', 'lt' operators, the value must be an integer: {m.group(3)!r}")
            reqs.append(Requirement(m.group(1), op, (m.group(3),)))
            continue
        m = re.fullmatch(rf"({_KEY})", part)
        if m:
            reqs.append(Requirement(m.group(1), "exists"))
            continue
        raise _bad(text, f"found {part!r}, expected a key, '!key', 'key=value', 'key in (...)'")
    return reqs


def label_selector_from_dict(selector: dict[str, Any] | None) -> list[Requirement]:
    """A ``LabelSelector`` object (matchLabels/matchExpressions) as requirements."""
    if not selector:
        return []
    reqs = [Requirement(k, "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        op = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}.get(expr.get("operator", ""))
        if op is None:
            raise ApiError(400, "BadRequest", f"{expr.get('operator')!r} is not a valid label selector operator")
        reqs.append(Requirement(expr["key"], op, tuple(expr.get("values") or ())))
    return reqs


def labels_match(reqs: list[Requirement], labels: dict[str, str] | None) -> bool:
    labels = labels or {}
    return all(r.matches(labels) for r in reqs)


# Field selectors ---------------------------------------------------------------------------------------------

_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
SUPPORTED_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                  "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"),
    ("", "Event"): ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                    "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"),
    ("", "Secret"): ("type",),
    ("", "Namespace"): ("status.phase",),
    ("", "Node"): ("spec.unschedulable",),
    ("", "ReplicationController"): ("status.replicas",),
    ("batch", "Job"): ("status.successful",),
    ("apps", "ReplicaSet"): ("status.replicas",),
}


def _lookup(obj: dict[str, Any], path: str) -> str:
    if path == "source" and obj.get("kind") == "Event":
        return str((obj.get("source") or {}).get("component") or obj.get("reportingComponent") or "")
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, dict):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def parse_field_selector(text: str | None, group: str, kind: str,
                         extra_fields: tuple[str, ...] = ()) -> Callable[[dict[str, Any]], bool]:
    if not text or not text.strip():
        return lambda obj: True
    allowed = set(_COMMON_FIELDS) | set(SUPPORTED_FIELDS.get((group, kind), ())) | set(extra_fields)
    terms: list[tuple[str, bool, str]] = []
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(==|=|!=)\s*(.*)", part)
        if not m:
            raise ApiError(400, "BadRequest", f"invalid selector: {text!r}; can't understand {part!r}")
        field, op, value = m.group(1), m.group(2), m.group(3)
        if field not in allowed:
            raise ApiError(400, "BadRequest",
                           f'field label not supported: {field}' if kind == "" else
                           f'"{field}" is not a known field selector: only "' + '", "'.join(sorted(allowed)) + '"')
        terms.append((field, op != "!=", value))

    def match(obj: dict[str, Any]) -> bool:
        for field, equal, value in terms:
            actual = _lookup(obj, field)
            if (actual == value) != equal:
                return False
        return True

    return match
