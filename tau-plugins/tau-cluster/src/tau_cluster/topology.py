"""``tau cluster validate topology``: each ready workload profile against the queue objects and GPU nodes.

Read-only and fail closed: the profile set must be current and ready (the rules of ``profiles export``),
and the run aborts when the TauCluster's profile revision changes while it checks.
"""

from __future__ import annotations

from typing import Any

import attrs

from tau_cluster.profiles import SINGLETON, ready_profiles
from tau_core.errors import NotFoundError, TauError
from tau_core.kube import KubeSession, api_path

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
IB_SIZES = {"Standard_ND96isr_H200_v5": "H200", "Standard_ND96isr_H100_v5": "H100",
            "Standard_ND96amsr_A100_v4": "A100", "Standard_ND96isr_GB200_v6": "GB200"}


@attrs.define
class Lines:
    items: list[tuple[str, str, str]] = attrs.Factory(list)

    def add(self, level: str, label: str, message: str) -> None:
        self.items.append((level, label, message))

    def count(self, level: str) -> int:
        return sum(1 for item in self.items if item[0] == level)


def _quota(cq: dict[str, Any], flavor: str, resource: str) -> int:
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for f in group.get("flavors") or []:
            if f.get("name") == flavor:
                for r in f.get("resources") or []:
                    if r.get("name") == resource:
                        try:
                            return int(str(r.get("nominalQuota", "0")))
                        except ValueError:
                            return 0
    return 0


def _flavors(cq: dict[str, Any]) -> list[str]:
    return [f["name"] for g in (cq.get("spec") or {}).get("resourceGroups") or [] for f in g.get("flavors") or []]


