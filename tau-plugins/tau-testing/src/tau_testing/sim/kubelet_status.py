"""Pod status from the process kubelet's processes (phase, conditions, container states), and the helpers
it needs: the ``Created``/``Started`` events and the resident memory of a process group."""

from __future__ import annotations

import copy
import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau_testing.sim.controllers import _util as u
from tau_testing.sim.controllers import events
from tau_testing.sim.controllers.pod_timeline import _order_conditions
from tau_testing.sim.controllers.scheduler import node_ip

if TYPE_CHECKING:
    from tau_testing.sim.kubelet_process import PodRun, Proc

COMPONENT = "kubelet"


def terminated_state(proc: Proc) -> dict[str, Any]:
    state: dict[str, Any] = {"exitCode": proc.exit_code, "reason": proc.reason,
                             "startedAt": u.ts(proc.started) if proc.started else None,
                             "finishedAt": u.ts(proc.finished or proc.started) if proc.started else None,
                             "containerID": _container_id(proc)}
    if proc.message:
        state["message"] = proc.message
    return state


def _container_id(proc: Proc) -> str:
    pid = proc.popen.pid if proc.popen is not None else 0
    return f"process://{pid}"


def _container_status(spec: dict[str, Any], proc: Proc | None, waiting: str) -> dict[str, Any]:
    st: dict[str, Any] = {"name": spec["name"], "image": spec.get("image", ""), "imageID": "",
                          "ready": False, "restartCount": 0, "started": False, "lastState": {}}
    if proc is None:
        st["state"] = {"waiting": {"reason": waiting}}
        return st
    st["containerID"] = _container_id(proc)
    st["restartCount"] = proc.restarts
    if proc.last:
        st["lastState"] = {"terminated": proc.last}
    if proc.done.is_set():
        st["state"] = {"terminated": terminated_state(proc)}
    else:
        st["state"] = {"running": {"startedAt": u.ts(proc.started or datetime.now())}}
        st["ready"] = st["started"] = True
    return st


def _phase(run: PodRun) -> str:
    procs = run.procs
    for init in run.inits:
        proc = procs.get(init)
        if init in run.sidecars:  # a native sidecar: started is enough, and it never decides the phase
            if proc is None:
                return "Pending"
            continue
        if proc is None or not proc.done.is_set():
            return "Pending"
        if proc.exit_code != 0:
            return "Failed" if run.restart_policy == "Never" else "Pending"
    mains = [procs.get(m) for m in run.mains]
    if any(p is None or not p.done.is_set() for p in mains) or run.restart_policy == "Always":
        return "Running" if any(p is not None for p in mains) else "Pending"
    codes = [p.exit_code for p in mains if p is not None]
    if all(c == 0 for c in codes):
        return "Succeeded"
    return "Failed" if run.restart_policy == "Never" else "Running"


def status_of(cluster: Any, pod: dict[str, Any], run: PodRun, node: dict[str, Any] | None,
              now: datetime) -> dict[str, Any]:
    """The pod's status as its processes stand at ``now``."""
    status: dict[str, Any] = copy.deepcopy(pod.get("status") or {})
    spec = pod.get("spec") or {}
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    status.setdefault("startTime", u.ts(now))
    if node is not None:
        status["hostIP"] = node_ip(node)
        status["hostIPs"] = [{"ip": status["hostIP"]}]
    ip = "127.0.0.1"
    status["podIP"], status["podIPs"] = ip, [{"ip": ip}]
    phase = _phase(run)
    status["phase"] = phase
    inits = spec.get("initContainers") or []
    inits_done = all(run.procs.get(c["name"]) is not None
                     and (c["name"] in run.sidecars or run.procs[c["name"]].exit_code == 0) for c in inits)
    if inits:
        status["initContainerStatuses"] = [_container_status(c, run.procs.get(c["name"]), "PodInitializing")
                                           for c in inits]
    status["containerStatuses"] = [
        _container_status(c, run.procs.get(c["name"]), "ContainerCreating" if inits_done else "PodInitializing")
        for c in spec.get("containers") or []]
    u.set_condition(conditions, "PodReadyToStartContainers", "True", "", "", now, probe_times=True)
    u.set_condition(conditions, "Initialized", "True" if inits_done else "False",
                    "" if inits_done else "ContainersNotInitialized", "", now, probe_times=True)
    ready = all(st.get("ready") for st in status["containerStatuses"])
    if ready and phase == "Running":
        reason, message = "", ""
    elif phase == "Succeeded":
        reason, message = "PodCompleted", ""
    elif phase == "Failed":
        reason, message = "PodFailed", ""
    else:
        unready = [st["name"] for st in status["containerStatuses"] if not st.get("ready")]
        reason, message = "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]"
    for ctype in ("ContainersReady", "Ready"):
        u.set_condition(conditions, ctype, "True" if ready and phase == "Running" else "False", reason, message,
                        now, probe_times=True)
    _order_conditions(conditions)
    return status


def record_starts(cluster: Any, pod: dict[str, Any], run: PodRun) -> bool:
    """``Created`` and ``Started`` events, once per container start."""
    wrote = False
    node = (pod.get("spec") or {}).get("nodeName")
    for name, proc in run.procs.items():
        if name in run.announced or proc.popen is None:
            continue
        run.announced.add(name)
        path = f"spec.{'initContainers' if name in run.inits else 'containers'}{{{name}}}"
        events.record(cluster, pod, "Created", f"Created container: {name}", component=COMPONENT, host=node,
                      field_path=path)
        events.record(cluster, pod, "Started", f"Started container {name}", component=COMPONENT, host=node,
                      field_path=path)
        wrote = True
    return wrote


def group_rss(leaders: set[int]) -> dict[int, int]:
    """Resident bytes of every process group led by one of ``leaders`` (its processes summed, from /proc)."""
    page = os.sysconf("SC_PAGE_SIZE")
    usage: dict[int, int] = dict.fromkeys(leaders, 0)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            pgrp = int(stat[stat.rindex(")") + 2:].split()[2])
            if pgrp not in usage:
                continue
            resident = int((entry / "statm").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            continue
        usage[pgrp] += resident * page
    return usage
