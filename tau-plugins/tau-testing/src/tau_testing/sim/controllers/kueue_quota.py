"""Kueue stand-in, the quota math: which ClusterQueue a Workload queues in, usage per flavor and resource, flavor
fit, and assigning flavors to pod sets."""

from __future__ import annotations

from typing import Any

from tau_testing.sim.controllers import _util as u
from tau_testing.sim.controllers.kueue_model import _podset_requests
from tau_testing.sim.controllers.scheduler import tolerates


def _reserved_at(wl: dict[str, Any]) -> str:
    cond = u.find_condition(wl, "QuotaReserved") or {}
    return cond.get("lastTransitionTime") or ""


def _add_usage(usage: dict[tuple[str, str], int], wl: dict[str, Any], sign: int) -> None:
    for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
        for res, flavor in (psa.get("flavors") or {}).items():
            amount = u.milli((psa.get("resourceUsage") or {}).get(res, 0))
            usage[(flavor, res)] = usage.get((flavor, res), 0) + sign * amount


def _flavor_usage(cq: dict[str, Any], workloads: list[dict[str, Any]], *,
                  borrowed: bool = True) -> list[dict[str, Any]]:
    usage: dict[tuple[str, str], int] = {}
    for wl in workloads:
        _add_usage(usage, wl, +1)
    out = []
    for rg in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in rg.get("flavors") or []:
            resources = []
            for res in flavor.get("resources") or []:
                total = usage.get((flavor["name"], res["name"]), 0)
                entry = {"name": res["name"], "total": u.format_quantity(res["name"], total)}
                if borrowed:  # ClusterQueues report borrowing; LocalQueues have no such field
                    entry["borrowed"] = "0"
                resources.append(entry)
            out.append({"name": flavor["name"], "resources": resources})
    return out


