"""``meta.k8s.io/v1`` Table responses (``Accept: application/json;as=Table;...``), as ``kubectl get`` asks for.

Built-in kinds get the columns kubectl users know (pods: READY, STATUS, RESTARTS, AGE; jobs: STATUS,
COMPLETIONS, DURATION; ...); custom resources get their CRD version's ``additionalPrinterColumns``, evaluated
with a JSONPath subset (``.a.b``, ``[0]``, ``[*]``, ``[?(@.key=="value")]``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from tau_testing.sim.clock import parse_time
from tau_testing.sim.resources import ResourceType

Column = tuple[str, str, str, int, Callable[[dict[str, Any], datetime], Any]]  # name, type, format, priority, fn


def wants_table(accept: str) -> bool:
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def human_duration(seconds: float) -> str:
    """Kubernetes' short human duration (``5s``, ``3m20s``, ``2d4h``)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    years = hours // (24 * 365)
    if hours < 24 * 365 * 8:
        days = (hours % (24 * 365)) // 24
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{years}y"


def _age(obj: dict[str, Any], now: datetime) -> str:
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return "<unknown>"
    return human_duration((now - parse_time(created)).total_seconds())


def _since(value: str | None, now: datetime) -> str:
    return human_duration((now - parse_time(value)).total_seconds()) if value else "<unknown>"


def _name(obj: dict[str, Any], _now: datetime) -> str:
    return str(obj["metadata"]["name"])


# -- built-in kinds ----------------------------------------------------------------------------------------------

def _pod_ready(obj: dict[str, Any], _now: datetime) -> str:
    containers = (obj.get("spec") or {}).get("containers") or []
    statuses = (obj.get("status") or {}).get("containerStatuses") or []
    return f"{sum(1 for s in statuses if s.get('ready'))}/{len(containers)}"


def _pod_status(obj: dict[str, Any], _now: datetime) -> str:
    status = obj.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for init in status.get("initContainerStatuses") or []:
        state = init.get("state") or {}
        if "terminated" in state and state["terminated"].get("exitCode", 0) != 0:
            reason = "Init:" + (state["terminated"].get("reason") or "Error")
            break
        if "waiting" in state and state["waiting"].get("reason") not in (None, "PodInitializing"):
            reason = "Init:" + state["waiting"]["reason"]
            break
        if "running" in state or "waiting" in state:
            total = len((obj.get("spec") or {}).get("initContainers") or [])
            done = sum(1 for s in status.get("initContainerStatuses") or [] if "terminated" in (s.get("state") or {}))
            reason = f"Init:{done}/{total}"
            break
    else:
        for cs in reversed(status.get("containerStatuses") or []):
            state = cs.get("state") or {}
            if "waiting" in state and state["waiting"].get("reason"):
                reason = state["waiting"]["reason"]
            elif "terminated" in state:
                term = state["terminated"]
                reason = term.get("reason") or (f"Signal:{term['signal']}" if term.get("signal") else
                                                f"ExitCode:{term.get('exitCode', 0)}")
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    if (obj.get("spec") or {}).get("schedulingGates") and status.get("phase") == "Pending":
        reason = "SchedulingGated"
    return str(reason)


def _pod_restarts(obj: dict[str, Any], _now: datetime) -> int:
    return sum(int(s.get("restartCount") or 0) for s in (obj.get("status") or {}).get("containerStatuses") or [])


def _job_status(obj: dict[str, Any], _now: datetime) -> str:
    conditions = {c.get("type"): c.get("status") for c in (obj.get("status") or {}).get("conditions") or []}
    for kind in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet", "Suspended"):
        if conditions.get(kind) == "True":
            return {"FailureTarget": "FailureTarget", "SuccessCriteriaMet": "SuccessCriteriaMet"}.get(kind, kind)
    return "Running"


def _job_completions(obj: dict[str, Any], _now: datetime) -> str:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    completions = spec.get("completions")
    succeeded = int(status.get("succeeded") or 0)
    if completions is None:
        return f"{succeeded}/1 of {spec.get('parallelism', 1)}"
    return f"{succeeded}/{completions}"


