"""One pod's status at one moment, as a pure function of its script, the time it was bound, and the clock.

``PodTimeline`` walks the pod through image pull, init containers, the main run (with restarts) and an
eventual disruption, and returns the status with the events, log plan and the moments its status changes next.
The ``Kubelet`` (``tau_testing.sim.controllers.pods``) writes what it computes.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tau_testing.sim.controllers import _util as u
from tau_testing.sim.controllers.scheduler import node_ip
from tau_testing.sim.scripts import PodScript

PULL_BACKOFF_SECONDS = 10.0
CRASH_BACKOFF_START = 10.0
CRASH_BACKOFF_MAX = 300.0
PREEMPT_MESSAGE = "preempting to accommodate a higher priority pod"

#: (status, events, log plan, marks)
TimelineResult = tuple[dict[str, Any], list[tuple[Any, ...]], list[tuple[Any, ...]], list[datetime]]


@dataclass
class _Run:
    start: datetime
    end: datetime | None  # None: still running forever
    exit_code: int
    oom: bool


def main_container(pod_spec: dict[str, Any]) -> str:
    names = [c["name"] for c in pod_spec.get("containers") or []]
    return "main" if "main" in names else (names[0] if names else "")


class PodTimeline:
    """The status of one pod at ``current``: ``compute()`` returns it with its events, log plan and marks."""

    def __init__(self, created_text: str, pod: dict[str, Any], script: PodScript, anchor: datetime,
                 current: datetime, node: dict[str, Any] | None) -> None:
        self.created_text = created_text
        self.pod, self.script, self.current, self.node = pod, script, current, node
        self.spec: dict[str, Any] = pod["spec"]
        self.ns, self.name = u.key(pod)
        self.uid: str = pod["metadata"]["uid"]
        self.t0 = anchor
        self.marks: list[datetime] = []  # moments when this pod's status changes next (for next_wakeup)
        self.evs: list[tuple[Any, ...]] = []
        self.plan: list[tuple[Any, ...]] = []
        self.status: dict[str, Any] = copy.deepcopy(pod.get("status") or {})
        self.conditions: list[dict[str, Any]] = self.status.setdefault("conditions", [])
        init_specs = self.spec.get("initContainers") or []
        self.main_specs: list[dict[str, Any]] = self.spec.get("containers") or []
        self.regular_inits = [c for c in init_specs if c.get("restartPolicy") != "Always"]
        self.sidecars = [c for c in init_specs if c.get("restartPolicy") == "Always"]
        self.main = main_container(self.spec)
        self.restart_policy: str = self.spec.get("restartPolicy") or "Always"
        self.waiting_reason: dict[str, tuple[str, str]] = {}

    def compute(self) -> TimelineResult:
        self._begin()
        pull_end = self._pull()
        if pull_end is None:
            return _pending_status(self.status, self.spec, self.waiting_reason, self.current), self.evs, \
                self.plan, self.marks
        init_statuses, run_start, init_done = self._init_containers(pull_end)
        runs, cut_at, cut_kind = self._main_runs(run_start, init_done)
        disrupted = cut_at is not None and self.current >= cut_at
        if disrupted and cut_at is not None:
            runs = [r for r in runs if r.start < cut_at]
            if runs:
                last = runs[-1]
                if last.end is None or last.end > cut_at:
                    runs[-1] = _Run(last.start, cut_at, 137, False)
        statuses, terminal_codes, unready = self._container_statuses(runs, init_done, disrupted)
        status = self.status
        status["initContainerStatuses"] = init_statuses + [b for s, b in statuses if s]
        if not status["initContainerStatuses"]:
            status.pop("initContainerStatuses")
        status["containerStatuses"] = [b for s, b in statuses if not s]
        n_main = len(self.main_specs) + len(self.sidecars)
        if disrupted and cut_at is not None:
            _disruption(self.pod, self.script, status, self.conditions, cut_at, cut_kind, self.evs,
                        self.main_specs + self.sidecars)
        elif len(terminal_codes) == n_main and n_main:
            status["phase"] = "Succeeded" if all(code == 0 for code in terminal_codes) else "Failed"
        elif runs:
            status["phase"] = "Running"
        self._readiness(runs, init_done, unready)
        _order_conditions(self.conditions)
        return status, self.evs, self.plan, self.marks

    def _begin(self) -> None:
        """Pending on its node, with its addresses."""
        status, spec, t0 = self.status, self.spec, self.t0
        status["phase"] = "Pending"
        status["startTime"] = u.ts(t0)
        if self.node is not None:
            status["hostIP"] = node_ip(self.node)
            status["hostIPs"] = [{"ip": status["hostIP"]}]
        ip = f"10.244.{(int(u.hex_hash('node', spec.get('nodeName'), length=4), 16) % 250) + 1}." \
             f"{(int(u.hex_hash('ip', self.uid, length=4), 16) % 250) + 2}"
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
        u.set_condition(self.conditions, "PodReadyToStartContainers", "True", "", "", t0, probe_times=True)

    def _pull(self) -> datetime | None:
        """The image pull: when it ended, or None while the pod stays pending (pulling, or failed to)."""
        script, evs, t0, current = self.script, self.evs, self.t0, self.current
        images = []
        for c in self.regular_inits + self.sidecars + self.main_specs:
            if c.get("image") and c["image"] not in images:
                images.append(c["image"])
        first = (self.regular_inits or self.sidecars or self.main_specs or [{}])[0]
        first_name = first.get("name", "")
        pull_end = u.plus(t0, script.pull_seconds)
        self.marks.append(pull_end)
        if script.pull_error == "InvalidImageName":
            image = first.get("image", "")
            msg = f'Failed to apply default image tag "{image}": couldn\'t parse image name "{image}": ' \
                  f"invalid reference format"
            evs.append((t0, f"invalid:{first_name}", "Failed", msg, "Warning", f"spec.containers{{{first_name}}}"))
            evs.append((t0, f"invalid-err:{first_name}", "Failed", "Error: InvalidImageName", "Warning",
                        f"spec.containers{{{first_name}}}"))
            self.waiting_reason[first_name] = ("InvalidImageName", msg)
            return None
        for image in images:
            evs.append((t0, f"pulling:{image}", "Pulling", f'Pulling image "{image}"', "Normal",
                        f"spec.containers{{{first_name}}}"))
        if script.pull_error:
            self._pull_failed(first, pull_end)
            return None
        if current < pull_end:
            return None
        for image in images:
            if script.pull_seconds > 0:
                secs = _duration(script.pull_seconds)
                msg = (f'Successfully pulled image "{image}" in {secs} ({secs} including waiting). '
                       f"Image size: {int(u.hex_hash('size', image, length=6), 16) * 64} bytes.")
            else:
                msg = f'Container image "{image}" already present on machine'
            evs.append((pull_end, f"pulled:{image}", "Pulled", msg, "Normal", f"spec.containers{{{first_name}}}"))
        return pull_end

    def _pull_failed(self, first: dict[str, Any], pull_end: datetime) -> None:
        """ErrImagePull when the pull ends, ImagePullBackOff after the back-off."""
        evs, current = self.evs, self.current
        first_name = first.get("name", "")
        image = first.get("image", "")
        ref = _image_ref(image)
        detail = (f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": failed to '
                  f'resolve reference "{ref}": {ref}: not found')
        fp = f"spec.containers{{{first_name}}}"
        if current >= pull_end:
            evs.append((pull_end, f"pullfail:{image}", "Failed", f'Failed to pull image "{image}": {detail}',
                        "Warning", fp))
            evs.append((pull_end, f"pullerr:{image}", "Failed", "Error: ErrImagePull", "Warning", fp))
            self.waiting_reason[first_name] = ("ErrImagePull", detail)
        backoff_at = u.plus(pull_end, PULL_BACKOFF_SECONDS)
        self.marks.append(backoff_at)
        if current >= backoff_at:
            evs.append((backoff_at, f"backoff:{image}", "BackOff", f'Back-off pulling image "{image}"', "Normal",
                        fp))
            evs.append((backoff_at, f"backofferr:{image}", "Failed", "Error: ImagePullBackOff", "Warning", fp))
            self.waiting_reason[first_name] = ("ImagePullBackOff", f'Back-off pulling image "{image}"')

    def _init_containers(self, pull_end: datetime) -> tuple[list[dict[str, Any]], datetime, bool]:
        """The init containers, one after the other: their statuses, when the main run starts, and whether
        they all completed."""
        script, current = self.script, self.current
        init_statuses = []
        t = pull_end
        init_done = True
        pending_inits: list[str] = []
        for c in self.regular_inits:
            cname = c["name"]
            fp = f"spec.initContainers{{{cname}}}"
            start, end = t, u.plus(t, script.init_seconds)
            self.marks.append(end)
            base = _container_base(c, self.uid)
            if current < start or not init_done:
                base["state"] = {"waiting": {"reason": "PodInitializing"}}
                init_done = False
                pending_inits.append(cname)
            else:
                self.evs.append((start, f"created:{cname}", "Created", self.created_text.format(cname), "Normal",
                                 fp))
                self.evs.append((start, f"started:{cname}", "Started", f"Started container {cname}", "Normal", fp))
                self.plan.append(_log_plan(self.pod, script, c, self.main, 0, start, end))
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
        self.marks.append(run_start)
        if pending_inits:
            u.set_condition(self.conditions, "Initialized", "False", "ContainersNotInitialized",
                            f"containers with incomplete status: [{' '.join(pending_inits)}]", self.t0,
                            probe_times=True)
        else:
            u.set_condition(self.conditions, "Initialized", "True", "", "",
                            run_start if self.regular_inits else self.t0, probe_times=True)
            _strip(self.conditions, "Initialized")
        return init_statuses, run_start, init_done

    def _main_runs(self, run_start: datetime, init_done: bool) -> tuple[list[_Run], datetime | None, str | None]:
        """The main run (with restarts for restartPolicy Always / OnFailure) and the moment and kind of a
        scripted disruption (eviction or preemption), if one comes before the pod finishes."""
        script, restart_policy = self.script, self.restart_policy
        runs = _runs(script, run_start, self.current, restart_policy) if init_done else []
        cut_at: datetime | None = None
        cut_kind: str | None = None
        if init_done:
            if script.evict_after is not None:
                cut_at, cut_kind = u.plus(run_start, script.evict_after), "evict"
            if script.preempt_after is not None:
                p_at = u.plus(run_start, script.preempt_after)
                if cut_at is None or p_at < cut_at:
                    cut_at, cut_kind = p_at, "preempt"
            if cut_at is not None and (runs and runs[0].end is not None and runs[0].end <= cut_at
                                       and not _restarts(restart_policy, runs[0])):
                cut_at, cut_kind = None, None  # the pod finished before the disruption
        if cut_at is not None:
            self.marks.append(cut_at)
        for run in runs:
            self.marks.append(u.plus(run.start, script.ready_after))
            if run.end is not None:
                self.marks.append(run.end)
        if runs and runs[-1].end is not None and _restarts(restart_policy, runs[-1]):
            nxt = _next_start(runs)
            if nxt is not None:
                self.marks.append(nxt)
        return runs, cut_at, cut_kind

    def _container_statuses(self, runs: list[_Run], init_done: bool, disrupted: bool
                            ) -> tuple[list[tuple[bool, dict[str, Any]]], list[int], list[str]]:
        """Each sidecar's and main container's status (flagged True for sidecars), the exit codes of those that
        ended for good, and the names of those not ready."""
        statuses = []
        terminal_codes: list[int] = []
        unready: list[str] = []
        for c in self.sidecars + self.main_specs:
            cname = c["name"]
            is_sidecar = c in self.sidecars
            fp = f"spec.initContainers{{{cname}}}" if is_sidecar else f"spec.containers{{{cname}}}"
            base = _container_base(c, self.uid)
            if not init_done or not runs:
                base["state"] = {"waiting": {"reason": "PodInitializing" if self.regular_inits
                                             else "ContainerCreating"}}
                unready.append(cname)
                statuses.append((is_sidecar, base))
                continue
            for idx, run in enumerate(runs):
                suffix_ = "" if idx == 0 else f"#{idx}"
                self.evs.append((run.start, f"created:{cname}{suffix_}", "Created",
                                 self.created_text.format(cname), "Normal", fp))
                self.evs.append((run.start, f"started:{cname}{suffix_}", "Started", f"Started container {cname}",
                                 "Normal", fp))
                self.plan.append(_log_plan(self.pod, self.script, c, self.main, idx, run.start, run.end))
            last = runs[-1]
            base["restartCount"] = len(runs) - 1
            if len(runs) > 1:
                base["lastState"] = {"terminated": _terminated(runs[-2], cname == self.main, base["containerID"])}
            if last.end is not None and self.current >= last.end:
                code = self._ended(base, cname, fp, runs, disrupted)
                if code is not None:
                    terminal_codes.append(code)
                unready.append(cname)
            else:
                base["state"] = {"running": {"startedAt": u.ts(last.start)}}
                base["started"] = True
                if self.current >= u.plus(last.start, self.script.ready_after):
                    base["ready"] = True
                else:
                    unready.append(cname)
            statuses.append((is_sidecar, base))
        return statuses, terminal_codes, unready

    def _ended(self, base: dict[str, Any], cname: str, fp: str, runs: list[_Run], disrupted: bool) -> int | None:
        """A container whose last run ended: terminated for good (its exit code), or waiting in
        CrashLoopBackOff to restart (None)."""
        last = runs[-1]
        assert last.end is not None
        if disrupted:
            term = _terminated(_Run(last.start, last.end, 137, False), True, base["containerID"])
        else:
            term = _terminated(last, cname == self.main, base["containerID"])
        if disrupted or not _restarts(self.restart_policy, last):
            base["state"] = {"terminated": term}
            return int(term["exitCode"])
        wait_until = _next_start(runs)
        back = u.seconds_between(last.end, wait_until) if wait_until else CRASH_BACKOFF_START
        base["lastState"] = {"terminated": term}
        base["restartCount"] = len(runs)
        pod_ref = f"{self.name}_{self.ns}({self.uid})"
        base["state"] = {"waiting": {
            "reason": "CrashLoopBackOff",
            "message": f"back-off {_duration(back)} restarting failed container={cname} pod={pod_ref}"}}
        self.evs.append((last.end, f"backoff:{cname}#{len(runs)}", "BackOff",
                         f"Back-off restarting failed container {cname} in pod {pod_ref}", "Warning", fp))
        return None

    def _readiness(self, runs: list[_Run], init_done: bool, unready: list[str]) -> None:
        """The ContainersReady and Ready conditions."""
        conditions, status = self.conditions, self.status
        ready_time = None
        if init_done and not unready and runs:
            ready_time = max(u.plus(runs[-1].start, self.script.ready_after), runs[-1].start)
        if status["phase"] in ("Succeeded", "Failed"):
            reason = "PodCompleted" if status["phase"] == "Succeeded" else "PodFailed"
            end = max((r.end for r in runs if r.end), default=self.current)
            for ctype in ("ContainersReady", "Ready"):
                u.set_condition(conditions, ctype, "False", reason, "", end, probe_times=True)
        elif ready_time is not None:
            for ctype in ("ContainersReady", "Ready"):
                u.set_condition(conditions, ctype, "True", "", "", ready_time, probe_times=True)
                _strip(conditions, ctype)
        else:
            msg = f"containers with unready status: [{' '.join(unready)}]"
            for ctype in ("ContainersReady", "Ready"):
                u.set_condition(conditions, ctype, "False", "ContainersNotReady", msg, self.t0, probe_times=True)



def _pending_status(status: dict[str, Any], spec: dict[str, Any], waiting: dict[str, tuple[str, str]],
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


def _container_base(c: dict[str, Any], uid: str) -> dict[str, Any]:
    image = c.get("image", "")
    return {"name": c["name"], "image": image, "imageID": _image_id(image),
            "containerID": f"containerd://{u.hex_hash('container', uid, c['name'], length=64)}",
            "ready": False, "restartCount": 0, "started": False, "lastState": {}, "state": {}}


def _terminated(run: _Run, is_main: bool, container_id: str) -> dict[str, Any]:
    code = run.exit_code if is_main else 0
    if run.oom and is_main:
        code, reason = 137, "OOMKilled"
    else:
        reason = "Completed" if code == 0 else "Error"
    return {"exitCode": code, "reason": reason, "startedAt": u.ts(run.start),
            "finishedAt": u.ts(run.end or run.start), "containerID": container_id}


def _restarts(restart_policy: str, run: _Run) -> bool:
    failed = run.oom or run.exit_code != 0
    return restart_policy == "Always" or (restart_policy == "OnFailure" and failed)


def _runs(script: PodScript, start: datetime, current: datetime, restart_policy: str) -> list[_Run]:
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
        if end > current or not _restarts(restart_policy, run):
            break
        t = u.plus(end, backoff)
        backoff = min(backoff * 2, CRASH_BACKOFF_MAX)
    return runs


def _next_start(runs: list[_Run]) -> datetime | None:
    backoff = CRASH_BACKOFF_START * (2 ** (len(runs) - 1))
    last = runs[-1]
    return u.plus(last.end, min(backoff, CRASH_BACKOFF_MAX)) if last.end else None


def _log_plan(pod: dict[str, Any], script: PodScript, container: dict[str, Any], main: str,
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


def _disruption(pod: dict[str, Any], script: PodScript, status: dict[str, Any],
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
