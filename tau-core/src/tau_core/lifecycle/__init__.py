"""One run lifecycle, several execution backends (Kubernetes, local processes).

Backends are registered through the ``tau_register_execution_backends`` hook and
looked up with :func:`backend_for` (a name, a run's ref or a target in, a backend out).
Every ``tau run`` / ``tau logs`` verb talks to a backend only through :class:`ExecutionBackend`,
so a verb behaves the same way whichever backend runs the workload.
"""

from tau_core.lifecycle.base import (
    PHASE_STATES,
    ArtifactListing,
    BackendTarget,
    ExecutionBackend,
    FailureReason,
    LogOptions,
    Phase,
    RunRef,
    RunStatus,
    RunSummary,
    SubmitRequest,
    SubmitResult,
    backend_for,
    get_backend,
)

__all__ = [
    "PHASE_STATES",
    "ArtifactListing",
    "BackendTarget",
    "ExecutionBackend",
    "FailureReason",
    "LogOptions",
    "Phase",
    "RunRef",
    "RunStatus",
    "RunSummary",
    "SubmitRequest",
    "SubmitResult",
    "backend_for",
    "get_backend",
]
