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
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tau_testing.sim.controllers import _util as u
from tau_testing.sim.controllers import events
from tau_testing.sim.controllers.scheduler import node_ip
from tau_testing.sim.scripts import PodScript, scripts_of

COMPONENT = "kubelet"
PULL_BACKOFF_SECONDS = 10.0
CRASH_BACKOFF_START = 10.0
CRASH_BACKOFF_MAX = 300.0
PREEMPT_MESSAGE = "preempting to accommodate a higher priority pod"


@dataclass
class _Run:
    start: datetime
    end: datetime | None  # None: still running forever
    exit_code: int
    oom: bool


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


def main_container(pod_spec: dict[str, Any]) -> str:
    names = [c["name"] for c in pod_spec.get("containers") or []]
    return "main" if "main" in names else (names[0] if names else "")


def _image_id(image: str) -> str:
    base = image.split("@")[0]
    if ":" in base.rsplit("/", 1)[-1]:
        base = base.rsplit(":", 1)[0]
    if "/" not in base:
        base = f"docker.io/library/{base}"
    return f"{base}@sha256:{u.hex_hash('image', image, length=64)}"


def _image_ref(image: str) -> str:
    name = image
    if "/" not in name.split(":")[0]:
        name = f"docker.io/library/{name}"
    if ":" not in name.rsplit("/", 1)[-1] and "@" not in name:
        name += ":latest"
    return name


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
        # terminal pods need nothing more: their logs were closed when they ended (or when they vanish below)
        for pod in u.list_objects(cluster, "v1", "Pod", field_selector=u.NOT_TERMINAL):
            uid = pod["metadata"]["uid"]
            seen.add(uid)
            node_name = (pod.get("spec") or {}).get("nodeName")
            if not node_name or u.is_deleting(pod):
                continue
            changed |= self._sync_pod(cluster, pod, nodes.get(node_name))
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
                   node: dict[str, Any] | None) -> tuple[dict[str, Any], list[tuple[Any, ...]],
                                                         list[tuple[Any, ...]], list[datetime]]:
        spec = pod["spec"]
        ns, name = u.key(pod)
        uid = pod["metadata"]["uid"]
        t0 = memory.anchor
        marks: list[datetime] = []  # moments when this pod's status changes next (for next_wakeup)
        evs: list[tuple[Any, ...]] = []
        plan: list[tuple[Any, ...]] = []
        status = copy.deepcopy(pod.get("status") or {})
        conditions = status.setdefault("conditions", [])
        status["phase"] = "Pending"
        status["startTime"] = u.ts(t0)
        if node is not None:
            status["hostIP"] = node_ip(node)
            status["hostIPs"] = [{"ip": status["hostIP"]}]
        ip = f"10.244.{(int(u.hex_hash('node', spec.get('nodeName'), length=4), 16) % 250) + 1}." \
             f"{(int(u.hex_hash('ip', uid, length=4), 16) % 250) + 2}"
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
        u.set_condition(conditions, "PodReadyToStartContainers", "True", "", "", t0, probe_times=True)

        init_specs = spec.get("initContainers") or []
        main_specs = spec.get("containers") or []
        regular_inits = [c for c in init_specs if c.get("restartPolicy") != "Always"]
        sidecars = [c for c in init_specs if c.get("restartPolicy") == "Always"]
        main = main_container(spec)
        restart_policy = spec.get("restartPolicy") or "Always"

        # ---- image pull
        images = []
        for c in regular_inits + sidecars + main_specs:
            if c.get("image") and c["image"] not in images:
                images.append(c["image"])
        first = (regular_inits or sidecars or main_specs or [{}])[0]
        first_name = first.get("name", "")
        pull_end = u.plus(t0, script.pull_seconds)
        marks.append(pull_end)
        waiting_reason: dict[str, tuple[str, str]] = {}
        if script.pull_error == "InvalidImageName":
            image = first.get("image", "")
            msg = f'Failed to apply default image tag "{image}": couldn\'t parse image name "{image}": ' \
                  f"invalid reference format"
            evs.append((t0, f"invalid:{first_name}", "Failed", msg, "Warning", f"spec.containers{{{first_name}}}"))
            evs.append((t0, f"invalid-err:{first_name}", "Failed", "Error: InvalidImageName", "Warning",
                        f"spec.containers{{{first_name}}}"))
            waiting_reason[first_name] = ("InvalidImageName", msg)
            return self._pending_status(status, spec, waiting_reason, current), evs, plan, marks
        for image in images:
            evs.append((t0, f"pulling:{image}", "Pulling", f'Pulling image "{image}"', "Normal",
                        f"spec.containers{{{first_name}}}"))
        if script.pull_error:
            image = first.get("image", "")
            ref = _image_ref(image)
            detail = (f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": failed to '
                      f'resolve reference "{ref}": {ref}: not found')
            fp = f"spec.containers{{{first_name}}}"
            if current >= pull_end:
                evs.append((pull_end, f"pullfail:{image}", "Failed", f'Failed to pull image "{image}": {detail}',
                            "Warning", fp))
                evs.append((pull_end, f"pullerr:{image}", "Failed", "Error: ErrImagePull", "Warning", fp))
                waiting_reason[first_name] = ("ErrImagePull", detail)
            backoff_at = u.plus(pull_end, PULL_BACKOFF_SECONDS)
            marks.append(backoff_at)
            if current >= backoff_at:
                evs.append((backoff_at, f"backoff:{image}", "BackOff", f'Back-off pulling image "{image}"', "Normal",
                            fp))
                evs.append((backoff_at, f"backofferr:{image}", "Failed", "Error: ImagePullBackOff", "Warning", fp))
                waiting_reason[first_name] = ("ImagePullBackOff", f'Back-off pulling image "{image}"')
            return self._pending_status(status, spec, waiting_reason, current), evs, plan, marks
        if current < pull_end:
            return self._pending_status(status, spec, waiting_reason, current), evs, plan, marks
        for image in images:
            if script.pull_seconds > 0:
                secs = _duration(script.pull_seconds)
                msg = (f'Successfully pulled image "{image}" in {secs} ({secs} including waiting). '
                       f"Image size: {int(u.hex_hash('size', image, length=6), 16) * 64} bytes.")
            else:
                msg = f'Container image "{image}" already present on machine'
            evs.append((pull_end, f"pulled:{image}", "Pulled", msg, "Normal", f"spec.containers{{{first_name}}}"))

        # ---- init containers, one after the other
        init_statuses = []
        t = pull_end
        init_done = True
        pending_inits: list[str] = []
        for c in regular_inits:
            cname = c["name"]
            fp = f"spec.initContainers{{{cname}}}"
            start, end = t, u.plus(t, script.init_seconds)
            marks.append(end)
            base = self._container_base(c, uid)
            if current < start or not init_done:
                base["state"] = {"waiting": {"reason": "PodInitializing"}}
                init_done = False
                pending_inits.append(cname)
            else:
                evs.append((start, f"created:{cname}", "Created", self._created_text.format(cname), "Normal", fp))
                evs.append((start, f"started:{cname}", "Started", f"Started container {cname}", "Normal", fp))
                plan.append(self._log_plan(pod, script, c, main, 0, start, end))
                if current < end:
                    base["state"] = {"running": {"startedAt": u.ts(start)}}
                    base["started"] = True
                    init_done = False
                    pending_inits.append(cname)
                else:
                    base["state"] = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": u.ts(start),
                                                    "finishedAt": u.ts(end), "containerID": base["containerID"]}}
                    base["ready"] = True
            init_statuses.append(base)
            t = end
        run_start = t
        marks.append(run_start)
        if pending_inits:
            u.set_condition(conditions, "Initialized", "False", "ContainersNotInitialized",
                            f"containers with incomplete status: [{' '.join(pending_inits)}]", t0, probe_times=True)
        else:
            u.set_condition(conditions, "Initialized", "True", "", "", run_start if regular_inits else t0,
                            probe_times=True)
            _strip(conditions, "Initialized")

        # ---- the main run (with restarts for restartPolicy Always / OnFailure)
        runs = self._runs(script, run_start, current, restart_policy) if init_done else []
        cut_at, cut_kind = None, None
        if init_done:
            if script.evict_after is not None:
                cut_at, cut_kind = u.plus(run_start, script.evict_after), "evict"
            if script.preempt_after is not None:
                p_at = u.plus(run_start, script.preempt_after)
                if cut_at is None or p_at < cut_at:
                    cut_at, cut_kind = p_at, "preempt"
            if cut_at is not None and (runs and runs[0].end is not None and runs[0].end <= cut_at
                                       and not self._restarts(restart_policy, runs[0])):
                cut_at, cut_kind = None, None  # the pod finished before the disruption
        disrupted = cut_at is not None and current >= cut_at
        if cut_at is not None:
            marks.append(cut_at)
        for run in runs:
            marks.append(u.plus(run.start, script.ready_after))
            if run.end is not None:
                marks.append(run.end)
        if runs and runs[-1].end is not None and self._restarts(restart_policy, runs[-1]):
            nxt = self._next_start(runs)
            if nxt is not None:
                marks.append(nxt)
        if disrupted and cut_at is not None:
            runs = [r for r in runs if r.start < cut_at]
            if runs:
                last = runs[-1]
                if last.end is None or last.end > cut_at:
                    runs[-1] = _Run(last.start, cut_at, 137, False)

        statuses = []
        all_ready = bool(init_done)
        terminal_codes: list[int] = []
        unready: list[str] = []
        for c in sidecars + main_specs:
            cname = c["name"]
            is_sidecar = c in sidecars
            fp = f"spec.initContainers{{{cname}}}" if is_sidecar else f"spec.containers{{{cname}}}"
            base = self._container_base(c, uid)
            if not init_done or not runs:
                base["state"] = {"waiting": {"reason": "PodInitializing" if regular_inits else "ContainerCreating"}}
                all_ready = False
                unready.append(cname)
                statuses.append((is_sidecar, base))
                continue
            own_runs = runs
            for idx, run in enumerate(own_runs):
                suffix_ = "" if idx == 0 else f"#{idx}"
                evs.append((run.start, f"created:{cname}{suffix_}", "Created", self._created_text.format(cname),
                            "Normal", fp))
                evs.append((run.start, f"started:{cname}{suffix_}", "Started", f"Started container {cname}",
                            "Normal", fp))
                plan.append(self._log_plan(pod, script, c, main, idx, run.start, run.end))
            last = own_runs[-1]
            base["restartCount"] = len(own_runs) - 1
            if len(own_runs) > 1:
                prev = own_runs[-2]
                base["lastState"] = {"terminated": self._terminated(prev, cname == main, base["containerID"])}
            if last.end is not None and current >= last.end:
                if disrupted:
                    term = self._terminated(_Run(last.start, last.end, 137, False), True, base["containerID"])
                else:
                    term = self._terminated(last, cname == main, base["containerID"])
                exit_code = term["exitCode"]
                restarting = not disrupted and self._restarts(restart_policy, last)
                if restarting:
                    wait_until = self._next_start(own_runs)
                    back = u.seconds_between(last.end, wait_until) if wait_until else CRASH_BACKOFF_START
                    base["lastState"] = {"terminated": term}
                    base["restartCount"] = len(own_runs)
                    pod_ref = f"{name}_{ns}({uid})"
                    base["state"] = {"waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": f"back-off {_duration(back)} restarting failed container={cname} pod={pod_ref}"}}
                    evs.append((last.end, f"backoff:{cname}#{len(own_runs)}", "BackOff",
                                f"Back-off restarting failed container {cname} in pod {pod_ref}", "Warning", fp))
                    all_ready = False
                    unready.append(cname)
                else:
                    base["state"] = {"terminated": term}
                    terminal_codes.append(exit_code)
                    all_ready = False
                    unready.append(cname)
            else:
                base["state"] = {"running": {"startedAt": u.ts(last.start)}}
                base["started"] = True
                ready_at = u.plus(last.start, script.ready_after)
                if current >= ready_at:
                    base["ready"] = True
                else:
                    all_ready = False
                    unready.append(cname)
            statuses.append((is_sidecar, base))

        status["initContainerStatuses"] = init_statuses + [b for s, b in statuses if s]
        if not status["initContainerStatuses"]:
            status.pop("initContainerStatuses")
        status["containerStatuses"] = [b for s, b in statuses if not s]

        n_main = len(main_specs) + len(sidecars)
        if disrupted and cut_at is not None:
            self._disruption(pod, script, status, conditions, cut_at, cut_kind, evs, main_specs + sidecars)
        elif len(terminal_codes) == n_main and n_main:
            status["phase"] = "Succeeded" if all(code == 0 for code in terminal_codes) else "Failed"
        elif runs:
            status["phase"] = "Running"
        ready_time = None
        if all_ready and runs:
            ready_time = max(u.plus(runs[-1].start, script.ready_after), runs[-1].start)
        if status["phase"] in ("Succeeded", "Failed"):
            reason = "PodCompleted" if status["phase"] == "Succeeded" else "PodFailed"
            end = max((r.end for r in runs if r.end), default=current)
            for ctype in ("ContainersReady", "Ready"):
                u.set_condition(conditions, ctype, "False", reason, "", end, probe_times=True)
        elif ready_time is not None:
            for ctype in ("ContainersReady", "Ready"):
                u.set_condition(conditions, ctype, "True", "", "", ready_time, probe_times=True)
                _strip(conditions, ctype)
        else:
            msg = f"containers with unready status: [{' '.join(unready)}]"
            for ctype in ("ContainersReady", "Ready"):
                u.set_condition(conditions, ctype, "False", "ContainersNotReady", msg, t0, probe_times=True)
        _order_conditions(conditions)
        return status, evs, plan, marks

    def _pending_status(self, status: dict[str, Any], spec: dict[str, Any], waiting: dict[str, tuple[str, str]],
                        current: datetime) -> dict[str, Any]:
        conditions = status["conditions"]
        t0 = u.parse_ts(status["startTime"]) or current
        inits = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") != "Always"]
        if inits:
            u.set_condition(conditions, "Initialized", "False", "ContainersNotInitialized",
                            f"containers with incomplete status: [{' '.join(c['name'] for c in inits)}]", t0,
                            probe_times=True)
        else:
            u.set_condition(conditions, "Initialized", "True", "", "", t0, probe_times=True)
            _strip(conditions, "Initialized")
        mains = [c["name"] for c in spec.get("containers") or []]
        msg = f"containers with unready status: [{' '.join(mains)}]"
        for ctype in ("ContainersReady", "Ready"):
            u.set_condition(conditions, ctype, "False", "ContainersNotReady", msg, t0, probe_times=True)

        def entry(c: dict[str, Any], default: str) -> dict[str, Any]:
            reason, message = waiting.get(c["name"], (default, ""))
            st: dict[str, Any] = {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False,
                                  "restartCount": 0, "started": False, "state": {"waiting": {"reason": reason}},
                                  "lastState": {}}
            if message:
                st["state"]["waiting"]["message"] = message
            return st

        init_all = spec.get("initContainers") or []
        if init_all:
            status["initContainerStatuses"] = [entry(c, "PodInitializing") for c in init_all]
        else:
            status.pop("initContainerStatuses", None)
        status["containerStatuses"] = [entry(c, "PodInitializing" if inits else "ContainerCreating")
                                       for c in spec.get("containers") or []]
        _order_conditions(conditions)
        return status

    def _container_base(self, c: dict[str, Any], uid: str) -> dict[str, Any]:
        image = c.get("image", "")
        return {"name": c["name"], "image": image, "imageID": _image_id(image),
                "containerID": f"containerd://{u.hex_hash('container', uid, c['name'], length=64)}",
                "ready": False, "restartCount": 0, "started": False, "lastState": {}, "state": {}}

    def _terminated(self, run: _Run, is_main: bool, container_id: str) -> dict[str, Any]:
        code = run.exit_code if is_main else 0
        if run.oom and is_main:
            code, reason = 137, "OOMKilled"
        else:
            reason = "Completed" if code == 0 else "Error"
        return {"exitCode": code, "reason": reason, "startedAt": u.ts(run.start),
                "finishedAt": u.ts(run.end or run.start), "containerID": container_id}

    @staticmethod
    def _restarts(restart_policy: str, run: _Run) -> bool:
        failed = run.oom or run.exit_code != 0
        return restart_policy == "Always" or (restart_policy == "OnFailure" and failed)

    def _runs(self, script: PodScript, start: datetime, current: datetime, restart_policy: str) -> list[_Run]:
        """Every run of the containers up to ``current`` (several when the restart policy restarts them)."""
        runs: list[_Run] = []
        t = start
        backoff = CRASH_BACKOFF_START
        for _ in range(1000):
            if t > current:
                break
            if script.run_seconds is None:
                runs.append(_Run(t, None, 0, False))
                break
            end = u.plus(t, script.run_seconds)
            run = _Run(t, end, 137 if script.oom else script.exit_code, script.oom)
            runs.append(run)
            if end > current or not self._restarts(restart_policy, run):
                break
            t = u.plus(end, backoff)
            backoff = min(backoff * 2, CRASH_BACKOFF_MAX)
        return runs

    def _next_start(self, runs: list[_Run]) -> datetime | None:
        backoff = CRASH_BACKOFF_START * (2 ** (len(runs) - 1))
        last = runs[-1]
        return u.plus(last.end, min(backoff, CRASH_BACKOFF_MAX)) if last.end else None

    def _log_plan(self, pod: dict[str, Any], script: PodScript, container: dict[str, Any], main: str,
                  run_index: int, start: datetime, end: datetime | None) -> tuple[Any, ...]:
        lines = script.log_lines(pod, container["name"], main)
        timed: list[tuple[datetime, str]] = []
        if lines:
            if script.log_every is not None:
                step = script.log_every
            elif end is not None and len(lines) > 1:
                step = u.seconds_between(start, end) / len(lines)
            else:
                step = 0
            for i, line in enumerate(lines):
                when = u.plus(start, i * step)
                if end is not None and when > end:
                    when = end
                timed.append((when, line))
        return (container["name"], run_index, start, timed, end)

    def _disruption(self, pod: dict[str, Any], script: PodScript, status: dict[str, Any],
                    conditions: list[dict[str, Any]], at: datetime, kind: str | None, evs: list[tuple[Any, ...]],
                    containers: list[dict[str, Any]]) -> None:
        status["phase"] = "Failed"
        node_name = pod["spec"].get("nodeName")
        if kind == "evict":
            message = script.evict_message
            status["reason"] = "Evicted"
            status["message"] = message
            u.set_condition(conditions, "DisruptionTarget", "True", "TerminationByKubelet", message, at,
                            probe_times=True)
            evs.append((at, "evicted", "Evicted", message, "Warning", None))
        else:
            message = f"{'default-scheduler'}: {PREEMPT_MESSAGE}"
            u.set_condition(conditions, "DisruptionTarget", "True", "PreemptionByScheduler", message, at,
                            probe_times=True)
            preemptor = u.hex_hash("preemptor", pod["metadata"]["uid"], length=32)
            preemptor = f"{preemptor[:8]}-{preemptor[8:12]}-{preemptor[12:16]}-{preemptor[16:20]}-{preemptor[20:]}"
            evs.append((at, "preempted", "Preempted", f"Preempted by pod {preemptor} on node {node_name}",
                        "Normal", None))
        for c in containers:
            evs.append((at, f"killing:{c['name']}", "Killing", f"Stopping container {c['name']}", "Normal",
                        f"spec.containers{{{c['name']}}}"))


def _version(cluster: Any) -> tuple[int, int]:
    text = str(getattr(cluster, "kubernetes_version", "") or "1.30").lstrip("v")
    try:
        major, minor = text.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return (1, 30)


def _strip(conditions: list[dict[str, Any]], ctype: str) -> None:
    for cond in conditions:
        if cond.get("type") == ctype and cond.get("status") == "True":
            cond.pop("reason", None)
            cond.pop("message", None)


_ORDER = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled",
          "DisruptionTarget"]


def _order_conditions(conditions: list[dict[str, Any]]) -> None:
    conditions.sort(key=lambda c: _ORDER.index(c["type"]) if c.get("type") in _ORDER else len(_ORDER))
    for cond in conditions:
        if cond.get("type") != "PodScheduled":
            cond.setdefault("lastProbeTime", None)


def _duration(seconds: float) -> str:
    """Go's ``time.Duration`` text for whole and fractional seconds (``2s``, ``1.5s``, ``5m0s``)."""
    if seconds >= 60:
        minutes = math.floor(seconds / 60)
        rest = seconds - minutes * 60
        return f"{minutes}m{_duration(rest) if rest else '0s'}"
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{seconds:g}s"


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