def _job_duration(obj: dict[str, Any], now: datetime) -> str:
    status = obj.get("status") or {}
    start = status.get("startTime")
    if not start:
        return ""
    end = parse_time(status["completionTime"]) if status.get("completionTime") else now
    return human_duration((end - parse_time(start)).total_seconds())


def _count(path: str) -> Callable[[dict[str, Any], datetime], int]:
    def get(obj: dict[str, Any], _now: datetime) -> int:
        current: Any = obj
        for part in path.split("."):
            current = (current or {}).get(part) if isinstance(current, dict) else None
        return int(current or 0)

    return get


def _deploy_ready(obj: dict[str, Any], _now: datetime) -> str:
    ready = int((obj.get("status") or {}).get("readyReplicas") or 0)
    return f"{ready}/{int((obj.get('spec') or {}).get('replicas', 1))}"


def _images(obj: dict[str, Any], _now: datetime) -> str:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return ",".join(c.get("image", "") for c in spec.get("containers") or [])


def _containers(obj: dict[str, Any], _now: datetime) -> str:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return ",".join(c.get("name", "") for c in spec.get("containers") or [])


def _selector(obj: dict[str, Any], _now: datetime) -> str:
    selector = (obj.get("spec") or {}).get("selector") or {}
    return ",".join(f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items())


