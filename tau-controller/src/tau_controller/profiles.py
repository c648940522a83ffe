"""TauCluster step 3: workload profiles resolved into status, with per-profile conditions and the set hash.

The hash is ``tau_core.config.profiles.profile_set_hash`` — the function the CLI's fail-closed reader checks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tau_controller.api import (
    ADMISSION_CHECK,
    CLUSTER_QUEUE,
    LOCAL_QUEUE,
    PRIORITY_CLASS,
    RESOURCE_FLAVOR,
    TOPOLOGY,
    WORKLOAD_PRIORITY_CLASS,
    Kind,
)
from tau_controller.conditions import FALSE, TRUE, UNKNOWN, cond, find
from tau_controller.context import Ctx
from tau_core.config.catalog import ACCEPTED_PROFILE_PLACEMENTS, MULTI_WORKER_PLACEMENTS
from tau_core.config.profiles import EXECUTION_TARGETS, profile_set_hash

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
SUB_CONDITIONS = ("LocalQueuesResolved", "ClusterQueuesReady", "ExecutionReady", "ResourceFlavorsReady",
                  "TopologiesReady", "PriorityClassesReady")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _norm(value: Any) -> str:
    return "-".join(str(value).strip().lower().replace("_", " ").split())


def normalize(profile: Mapping[str, Any]) -> dict[str, Any]:
    """The normalized intent: trimmed, lower-cased, ``_``/spaces to ``-``, lists sorted, defaults filled."""
    app = profile.get("applicability") or {}
    pri = profile.get("priorities") or {}
    priorities: dict[str, Any] = {"disableDefaultPriorities": bool(pri.get("disableDefaultPriorities", False))}
    for key in ("workloadPriorityClassName", "podPriorityClassName"):
        if pri.get(key):
            priorities[key] = _norm(pri[key])
    out: dict[str, Any] = {
        "name": _norm(profile.get("name", "")).strip("."),
        "applicability": {k: sorted(_norm(v) for v in app.get(k) or []) for k in ("teams", "lanes", "namespaces")},
        "gpusPerWorker": int(profile.get("gpusPerWorker") or 0),
        "workerCount": int(profile.get("workerCount") or 0),
        "mode": _norm(profile.get("mode", "")),
        "placement": _norm(profile.get("placement", "")),
        "defaultLocalQueue": _norm(profile.get("defaultLocalQueue", "")),
        "executionTarget": str(profile.get("executionTarget") or "singleCluster").strip(),
        "priorities": priorities,
    }
    if profile.get("description"):
        out["description"] = str(profile["description"]).strip()
    return out


def validate(p: Mapping[str, Any]) -> list[str]:
    errors = []
    for what, value in (("name", p["name"]), ("defaultLocalQueue", p["defaultLocalQueue"]),
                        *(("applicability.namespaces", n) for n in p["applicability"]["namespaces"])):
        if not value or len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
            errors.append(f"{what} {value!r} is not a DNS-1123 subdomain")
    for key in ("teams", "lanes"):
        values = p["applicability"][key]
        if len(set(values)) != len(values) or any(not v or not _LABEL_VALUE.match(v) for v in values):
            errors.append(f"applicability.{key} has empty, duplicate or invalid entries")
    if p["placement"] not in ACCEPTED_PROFILE_PLACEMENTS:
        errors.append(f"placement {p['placement']!r} is not one of " + ", ".join(ACCEPTED_PROFILE_PLACEMENTS))
    elif p["workerCount"] > 1 and p["placement"] not in MULTI_WORKER_PLACEMENTS:
        errors.append(f"workerCount > 1 (got {p['workerCount']}) requires placement=multi-node-nccl")
    if p["executionTarget"] not in EXECUTION_TARGETS:
        errors.append(f'executionTarget must be "singleCluster" or "multiKueue", got {p["executionTarget"]!r}')
    pri = p["priorities"]
    named = [k for k in ("workloadPriorityClassName", "podPriorityClassName") if pri.get(k)]
    if pri["disableDefaultPriorities"] and named:
        errors.append("disableDefaultPriorities cannot be combined with priority class names")
    if not pri["disableDefaultPriorities"] and len(named) != 2:
        errors.append("workload and pod priority class names are required unless disableDefaultPriorities is true")
    return errors


class Reader:
    """Reads memoized for one reconcile (many profiles share queues and flavors)."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self._seen: dict[tuple[str, str, str], dict[str, Any] | None] = {}

    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any] | None:
        key = (kind.plural, namespace or "", name)
        if key not in self._seen:
            self._seen[key] = await self.ctx.client.get(kind, namespace, name)
        return self._seen[key]