class TopologyCheck:
    def __init__(self, session: KubeSession) -> None:
        self.s = session

    async def exists(self, lines: Lines, label: str, path: str) -> dict[str, Any] | None:
        obj = await self.s.get(path, missing_ok=True)
        lines.add("ok" if obj else "error", label, "exists" if obj else "not found")
        return obj

    async def profile(self, profile: dict[str, Any]) -> Lines:
        lines = Lines()
        queues = profile.get("localQueues") or [
            {"namespace": ns, "name": profile["defaultLocalQueue"]}
            for ns in (profile.get("applicability") or {}).get("namespaces") or []]
        cq_names = set(profile.get("clusterQueues") or [])
        for lq in queues:
            obj = await self.exists(lines, f"localqueue {lq['namespace']}/{lq['name']}",
                                    api_path(KUEUE, "localqueues", namespace=lq["namespace"], name=lq["name"]))
            if obj and not profile.get("clusterQueues"):
                cq_names.add(str((obj.get("spec") or {}).get("clusterQueue", "")))
        cqs = []
        for name in sorted(n for n in cq_names if n):
            cq = await self.exists(lines, f"clusterqueue {name}", api_path(KUEUE, "clusterqueues", name=name))
            cqs += [cq] if cq else []
        for name in profile.get("topologies") or []:
            await self.exists(lines, f"topology {name}", api_path(KUEUE, "topologies", name=name))
        prio = profile.get("priorities") or {}
        if not prio.get("disableDefaultPriorities"):
            await self.exists(lines, f"workloadpriorityclass {prio.get('workloadPriorityClassName')}",
                              api_path(KUEUE, "workloadpriorityclasses", name=prio.get("workloadPriorityClassName")))
            await self.exists(lines, f"priorityclass {prio.get('podPriorityClassName')}",
                              api_path("scheduling.k8s.io/v1", "priorityclasses",
                                       name=prio.get("podPriorityClassName")))
        await self.gpu_contract(lines, profile, cqs)
        return lines

    async def gpu_contract(self, lines: Lines, profile: dict[str, Any], cqs: list[dict[str, Any]]) -> None:
        in_queues = {f for cq in cqs for f in _flavors(cq)}
        declared = list(profile.get("resourceFlavors") or sorted(in_queues))
        stray = [f for f in declared if f not in in_queues]
        if not cqs or not declared or stray:
            detail = f"flavors {', '.join(stray)} are not in the resolved ClusterQueues" if stray else \
                "no ClusterQueue or flavor was resolved"
            lines.add("error", "gpu-contract", detail)
            return
        gpus = int(profile.get("gpusPerWorker") or 0)
        gpu_flavors = [f for f in declared if any(_quota(cq, f, GPU) > 0 for cq in cqs)]
        if gpus > 0 and not gpu_flavors:
            lines.add("error", "gpu-contract", f"the profile asks for {gpus} GPU(s) per worker but no resolved "
                                               "flavor has GPU quota")
            return
        lines.add("ok", "gpu-contract", f"{len(gpu_flavors)} GPU flavor(s) of {len(declared)} resolved")
        if gpus > 0:
            nodes = await self.s.list_items(api_path("v1", "nodes"))
            for flavor in gpu_flavors:
                await self.flavor_nodes(lines, flavor, gpus, nodes)

    async def flavor_nodes(self, lines: Lines, flavor: str, gpus: int, nodes: list[dict[str, Any]]) -> None:
        rf = await self.s.get(api_path(KUEUE, "resourceflavors", name=flavor), missing_ok=True)
        wanted = ((rf or {}).get("spec") or {}).get("nodeLabels") or {}
        matched = [n for n in nodes if all((n["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())
                   and int(str(((n.get("status") or {}).get("allocatable") or {}).get(GPU, "0")) or 0) > 0]
        if not matched:
            lines.add("warn", f"node-match {flavor}", "no GPU node matches the flavor now (pool scaled to zero?)")
            return
        lines.add("ok", f"node-match {flavor}", f"{len(matched)} GPU node(s)")
        most = max(int(str(n["status"]["allocatable"][GPU])) for n in matched)
        lines.add("ok" if most >= gpus else "error", f"gpu-allocatable {flavor}",
                  f"largest node offers {most} GPU(s); the profile needs {gpus} per worker")
        zoneless = [n["metadata"]["name"] for n in matched
                    if "topology.kubernetes.io/zone" not in (n["metadata"].get("labels") or {})]
        lines.add("warn" if zoneless else "ok", f"topology-zone {flavor}",
                  f"no zone label on {', '.join(zoneless)}" if zoneless else "every node has a zone label")
        ib = [n for n in matched if (n["metadata"].get("labels") or {}).get("node.kubernetes.io/instance-type")
              in IB_SIZES]
        if ib:
            unready = [n["metadata"]["name"] for n in ib if not _node_ready(n)]
            lines.add("warn" if unready else "ok", f"ib-capable {flavor}",
                      f"InfiniBand nodes not Ready: {', '.join(unready)}" if unready else
                      f"{len(ib)} InfiniBand-capable node(s) Ready")


def _node_ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


async def validate(session: KubeSession, only: str | None) -> tuple[list[str], Lines]:
    """The printed lines and the tally; raises when the profile set changes during the run."""
    path = api_path("tau.azure.com/v1alpha1", "clusters", name=SINGLETON)
    tc = await session.get(path, missing_ok=True)
    if tc is None:
        raise NotFoundError(f"TauCluster singleton {SINGLETON!r} was not found")
    generation, set_hash, profiles = ready_profiles(tc)
    if only:
        profiles = [p for p in profiles if p.get("name") == only]
        if not profiles:
            raise NotFoundError(f"workload profile {only!r} is not in the ready profile set of TauCluster "
                                f"{SINGLETON!r}")
    out = [f"cluster: {session.context}", f"taucluster generation: {generation}", f"profile set hash: {set_hash}"]
    total = Lines()
    checker = TopologyCheck(session)
    for profile in profiles:
        lines = await checker.profile(profile)
        out.append(f"profile: {profile['name']}")
        out += [f"  {level} {label}: {message}" for level, label, message in lines.items]
        total.items += lines.items
    again = await session.get(path, missing_ok=True) or {}
    now = (again.get("metadata") or {}).get("generation"), ((again.get("status") or {}).get("workloadProfiles")
                                                             or {}).get("profileSetHash")
    if now != (generation, set_hash):
        raise TauError(f"TauCluster workload profile revision changed during topology validation (generation "
                       f"{generation} -> {now[0]}); retry")
    out.append(f"summary: {total.count('ok')} passed, {total.count('warn')} warnings, {total.count('error')} errors")
    return out, total