def _node_status(obj: dict[str, Any], _now: datetime) -> str:
    conditions = {c.get("type"): c.get("status") for c in (obj.get("status") or {}).get("conditions") or []}
    text = "Ready" if conditions.get("Ready") == "True" else ("NotReady" if "Ready" in conditions else "Unknown")
    if (obj.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _node_roles(obj: dict[str, Any], _now: datetime) -> str:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    return ",".join(roles) or "<none>"


def _ports(obj: dict[str, Any], _now: datetime) -> str:
    ports = (obj.get("spec") or {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def _path(*parts: str) -> Callable[[dict[str, Any], datetime], Any]:
    def get(obj: dict[str, Any], _now: datetime) -> Any:
        current: Any = obj
        for part in parts:
            current = current.get(part) if isinstance(current, dict) else None
        return "<none>" if current in (None, "") else current

    return get


def _event_object(obj: dict[str, Any], _now: datetime) -> str:
    involved = obj.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


AGE: Column = ("Age", "string", "", 0, _age)
NAME: Column = ("Name", "string", "name", 0, _name)
BUILTIN: dict[tuple[str, str], list[Column]] = {
    ("", "Pod"): [NAME, ("Ready", "string", "", 0, _pod_ready), ("Status", "string", "", 0, _pod_status),
                  ("Restarts", "string", "", 0, _pod_restarts), AGE,
                  ("IP", "string", "", 1, _path("status", "podIP")),
                  ("Node", "string", "", 1, _path("spec", "nodeName")),
                  ("Nominated Node", "string", "", 1, _path("status", "nominatedNodeName"))],
    ("batch", "Job"): [NAME, ("Status", "string", "", 0, _job_status),
                       ("Completions", "string", "", 0, _job_completions),
                       ("Duration", "string", "", 0, _job_duration), AGE,
                       ("Containers", "string", "", 1, _containers), ("Images", "string", "", 1, _images),
                       ("Selector", "string", "", 1, _selector)],
    ("apps", "Deployment"): [NAME, ("Ready", "string", "", 0, _deploy_ready),
                             ("Up-to-date", "integer", "", 0, _count("status.updatedReplicas")),
                             ("Available", "integer", "", 0, _count("status.availableReplicas")), AGE,
                             ("Containers", "string", "", 1, _containers), ("Images", "string", "", 1, _images),
                             ("Selector", "string", "", 1, _selector)],
    ("", "Namespace"): [NAME, ("Status", "string", "", 0, _path("status", "phase")), AGE],
    ("", "Node"): [NAME, ("Status", "string", "", 0, _node_status), ("Roles", "string", "", 0, _node_roles), AGE,
                   ("Version", "string", "", 0, _path("status", "nodeInfo", "kubeletVersion"))],
    ("", "Service"): [NAME, ("Type", "string", "", 0, _path("spec", "type")),
                      ("Cluster-IP", "string", "", 0, _path("spec", "clusterIP")),
                      ("External-IP", "string", "", 0, lambda o, n: "<none>"),
                      ("Port(s)", "string", "", 0, _ports), AGE],
    ("", "ConfigMap"): [NAME, ("Data", "integer", "", 0,
                               lambda o, n: len(o.get("data") or {}) + len(o.get("binaryData") or {})), AGE],
    ("", "Secret"): [NAME, ("Type", "string", "", 0, _path("type")),
                     ("Data", "integer", "", 0, lambda o, n: len(o.get("data") or {})), AGE],
    ("", "Event"): [("Last Seen", "string", "", 0,
                     lambda o, n: _since(o.get("lastTimestamp") or o.get("eventTime") or
                                         (o.get("metadata") or {}).get("creationTimestamp"), n)),
                    ("Type", "string", "", 0, _path("type")), ("Reason", "string", "", 0, _path("reason")),
                    ("Object", "string", "", 0, _event_object), ("Message", "string", "", 0, _path("message"))],
}


# -- custom resources --------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\.([A-Za-z0-9_\-$]+)|\[(\d+)\]|\[\*\]|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]")


def jsonpath(obj: Any, path: str) -> list[Any]:
    """Evaluate the JSONPath subset CRD printer columns use; returns every match."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    current = [obj]
    pos = 0
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if m is None:
            return []
        pos = m.end()
        out: list[Any] = []
        for value in current:
            if m.group(1) is not None:
                if isinstance(value, dict) and m.group(1) in value:
                    out.append(value[m.group(1)])
            elif m.group(2) is not None:
                if isinstance(value, list) and int(m.group(2)) < len(value):
                    out.append(value[int(m.group(2))])
            elif m.group(3) is not None:
                if isinstance(value, list):
                    for item in value:
                        field: Any = item
                        for part in m.group(3).split("."):
                            field = field.get(part) if isinstance(field, dict) else None
                        if field is not None and str(field) == m.group(4):
                            out.append(item)
            elif isinstance(value, list):
                out.extend(value)
        current = out
    return current


def _custom_columns(rtype: ResourceType, crd: dict[str, Any] | None) -> list[Column]:
    columns: list[Column] = [NAME]
    version = next((v for v in ((crd or {}).get("spec") or {}).get("versions") or []
                    if v.get("name") == rtype.version), None)
    printer = (version or {}).get("additionalPrinterColumns")
    if not printer:
        return [NAME, AGE]
    for col in printer:
        path = col.get("jsonPath", "")
        kind = col.get("type", "string")

        def value(obj: dict[str, Any], now: datetime, path: str = path, kind: str = kind) -> Any:
            found = jsonpath(obj, path)
            if not found:
                return None
            if kind == "date" and isinstance(found[0], str):
                try:
                    return human_duration((now - parse_time(found[0])).total_seconds())
                except ValueError:
                    return found[0]
            if len(found) == 1:
                return found[0] if not isinstance(found[0], (dict, list)) else json.dumps(found[0])
            return ",".join(str(v) if not isinstance(v, (dict, list)) else json.dumps(v) for v in found)

        columns.append((col.get("name", ""), "string" if kind == "date" else kind, col.get("format", ""),
                        int(col.get("priority", 0)), value))
    return columns


def columns_for(rtype: ResourceType, crd: dict[str, Any] | None) -> list[Column]:
    if rtype.custom:
        return _custom_columns(rtype, crd)
    return BUILTIN.get(rtype.group_kind, [NAME, AGE])


def table(rtype: ResourceType, items: list[dict[str, Any]], now: datetime, columns: list[Column],
          include_object: str | None, list_meta: dict[str, Any] | None = None) -> dict[str, Any]:
    definitions = [{"name": name, "type": kind, "format": fmt, "description": name, "priority": priority}
                   for name, kind, fmt, priority, _ in columns]
    rows = []
    for obj in items:
        cells = []
        for _, _, _, _, fn in columns:
            try:
                cells.append(fn(obj, now))
            except (KeyError, TypeError, ValueError, AttributeError):
                cells.append(None)
        row: dict[str, Any] = {"cells": cells}
        mode = (include_object or "Metadata").lower()
        if mode == "object":
            row["object"] = obj
        elif mode != "none":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj.get("metadata") or {}}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta or {},
            "columnDefinitions": definitions, "rows": rows}