def _admission_checks(cq: Mapping[str, Any]) -> tuple[list[str], str | None]:
    spec = cq.get("spec") or {}
    legacy = list(spec.get("admissionChecks") or [])
    strategy = [c.get("name") for c in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []]
    if legacy and strategy:
        return [], f"ClusterQueue {cq['metadata']['name']!r} sets both admissionChecks and admissionChecksStrategy"
    return [str(n) for n in legacy or strategy], None


async def resolve(reader: Reader, profile: Mapping[str, Any], spec: Mapping[str, Any], generation: int,
                  multikueue: Mapping[str, Any] | None) -> dict[str, Any]:
    """One profile: normalized intent + observed identities + per-profile conditions."""
    p = normalize(profile)
    errors = validate(p)
    ids: dict[str, list[Any]] = {k: [] for k in ("localQueues", "clusterQueues", "resourceFlavors", "topologies",
                                                 "workloadPriorityClasses", "podPriorityClasses")}
    if errors:
        msg = "; ".join(errors)
        conds = [cond(t, UNKNOWN, "ValidationSkipped", "profile validation failed", generation)
                 for t in SUB_CONDITIONS]
        return {**p, **ids, "conditions": [*conds, cond("Ready", FALSE, "InvalidWorkloadProfile", msg, generation)]}
    results = [await _queues(reader, p, spec, ids)]
    results.append(await _clusterqueues(reader, ids))
    results.append(await _execution(reader, p, ids, multikueue))
    results.append(await _flavors(reader, ids))
    results.append(await _topologies(reader, ids))
    results.append(await _priorities(reader, p, ids))
    conds = [cond(t, TRUE if ok else FALSE, reason, msg, generation) for t, (ok, reason, msg) in
             zip(SUB_CONDITIONS, results, strict=True)]
    ready = all(ok for ok, _, _ in results)
    conds.append(cond("Ready", TRUE if ready else FALSE, "WorkloadProfileReady" if ready else
                      "WorkloadProfileNotReady", "profile is resolved and ready" if ready else
                      "; ".join(m for ok, _, m in results if not ok), generation))
    for key in ids:
        if key != "localQueues":
            ids[key] = sorted(set(ids[key]))
    return {**p, **ids, "conditions": conds}


Result = tuple[bool, str, str]


async def _queues(reader: Reader, p: Mapping[str, Any], spec: Mapping[str, Any], ids: dict[str, list[Any]]) -> Result:
    queue = p["defaultLocalQueue"]
    namespaces = list(p["applicability"]["namespaces"])
    if not namespaces:
        shared = (spec.get("queues") or {}).get("sharedLocalQueues") or []
        namespaces = sorted({str(q.get("namespace")) for q in shared if q.get("name") == queue})
        if not namespaces:
            return (False, "LocalQueuesNotResolved", f"profile has global namespace applicability but "
                    f"spec.queues.sharedLocalQueues declares no {queue!r} LocalQueue")
    missing = []
    for ns in namespaces:
        lq = await reader.get(LOCAL_QUEUE, ns, queue)
        cq = str(((lq or {}).get("spec") or {}).get("clusterQueue") or "")
        if not cq:
            missing.append(f"{ns}/{queue}")
            continue
        ids["localQueues"].append({"namespace": ns, "name": queue, "clusterQueue": cq})
        ids["clusterQueues"].append(cq)
    if missing:
        return False, "LocalQueuesNotResolved", "LocalQueues not found or without a ClusterQueue: " + ", ".join(missing)
    return True, "LocalQueuesResolved", f"{len(namespaces)} LocalQueues resolved"


async def _clusterqueues(reader: Reader, ids: dict[str, list[Any]]) -> Result:
    bad = []
    for name in sorted(set(ids["clusterQueues"])):
        cq = await reader.get(CLUSTER_QUEUE, None, name)
        active = find(((cq or {}).get("status") or {}).get("conditions"), "Active")
        if cq is None:
            bad.append(f"ClusterQueue {name!r} not found")
            continue
        if not active or active.get("status") != TRUE:  # Kueue's reason says why (e.g. FlavorNotFound)
            why = f"{active.get('reason')}: {active.get('message')}" if active else "no Active condition yet"
            bad.append(f"ClusterQueue {name!r} is not Active ({why})")
            continue
        for group in (cq.get("spec") or {}).get("resourceGroups") or []:
            ids["resourceFlavors"] += [str(f.get("name")) for f in group.get("flavors") or []]
    if bad:
        return False, "ClusterQueuesNotReady", "; ".join(bad)
    return True, "ClusterQueuesReady", "ClusterQueues are Active"


