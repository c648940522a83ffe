"""The backend-specific details of a :class:`~tau_core.lifecycle.base.RunStatus` (``RunStatus.extra``), typed.

One attrs class carries what either built-in backend observes; every field is optional, so a backend fills
what it knows and a third-party backend may leave it empty. The Kubernetes backend fills the cluster address,
the queue, the pods, the failure evidence, a coming retry and the diagnostic commands; the local backend
fills the run directory, the process facts and the attempt/transition history of its state file, which it
converts here with :meth:`LocalAttempt.from_record` and :meth:`Transition.from_record` (unknown keys dropped).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs


def _opt_int(value: Any) -> int | None:
    return None if value is None or isinstance(value, bool) else int(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


@attrs.frozen(kw_only=True)
class PodSummary:
    """One pod of a Kubernetes run."""

    name: str | None
    phase: str | None = None
    node: str | None = None
    containers: tuple[str | None, ...] = ()
    restarts: int = 0


@attrs.frozen(kw_only=True)
class PendingRetry:
    """A retry that is coming: its owner (``controller`` or ``cli``), the next attempt of ``max`` and the
    seconds left of the backoff."""

    owner: str
    attempt: int
    max: int
    in_seconds: float


@attrs.frozen(kw_only=True)
class Transition:
    """One state change of a local run."""

    state: str
    at: str | None = None
    detail: str = ""

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Transition:
        return cls(state=str(record.get("state")), at=_opt_str(record.get("at")),
                   detail=str(record.get("detail") or ""))


@attrs.frozen(kw_only=True)
class LocalAttempt:
    """One finished attempt of a local run, as its supervisor recorded it."""

    attempt: int | None = None
    state: str | None = None
    reason: str | None = None
    message: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    peak_rss: int | None = None
    interrupted: bool = False
    resume_from: str | None = None
    retry_reason: str | None = None
    publication_id: str | None = None
    published: tuple[str, ...] = ()

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> LocalAttempt:
        return cls(attempt=_opt_int(record.get("attempt")), state=_opt_str(record.get("state")),
                   reason=_opt_str(record.get("reason")), message=str(record.get("message") or ""),
                   started_at=_opt_str(record.get("started_at")), finished_at=_opt_str(record.get("finished_at")),
                   exit_code=_opt_int(record.get("exit_code")), signal=_opt_str(record.get("signal")),
                   peak_rss=_opt_int(record.get("peak_rss")), interrupted=bool(record.get("interrupted")),
                   resume_from=_opt_str(record.get("resume_from")),
                   retry_reason=_opt_str(record.get("retry_reason")),
                   publication_id=_opt_str(record.get("publication_id")),
                   published=tuple(str(n) for n in record.get("published") or ()))


@attrs.define(kw_only=True)
class StatusDetails:
    """``RunStatus.extra``: what the backend observed beyond the phase tree (all optional)."""

    exists: bool | None = None
    """Whether the run's workload exists (``None``: the backend did not say)."""
    # -- Kubernetes ------------------------------------------------------------------------------------------
    namespace: str | None = None
    context: str | None = None
    server: str | None = None
    queue: str | None = None
    workspace: str | None = None
    config_hash: str | None = None
    submission_id: str | None = None
    retry_reason: str | None = None
    failure_evidence: str | None = None
    """What the cluster recorded as the failure's cause (events, pod status); empty when nothing was seen."""
    evidence_checked: bool = False
    """The backend looked for failure evidence (so an empty ``failure_evidence`` means none was observed)."""
    retry_owner: str | None = None
    retry_pending: PendingRetry | None = None
    pods: tuple[PodSummary, ...] = ()
    workloads: tuple[str, ...] = ()
    diagnostic_commands: tuple[str, ...] = ()
    run_profile: Any = None
    """``tau run status --run-profile``: queue, runtime, artifacts and GPU facts (see tau_core.run_profile)."""
    # -- local -----------------------------------------------------------------------------------------------
    backend: str | None = None
    state: str | None = None
    run_dir: str | None = None
    output_dir: str | None = None
    log_path: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    pid: int | None = None
    supervisor_pid: int | None = None
    supervisor_alive: bool | None = None
    evidence_done: bool | None = None
    stellar: str | None = None
    store: str | None = None
    created_at: str | None = None
    finished_at: str | None = None
    name: str | None = None
    attempts: tuple[LocalAttempt, ...] = ()
    transitions: tuple[Transition, ...] = ()

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | StatusDetails | None) -> StatusDetails:
        """The typed details of a plain mapping (what a third-party backend may still pass as ``extra``):
        known keys are converted (``retry_pending`` with ``inSeconds``, pods, attempts, transitions), unknown
        keys are dropped."""
        if isinstance(values, StatusDetails):
            return values
        known = {f.name for f in attrs.fields(cls)}
        data = {k: v for k, v in (values or {}).items() if k in known}
        pending = data.get("retry_pending")
        if isinstance(pending, Mapping):
            data["retry_pending"] = PendingRetry(
                owner=str(pending["owner"]), attempt=int(pending["attempt"]), max=int(pending["max"]),
                in_seconds=float(pending.get("inSeconds", pending.get("in_seconds", 0.0))))
        data["pods"] = tuple(p if isinstance(p, PodSummary) else PodSummary(
            name=p.get("name"), phase=p.get("phase"), node=p.get("node"),
            containers=tuple(p.get("containers") or ()), restarts=int(p.get("restarts") or 0))
            for p in data.get("pods") or ())
        data["attempts"] = tuple(a if isinstance(a, LocalAttempt) else LocalAttempt.from_record(a)
                                 for a in data.get("attempts") or ())
        data["transitions"] = tuple(t if isinstance(t, Transition) else Transition.from_record(t)
                                    for t in data.get("transitions") or ())
        for key in ("workloads", "diagnostic_commands"):
            data[key] = tuple(str(v) for v in data.get(key) or ())
        return cls(**data)
