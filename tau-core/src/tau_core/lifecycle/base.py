"""The lifecycle interface shared by every execution backend."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from tau_core.errors import TauError
from tau_core.lifecycle.details import StatusDetails

if TYPE_CHECKING:
    from tau_core.config.run_model import RunConfig
    from tau_core.rendering.context import RenderContext

#: Phase states, with the marker the phase tree prints for each.
PHASE_STATES: dict[str, str] = {"pending": "[ ]", "active": "[>]", "done": "[x]", "warning": "[!]", "skipped": "[-]"}


class FailureReason(StrEnum):
    """Failure classification (reference run-config-and-rendering §4.2)."""

    COMPLETED = "Completed"
    RUNNING = "Running"
    OOM_KILLED = "OOMKilled"
    PREEMPTED = "Preempted"
    EVICTED = "Evicted"
    UNKNOWN = "Unknown"

    @classmethod
    def parse(cls, value: str) -> FailureReason:
        """Case-insensitive lookup, as ``resilience.retry_on`` requires."""
        for member in cls:
            if member.value.lower() == value.strip().lower():
                return member
        raise ValueError(value)


@dataclass(frozen=True)
class RunRef:
    """Where a run lives: the backend plus its address inside that backend."""

    name: str
    backend: str = "kubernetes"
    namespace: str | None = None
    context: str | None = None
    workspace: str | None = None


@dataclass
class Phase:
    name: str
    state: str  # one of PHASE_STATES
    detail: str = ""
    hint: str | None = None
    elapsed_seconds: float | None = None


@dataclass
class RunStatus:
    ref: RunRef
    kind: str  # Job | RayJob | local
    phases: list[Phase]
    terminal: bool
    succeeded: bool
    failure: FailureReason | None = None
    attempt: int | None = None  # 1-based; None when the run never retried
    max_attempts: int | None = None
    message: str = ""
    extra: StatusDetails = field(default_factory=StatusDetails)
    """What the backend observed beyond the phase tree (typed; every field optional). A plain mapping given
    at construction is converted once, here, at the edge (:meth:`StatusDetails.from_mapping`)."""

    def __post_init__(self) -> None:
        self.extra = StatusDetails.from_mapping(self.extra)


@dataclass
class RunSummary:
    """One row of ``tau run list``."""

    ref: RunRef
    kind: str
    state: str
    queue: str | None = None
    created: str | None = None
    external: bool = False


def _to_config(value: Mapping[str, Any] | RunConfig) -> RunConfig:
    from tau_core.config.run_model import RunConfig, run_config

    return value if isinstance(value, RunConfig) else run_config(value)


def _to_context(value: Mapping[str, Any] | RenderContext | None) -> RenderContext:
    from tau_core.rendering.context import RenderContext

    return RenderContext.from_mapping(value)


@attrs.define
class SubmitRequest:
    """Everything a backend needs to start a run.

    ``objects`` are the rendered Kubernetes objects (the workload first); the local backend
    reads what it needs from ``config`` and ``context``.

    ``config`` is the typed :class:`~tau_core.config.run_model.RunConfig` and ``context`` the typed
    :class:`~tau_core.rendering.context.RenderContext` the objects were rendered with; a plain (normalized,
    possibly partial) mapping given at construction is converted once, here, at the edge, and a key the
    field catalog does not describe is a :class:`~tau_core.errors.ConfigError`.
    """

    name: str
    config: RunConfig = attrs.field(converter=_to_config)
    objects: list[dict[str, Any]]
    context: RenderContext = attrs.field(converter=_to_context)
    config_path: Path | None = None
    config_hash: str = ""
    submission_id: str = ""
    extra_env: Mapping[str, str] = attrs.field(factory=dict)


@dataclass
class SubmitResult:
    ref: RunRef
    created: bool  # False when a retried submission recovered an existing object
    message: str = ""


@dataclass
class LogOptions:
    follow: bool = False
    tail: int | None = 200
    container: str | None = None
    all_containers: bool = False
    previous: bool = False
    timestamps: bool = False
    prefix: bool = False
    #: Output directory and PVC of a run whose workload is gone, to read its archived ``logs/`` (tau logs --path/--pvc)
    archive_path: str | None = None
    archive_pvc: str | None = None
    #: Where the platform keeps container logs (adx-mon's ``Logs.ContainerLogs``), for a run whose pods and
    #: archive are gone (tau logs --kusto-cluster/--kusto-endpoint/--kusto-database)
    kusto_cluster: str | None = None
    kusto_endpoint: str | None = None
    kusto_database: str | None = None


@dataclass
class ArtifactListing:
    root: str
    entries: list[dict[str, Any]]  # {"path": rel, "size": int | None, "type": "file"|"dir"}


@runtime_checkable
class ExecutionBackend(Protocol):
    """What every backend implements: exactly what the lifecycle commands call.

    Failures raise :class:`tau_core.errors.TauError`.  Keyword options a backend has no use for
    (``run_profile``, ``workspace``, ``path``/``pvc``, ``object_timeout``) are accepted and ignored;
    automatic retry is the backend's own business inside :meth:`submit`.
    """

    name: str
    #: what the last :meth:`get` read (``path``, ``pvc``, ``checkpoint``); empty when the backend records nothing
    last_get: dict[str, Any]

    def submit(self, request: SubmitRequest) -> SubmitResult:
        """Start the run (``tau run``); with ``context.dry_run == "server"`` only validate it."""
        ...

    def status(self, ref: RunRef, *, run_profile: bool = False) -> RunStatus:
        """One status read (``tau run status``); ``exists`` in ``extra`` is False for an unknown run."""
        ...

    def watch_status(self, ref: RunRef, *, interval: float = 2.0, max_iterations: int = 0,
                     run_profile: bool = False) -> Iterator[RunStatus]:
        """Status frames while the run changes, ending with a terminal frame (``tau run status --watch``)."""
        ...

    def list(self, *, namespace: str | None = None, queue: str | None = None,
             include_external: bool = False, workspace: str | None = None) -> list[RunSummary]:
        """``tau run list`` rows, newest first."""
        ...

    def logs(self, ref: RunRef, options: LogOptions) -> Iterator[str]:
        """Log lines (``tau logs``, ``tau run logs``); with ``options.follow`` until the run ends."""
        ...

    def get(self, ref: RunRef, artifact: str | None = None, *, path: str | None = None,
            pvc: str | None = None) -> ArtifactListing | bytes:
        """A listing of the run's results, or one file's bytes (``tau run get``)."""
        ...

    def cancel(self, ref: RunRef, *, wait: bool = True, timeout: float = 600.0,
               object_timeout: float = 30.0) -> str:
        """Stop the run (``tau run cancel``); returns the one-line account the command prints."""
        ...

    def resume(self, ref: RunRef, request: SubmitRequest, *, from_dir: str | None = None,
               force: bool = False, dry_run: bool = False) -> SubmitResult:
        """Restart a failed run from its checkpoint (``tau run resume``); ``dry_run``: the replacement as JSON."""
        ...


class BackendTarget(Protocol):
    """Where lifecycle verbs point: the name of a registered backend plus its options
    (:class:`tau_core.backends.targeting.LifecycleTarget` is one)."""

    @property
    def backend_name(self) -> str: ...

    def backend_options(self) -> dict[str, Any]: ...


def get_backend(name: str, **options: Any) -> ExecutionBackend:
    """Instantiate the registered backend called ``name``."""
    from tau_core.plugins import get_host

    registry = get_host().registry("execution_backends")
    if name not in registry:
        known = ", ".join(registry) or "none"
        raise TauError(
            f"execution backend '{name}' is not installed (installed: {known})",
            hint="install the tau meta-package (pip install tau) or the plugin that provides it",
        )
    backend: ExecutionBackend = registry[name].load()(**options)
    return backend


def backend_for(what: str | RunRef | BackendTarget, **options: Any) -> ExecutionBackend:
    """The one dispatch of every lifecycle command: a backend name, a run's ref or a target in, a backend out.

    A target contributes its own options (cluster, context, ...); ``options`` add to them.
    """
    if isinstance(what, str):
        return get_backend(what, **options)
    if isinstance(what, RunRef):
        return get_backend(what.backend, **options)
    return get_backend(what.backend_name, **{**what.backend_options(), **options})