async def _execution(reader: Reader, p: Mapping[str, Any], ids: dict[str, list[Any]],
                     multikueue: Mapping[str, Any] | None) -> Result:
    kinds: dict[str, bool] = {}
    for name in sorted(set(ids["clusterQueues"])):
        cq = await reader.get(CLUSTER_QUEUE, None, name)
        checks, problem = _admission_checks(cq or {})
        if problem:
            return False, "AdmissionChecksNotReady", problem
        for check in checks:
            ac = await reader.get(ADMISSION_CHECK, None, check)
            if ac is None:
                return False, "AdmissionChecksNotReady", f"AdmissionCheck {check!r} not found"
            kinds[check] = (ac.get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER
    if p["executionTarget"] == "singleCluster":
        if any(kinds.values()):
            return False, "UnexpectedMultiKueueAdmissionCheck", "a singleCluster profile's ClusterQueue uses MultiKueue"
        return True, "Ready", "single-cluster execution"
    if not multikueue or multikueue.get("status") != TRUE:
        reason = (multikueue or {}).get("reason") or "PrerequisitesNotReady"
        return False, str(reason), "MultiKueueReady is not True at the current generation"
    if not kinds or not all(kinds.values()):
        return False, "MultiKueueWiringNotReady", "every ClusterQueue must use only MultiKueue admission checks"
    return True, "Ready", "MultiKueue execution is wired"


async def _flavors(reader: Reader, ids: dict[str, list[Any]]) -> Result:
    missing = []
    for name in sorted(set(ids["resourceFlavors"])):
        flavor = await reader.get(RESOURCE_FLAVOR, None, name)
        if flavor is None:
            missing.append(name)
        elif (flavor.get("spec") or {}).get("topologyName"):
            ids["topologies"].append(str(flavor["spec"]["topologyName"]))
    if missing:
        return False, "ResourceFlavorsNotReady", "ResourceFlavors not found: " + ", ".join(missing)
    return True, "ResourceFlavorsReady", "ResourceFlavors exist"


async def _topologies(reader: Reader, ids: dict[str, list[Any]]) -> Result:
    missing = [n for n in sorted(set(ids["topologies"])) if await reader.get(TOPOLOGY, None, n) is None]
    if missing:
        return False, "TopologiesNotReady", "Topologies not found: " + ", ".join(missing)
    return True, "TopologiesReady", "Topologies exist"


async def _priorities(reader: Reader, p: Mapping[str, Any], ids: dict[str, list[Any]]) -> Result:
    pri = p["priorities"]
    if pri["disableDefaultPriorities"]:
        return True, "PriorityClassesReady", "default priorities are disabled"
    missing = []
    for kind, key, field in ((WORKLOAD_PRIORITY_CLASS, "workloadPriorityClassName", "workloadPriorityClasses"),
                             (PRIORITY_CLASS, "podPriorityClassName", "podPriorityClasses")):
        if await reader.get(kind, None, pri[key]) is None:
            missing.append(f"{kind.kind} {pri[key]!r}")
        else:
            ids[field].append(pri[key])
    if missing:
        return False, "PriorityClassesNotReady", "not found: " + ", ".join(missing)
    return True, "PriorityClassesReady", "priority classes exist"


async def resolve_all(ctx: Ctx, spec: Mapping[str, Any], generation: int,
                      multikueue: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(status.workloadProfiles, WorkloadProfilesReady condition)``."""
    declared = list(spec.get("workloadProfiles") or [])
    reader = Reader(ctx)
    profiles = sorted([await resolve(reader, p, spec, generation, multikueue) for p in declared],
                      key=lambda p: p["name"])
    ready = sum(1 for p in profiles if (find(p["conditions"], "Ready") or {}).get("status") == TRUE)
    out: dict[str, Any] = {"observedGeneration": generation, "observed": len(profiles), "ready": ready,
                           "drifted": len(profiles) - ready, "profiles": profiles}
    try:
        out["profileSetHash"] = profile_set_hash(list[Mapping[str, Any]](profiles))
    except (TypeError, ValueError):
        pass
    if not profiles:
        condition = cond("WorkloadProfilesReady", TRUE, "NoWorkloadProfiles", "no workload profiles are declared")
    elif ready == len(profiles):
        condition = cond("WorkloadProfilesReady", TRUE, "WorkloadProfilesReady",
                         f"{ready} workload profiles resolved successfully")
    else:
        condition = cond("WorkloadProfilesReady", FALSE, "WorkloadProfilesNotReady",
                         f"{len(profiles) - ready} of {len(profiles)} workload profiles are not ready")
    return out, condition
