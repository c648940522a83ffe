"""A kubelet stand-in: drives every bound pod through its ``PodScript`` (see ``tau_testing.sim.scripts``).

The pod's status is a pure function of its script, the time it was bound, and the clock, so a single
``advance(30)`` lands on the same status (with the same container timestamps) as thirty one-second steps.
Events (Pulling, Pulled, Failed, BackOff, Created, Started, Killing, Evicted, Preempted) are recorded once
each, stamped with the simulated moment they happened; log lines are appended to the cluster's LogBook with
their own timestamps as the container runs.

Simplifications (said plainly): one image pull covers all of a pod's images (one Pulling/Pulled pair per
distinct image), a pull failure hits the first container to start, ``exit_code``/``oom`` apply to the main
container (the one named ``main``, else the first) while the others exit 0 with it, and graceful termination
periods are not simulated (a deleted pod is gone at once).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tau_testing.sim.controllers import _util as u
from tau_testing.sim.controllers import events
from tau_testing.sim.controllers.pod_timeline import (
    CRASH_BACKOFF_MAX,
    CRASH_BACKOFF_START,
    PREEMPT_MESSAGE,
    PULL_BACKOFF_SECONDS,
    PodTimeline,
    TimelineResult,
    _order_conditions,
    main_container,
)
from tau_testing.sim.scripts import PodScript, scripts_of

__all__ = ["COMPONENT", "CRASH_BACKOFF_MAX", "CRASH_BACKOFF_START", "PREEMPT_MESSAGE", "PULL_BACKOFF_SECONDS",
           "Kubelet", "evict_pod", "kill_pod", "main_container"]

COMPONENT = "kubelet"


@dataclass
class _PodMemory:
    namespace: str
    name: str
    containers: list[str]
    anchor: datetime
    emitted: set[str] = field(default_factory=set)
    log_counts: dict[tuple[str, int], int] = field(default_factory=dict)
    restarted: dict[str, int] = field(default_factory=dict)
    terminated_logs: set[str] = field(default_factory=set)
    marks: list[datetime] = field(default_factory=list)
    restored_at: datetime | None = None  # a new kubelet took over a running pod: earlier output already exists


class Kubelet:
    """Runs pods on every node; toggle with ``.enabled``."""

    def __init__(self) -> None:
        self.enabled = True
        self._pods: dict[str, _PodMemory] = {}
        self._created_text = "Created container {}"

    # ------------------------------------------------------------------------------------------ reconcile

    def reconcile(self, cluster: Any) -> bool:
        # the kubelet says "Created container: main" since Kubernetes 1.32, "Created container main" before
        self._created_text = "Created container: {}" if _version(cluster) >= (1, 32) else "Created container {}"
        changed = False
        seen: set[str] = set()
        nodes = {n["metadata"]["name"]: n for n in u.list_objects(cluster, "v1", "Node")}
        runtime = getattr(cluster, "process_kubelet", None)  # tau_testing.sim.kubelet_process, when switched on
        alive: set[str] = set()
        # terminal pods need nothing more: their logs were closed when they ended (or when they vanish below)
        for pod in u.list_objects(cluster, "v1", "Pod", field_selector=u.NOT_TERMINAL):
            uid = pod["metadata"]["uid"]
            seen.add(uid)
            node_name = (pod.get("spec") or {}).get("nodeName")
            if not node_name or u.is_deleting(pod):
                continue
            if runtime is not None and runtime.claims_pod(pod):
                alive.add(uid)
                changed |= runtime.sync(cluster, pod, nodes.get(node_name))
                continue
            changed |= self._sync_pod(cluster, pod, nodes.get(node_name))
        if runtime is not None:
            runtime.reap(alive)
        for uid in sorted(set(self._pods) - seen):
            memory = self._pods.pop(uid)
            logs = getattr(cluster, "logs", None)
            if logs is not None:
                for container in memory.containers:
                    if container not in memory.terminated_logs:
                        logs.mark_terminated(memory.namespace, memory.name, container)
        return changed

    def next_wakeup(self, cluster: Any) -> datetime | None:
        """The next moment a pod's script changes something (lets ``advance`` stop there)."""
        current = u.now(cluster)
        upcoming = [m for memory in self._pods.values() for m in memory.marks if m > current]
        return min(upcoming) if upcoming else None

    def _memory(self, cluster: Any, pod: dict[str, Any]) -> _PodMemory:
        uid = pod["metadata"]["uid"]
        memory = self._pods.get(uid)
        if memory is None:
            anchor = None
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
                    anchor = u.parse_ts(cond.get("lastTransitionTime"))
            spec = pod.get("spec") or {}
            names = [c["name"] for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
            ns, name = u.key(pod)
            memory = _PodMemory(ns, name, names, anchor or u.now(cluster))
            started = (pod.get("status") or {}).get("startTime")
            if started:  # the kubelet restarted: keep the original timeline, do not repeat its output
                memory.anchor = u.parse_ts(started) or memory.anchor
                memory.restored_at = u.now(cluster)
            self._pods[uid] = memory
        return memory

    # ------------------------------------------------------------------------------------------ one pod

    def _sync_pod(self, cluster: Any, pod: dict[str, Any], node: dict[str, Any] | None) -> bool:
        if u.pod_is_terminal(pod):
            memory = self._pods.get(pod["metadata"]["uid"])
            if memory is not None:
                self._flush_terminated_logs(cluster, memory)
            return False
        memory = self._memory(cluster, pod)
        script = scripts_of(cluster).for_pod(pod)
        current = u.now(cluster)
        status, timeline_events, logs_plan, marks = self._status_at(pod, script, memory, current, node)
        if status.get("phase") in ("Succeeded", "Failed"):
            memory.marks = []
        else:
            memory.marks = sorted({m for m in marks if m > current}
                                  | {e[0] for e in timeline_events if e[0] > current}
                                  | {when for plan in logs_plan for when, _ in plan[3] if when > current})
        changed = u.write_status_if_changed(cluster, pod, status)
        node_name = pod["spec"].get("nodeName")
        for when, ev_key, reason, message, ev_type, field_path in sorted(timeline_events, key=lambda e: e[0]):
            if ev_key in memory.emitted or when > current:
                continue
            if memory.restored_at is not None and when <= memory.restored_at:
                memory.emitted.add(ev_key)
                continue
            memory.emitted.add(ev_key)
            events.record(cluster, pod, reason, message, type=ev_type, component=COMPONENT, host=node_name,
                          field_path=field_path, when=when)
            changed = True
        changed |= self._write_logs(cluster, memory, logs_plan, current)
        if status.get("phase") in ("Succeeded", "Failed"):
            self._flush_terminated_logs(cluster, memory)
        return changed

    def _flush_terminated_logs(self, cluster: Any, memory: _PodMemory) -> None:
        logs = getattr(cluster, "logs", None)
        if logs is None:
            return
        for container in memory.containers:
            if container not in memory.terminated_logs:
                memory.terminated_logs.add(container)
                logs.mark_terminated(memory.namespace, memory.name, container)

    def _write_logs(self, cluster: Any, memory: _PodMemory,
                    plan: list[tuple[str, int, datetime, list[tuple[datetime, str]], datetime | None]],
                    current: datetime) -> bool:
        logs = getattr(cluster, "logs", None)
        if logs is None:
            return False
        wrote = False
        for container, run_index, _start, lines, _end in plan:
            if run_index > 0 and memory.restarted.get(container, 0) < run_index:
                logs.restart(memory.namespace, memory.name, container)
                memory.restarted[container] = run_index
                memory.log_counts[(container, run_index)] = 0
            done = memory.log_counts.get((container, run_index), 0)
            for when, line in lines[done:]:
                if when > current:
                    break
                if memory.restored_at is not None and when <= memory.restored_at:
                    done += 1
                    continue
                logs.append(memory.namespace, memory.name, container, line, ts=when)
                done += 1
                wrote = True
            memory.log_counts[(container, run_index)] = done
        return wrote

    # ------------------------------------------------------------------------------------------ timeline

    def _status_at(self, pod: dict[str, Any], script: PodScript, memory: _PodMemory, current: datetime,
                   node: dict[str, Any] | None) -> TimelineResult:
        return PodTimeline(self._created_text, pod, script, memory.anchor, current, node).compute()


def _version(cluster: Any) -> tuple[int, int]:
    text = str(getattr(cluster, "kubernetes_version", "") or "1.30").lstrip("v")
    try:
        major, minor = text.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return (1, 30)


def kill_pod(cluster: Any, pod: dict[str, Any]) -> bool:
    """Delete a pod the way a controller does; its running containers get a kubelet ``Killing`` event first."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    if node_name and not u.pod_is_terminal(pod):
        for st in (pod.get("status") or {}).get("containerStatuses") or []:
            if "running" in (st.get("state") or {}):
                events.record(cluster, pod, "Killing", f"Stopping container {st['name']}", component=COMPONENT,
                              host=node_name, field_path=f"spec.containers{{{st['name']}}}")
    ns, name = u.key(pod)
    return u.delete(cluster, "v1", "Pod", ns, name)


def evict_pod(cluster: Any, namespace: str, name: str, *, message: str | None = None,
              preempted_by_scheduler: bool = False) -> dict[str, Any]:
    """Evict a bound, running pod now, the way the kubelet does under node pressure (``status.reason:
    Evicted``, phase Failed, ``DisruptionTarget``, ``Evicted`` and ``Killing`` events), or as the scheduler's
    preemption does (``preempted_by_scheduler``: ``DisruptionTarget`` reason ``PreemptionByScheduler`` and a
    ``Preempted`` event). Use it to inject a disruption at any moment instead of scripting ``evict_after``."""
    pod = u.get(cluster, "v1", "Pod", namespace, name)
    if pod is None:
        raise LookupError(f"pod {namespace}/{name} not found")
    if u.pod_is_terminal(pod):
        return pod
    when = u.now(cluster)
    node_name = (pod.get("spec") or {}).get("nodeName")
    status = copy.deepcopy(pod.get("status") or {})
    conditions = status.setdefault("conditions", [])
    status["phase"] = "Failed"
    if preempted_by_scheduler:
        text = message or f"default-scheduler: {PREEMPT_MESSAGE}"
        u.set_condition(conditions, "DisruptionTarget", "True", "PreemptionByScheduler", text, when,
                        probe_times=True)
    else:
        text = message or "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. "
        status["reason"], status["message"] = "Evicted", text
        u.set_condition(conditions, "DisruptionTarget", "True", "TerminationByKubelet", text, when,
                        probe_times=True)
    for ctype in ("ContainersReady", "Ready"):
        u.set_condition(conditions, ctype, "False", "PodFailed", "", when, probe_times=True)
    running = []
    for st in status.get("containerStatuses") or []:
        state = st.get("state") or {}
        if "terminated" in state:
            continue
        started = (state.get("running") or {}).get("startedAt")
        if started:
            running.append(st["name"])
        st["state"] = {"terminated": {"exitCode": 137, "reason": "Error", "startedAt": started or u.ts(when),
                                      "finishedAt": u.ts(when), "containerID": st.get("containerID", "")}}
        st["ready"] = False
        st["started"] = False
    _order_conditions(conditions)
    pod["status"] = status
    stored = u.update_status(cluster, pod)
    if stored is None:
        raise RuntimeError(f"pod {namespace}/{name} changed while being evicted; try again")
    if preempted_by_scheduler:
        preemptor = u.hex_hash("preemptor", pod["metadata"]["uid"], length=32)
        preemptor = f"{preemptor[:8]}-{preemptor[8:12]}-{preemptor[12:16]}-{preemptor[16:20]}-{preemptor[20:]}"
        events.record(cluster, stored, "Preempted", f"Preempted by pod {preemptor} on node {node_name}",
                      component="default-scheduler")
    else:
        events.record(cluster, stored, "Evicted", text, type="Warning", component=COMPONENT, host=node_name)
    for cname in running:
        events.record(cluster, stored, "Killing", f"Stopping container {cname}", component=COMPONENT,
                      host=node_name, field_path=f"spec.containers{{{cname}}}")
    logs = getattr(cluster, "logs", None)
    if logs is not None:
        for c in (pod.get("spec") or {}).get("containers") or []:
            logs.mark_terminated(namespace, name, c["name"])
    return stored
