"""Pod scripts: what each simulated container does, set per test.

A ``PodScript`` is a timeline measured from the moment the pod is bound to a node::

    [pull_seconds]  image pull (or a pull failure that leaves the pod Pending)
    [init_seconds]  per init container, one after the other
    [run_seconds]   the containers run; ``None`` means "until deleted" (servers, Ray nodes)
    exit            exit_code (or OOMKilled, exit 137); eviction / preemption cut the run short

``ScriptBook.add(match, script)`` chooses the script of a pod: ``match`` is a label dict (subset match), a
regular expression searched in the pod name, or a callable taking the pod. The first match wins. Without
a match, pods that may restart (``restartPolicy: Always``: Deployments, Ray nodes) run until deleted and
become ready at once; other pods (Jobs) succeed after one second with a couple of log lines.

The same book scripts the driver of a RayJob: ``add(match, script, kind="RayJob")`` matches the RayJob
object, and the driver's ``run_seconds``, ``exit_code`` and ``logs`` decide ``jobStatus``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LogSource = list[str] | dict[str, list[str]] | Callable[[dict[str, Any], str], list[str]] | None

PULL_ERRORS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName")


@dataclass
class PodScript:
    """The scripted life of one pod (see the module docstring for the timeline)."""

    pull_seconds: float = 0
    pull_error: str | None = None
    init_seconds: float = 0
    run_seconds: float | None = 1
    exit_code: int = 0
    oom: bool = False
    evict_after: float | None = None
    preempt_after: float | None = None
    ready_after: float = 0
    logs: LogSource = None
    log_every: float | None = None
    evict_message: str = (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. "
    )

    def __post_init__(self) -> None:
        if self.pull_error is not None and self.pull_error not in PULL_ERRORS:
            raise ValueError(f"pull_error must be one of {', '.join(PULL_ERRORS)}, got {self.pull_error!r}")
        for name in ("pull_seconds", "init_seconds", "ready_after"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        if self.run_seconds is not None and self.run_seconds < 0:
            raise ValueError("run_seconds must not be negative")
        if self.log_every is not None and self.log_every <= 0:
            raise ValueError("log_every must be positive")

    def log_lines(self, pod: dict[str, Any], container: str, main_container: str) -> list[str]:
        """The lines ``container`` of ``pod`` writes while it runs."""
        source = self.logs
        if source is None:
            return default_log_lines(pod, container, main_container, self)
        if callable(source):
            return [str(line) for line in source(pod, container)]
        if isinstance(source, dict):
            return [str(line) for line in source.get(container, [])]
        return [str(line) for line in source] if container == main_container else []


def default_log_lines(pod: dict[str, Any], container: str, main_container: str, script: PodScript) -> list[str]:
    name = pod["metadata"]["name"]
    if container != main_container:
        return []  # sidecars (log offload, metrics) say nothing unless a script gives them lines
    lines = [f"{container}: starting in pod {name}"]
    if script.run_seconds is not None:
        lines.append(f"{container}: finished with exit code {137 if script.oom else script.exit_code}")
    return lines


def _default_for(obj: dict[str, Any]) -> PodScript:
    if obj.get("kind") == "RayJob":
        name = obj["metadata"]["name"]
        return PodScript(run_seconds=1, logs=[f"Job {name} started", f"Job {name} succeeded"])
    restart = ((obj.get("spec") or {}).get("restartPolicy")) or "Always"
    if restart == "Always":
        return PodScript(run_seconds=None)
    return PodScript(run_seconds=1)


Matcher = dict[str, str] | str | re.Pattern[str] | Callable[[dict[str, Any]], bool]


@dataclass
class _Entry:
    match: Matcher
    script: PodScript
    kind: str


@dataclass
class ScriptBook:
    """Ordered pod scripts; ``add`` them in a test, the kubelet simulation asks ``for_pod``."""

    entries: list[_Entry] = field(default_factory=list)

    def add(self, match: Matcher, script: PodScript, *, kind: str = "Pod") -> ScriptBook:
        if not isinstance(script, PodScript):
            raise TypeError("script must be a PodScript")
        if not (isinstance(match, (dict, str, re.Pattern)) or callable(match)):
            raise TypeError("match must be a label dict, a name regex or a callable")
        self.entries.append(_Entry(match, script, kind))
        return self

    def clear(self) -> None:
        self.entries.clear()

    def lookup(self, obj: dict[str, Any]) -> PodScript:
        kind = obj.get("kind") or "Pod"
        for entry in self.entries:
            if entry.kind == kind and _matches(entry.match, obj):
                return entry.script
        return _default_for(obj)

    def for_pod(self, pod: dict[str, Any]) -> PodScript:
        return self.lookup({**pod, "kind": "Pod"})

    def for_rayjob(self, rayjob: dict[str, Any]) -> PodScript:
        return self.lookup({**rayjob, "kind": "RayJob"})


def _matches(match: Matcher, obj: dict[str, Any]) -> bool:
    meta = obj.get("metadata") or {}
    if isinstance(match, dict):
        labels = meta.get("labels") or {}
        return all(labels.get(k) == v for k, v in match.items())
    if isinstance(match, re.Pattern):
        return bool(match.search(meta.get("name", "")))
    if isinstance(match, str):
        return bool(re.search(match, meta.get("name", "")))
    return bool(match(obj))


def scripts_of(cluster: Any) -> ScriptBook:
    """The cluster's script book, created on first use."""
    book = getattr(cluster, "scripts", None)
    if not isinstance(book, ScriptBook):
        book = ScriptBook()
        cluster.scripts = book
    return book