def _flavor_mismatch(flavor_name: str, flavor: dict[str, Any], pod_spec: dict[str, Any]) -> str | None:
    spec = flavor.get("spec") or {}
    tolerations = list(pod_spec.get("tolerations") or []) + list(spec.get("tolerations") or [])
    for taint in spec.get("nodeTaints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            # Go's %v of a corev1.Taint value
            return (f"untolerated taint {{{taint.get('key')} {taint.get('value') or ''} {taint.get('effect')} "
                    f"<nil>}} in flavor {flavor_name}")
    node_labels = spec.get("nodeLabels") or {}
    selector = pod_spec.get("nodeSelector") or {}
    for k, v in node_labels.items():
        if k in selector and selector[k] != v:
            return f"flavor {flavor_name} doesn't match node affinity"
    required = ((((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution")) or {})
    terms = required.get("nodeSelectorTerms") or []
    if terms and node_labels:
        def term_ok(term: dict[str, Any]) -> bool:
            for expr in term.get("matchExpressions") or []:
                k = expr.get("key")
                if k not in node_labels:
                    continue
                op, values = expr.get("operator"), expr.get("values") or []
                if (op == "In" and node_labels[k] not in values) or (op == "NotIn" and node_labels[k] in values) \
                        or op == "DoesNotExist":
                    return False
            return True

        if not any(term_ok(t) for t in terms):
            return f"flavor {flavor_name} doesn't match node affinity"
    return None


def _assign(cq: dict[str, Any], flavors: dict[str, Any], wl: dict[str, Any],
            usage: dict[tuple[str, str], int]) -> tuple[list[dict[str, Any]] | None, str]:
    """Flavor assignment for every pod set, or ``None`` and Kueue's reason."""
    groups = (cq.get("spec") or {}).get("resourceGroups") or []
    covers = {}
    for index, rg in enumerate(groups):
        for res in rg.get("coveredResources") or []:
            covers[res] = index
    assumed = dict(usage)
    assignments = []
    for podset in (wl.get("spec") or {}).get("podSets") or []:
        ps_name = podset.get("name", "main")
        count = int(podset.get("count", 1))
        requests = _podset_requests(podset)
        if "pods" in covers:
            requests["pods"] = count * 1000
        pod_spec = ((podset.get("template") or {}).get("spec")) or {}
        reasons: list[str] = []
        chosen: dict[str, str] = {}
        for res in sorted(requests):
            if res not in covers:
                return None, f"couldn't assign flavors to pod set {ps_name}: resource {res} unavailable in " \
                             f"ClusterQueue"
        by_group: dict[int, list[str]] = {}
        for res in sorted(requests):
            by_group.setdefault(covers[res], []).append(res)
        for index in sorted(by_group):
            wanted = by_group[index]
            found = None
            for flavor in groups[index].get("flavors") or []:
                fname = flavor.get("name")
                fobj = flavors.get(fname)
                if fobj is None:
                    reasons.append(f"flavor {fname} not found")
                    continue
                mismatch = _flavor_mismatch(fname, fobj, pod_spec)
                if mismatch:
                    reasons.append(mismatch)
                    continue
                quotas = {r["name"]: u.milli(r.get("nominalQuota", 0)) for r in flavor.get("resources") or []}
                fits = True
                for res in wanted:
                    need = requests[res]
                    quota = quotas.get(res, 0)
                    in_use = assumed.get((fname, res), 0)
                    earlier = assumed.get((fname, res), 0) - usage.get((fname, res), 0)  # this workload's
                    if earlier + need > quota:
                        cap = u.format_quantity(res, quota)
                        if earlier:
                            reasons.append(
                                f"insufficient quota for {res} in flavor {fname}, previously considered podsets "
                                f"requests ({u.format_quantity(res, earlier)}) + current podset request "
                                f"({u.format_quantity(res, need)}) > maximum capacity ({cap})")
                        else:
                            reasons.append(f"insufficient quota for {res} in flavor {fname}, request > maximum "
                                           f"capacity ({u.format_quantity(res, need)} > {cap})")
                        fits = False
                    elif in_use + need > quota:
                        more = in_use + need - quota
                        reasons.append(f"insufficient unused quota for {res} in flavor {fname}, "
                                       f"{u.format_quantity(res, more)} more needed")
                        fits = False
                if fits:
                    found = fname
                    break
            if found is None:
                return None, f"couldn't assign flavors to pod set {ps_name}: {', '.join(reasons)}"
            for res in wanted:
                chosen[res] = found
        for res, fname in chosen.items():
            assumed[(fname, res)] = assumed.get((fname, res), 0) + requests[res]
        assignments.append({
            "name": ps_name,
            "flavors": dict(sorted(chosen.items())),
            "resourceUsage": {res: u.format_quantity(res, amount) for res, amount in sorted(requests.items())},
            "count": count,
        })
    return assignments, ""


def _queue_for(wl: dict[str, Any], lqs: dict[Any, dict[str, Any]], cqs: dict[str, dict[str, Any]],
               namespaces: dict[str, dict[str, Any]], flavors: dict[str, Any]) -> tuple[str, str | None]:
    """The ClusterQueue a pending Workload queues in, and why it cannot be admitted there (None: it can)."""
    cq_name = ""
    ns = wl["metadata"]["namespace"]
    lq_name = wl["spec"].get("queueName", "")
    lq = lqs.get((ns, lq_name))
    if lq is None:
        return cq_name, f"LocalQueue {lq_name} is terminating or missing"
    if (lq.get("spec") or {}).get("stopPolicy", "None") not in (None, "None"):
        return cq_name, f"LocalQueue {lq_name} is stopped"
    cq_name = (lq.get("spec") or {}).get("clusterQueue", "")
    cq = cqs.get(cq_name)
    if cq is None:
        return cq_name, f"ClusterQueue {cq_name} is terminating or missing"
    if (cq.get("spec") or {}).get("stopPolicy", "None") not in (None, "None"):
        return cq_name, f"ClusterQueue {cq_name} is stopped"
    ns_labels = u.labels(namespaces.get(ns, {"metadata": {}}))
    if not u.selector_matches((cq.get("spec") or {}).get("namespaceSelector"), ns_labels,
                              nil_matches=False):
        return cq_name, "Workload namespace doesn't match ClusterQueue selector"
    missing = [f["name"] for rg in (cq.get("spec") or {}).get("resourceGroups") or []
               for f in rg.get("flavors") or [] if f.get("name") not in flavors]
    if missing:
        return cq_name, f"ClusterQueue {cq_name} is inactive"
    return cq_name, None
