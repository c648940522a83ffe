"""The status of a local run, built from its registry record and evidence (one step per phase)."""

from __future__ import annotations

import time
from typing import Any

from tau_core.backends.local import oom
from tau_core.backends.local.registry import TERMINAL, RunDir, parse_iso
from tau_core.lifecycle.base import FailureReason, Phase, RunRef, RunStatus
from tau_core.lifecycle.details import LocalAttempt, StatusDetails, Transition

BACKEND = "local"
KIND = "local"


def _elapsed(start: str | None, end: str | None = None) -> float | None:
    a = parse_iso(start)
    if a is None:
        return None
    b = parse_iso(end) if end else time.time()
    return None if b is None else max(0.0, b - a)


def _transition_at(record: dict[str, Any], state: str) -> str | None:
    for t in reversed(record.get("transitions") or []):
        if t.get("state") == state:
            return str(t.get("at"))
    return None


def _start_phases(run: RunDir, record: dict[str, Any], sup_alive: bool, terminal: bool) -> list[Phase]:
    sup = record.get("supervisor") or {}
    phases = [Phase("Submitted", "done", f"local run {run.run_id} registered",
                    elapsed_seconds=_elapsed(record.get("created_at"), _transition_at(record, "Started")))]
    if sup.get("pid"):
        phases.append(Phase("Started", "done", f"supervisor pid {sup['pid']}"
                            + ("" if sup_alive or terminal else " (gone)")))
    elif terminal:
        phases.append(Phase("Started", "warning", "the supervisor never started", hint=f"see {run.supervisor_log}"))
    else:
        phases.append(Phase("Started", "pending", "waiting for the supervisor"))
    from tau_core.backends.local.ray import status_phase

    ray_phase = status_phase(record.get("ray"))
    if ray_phase is not None:
        phases.append(ray_phase)
    return phases


def _running_phase(record: dict[str, Any], attempt: int, max_attempts: int, terminal: bool) -> Phase:
    state = str(record.get("state"))
    attempts = record.get("attempts") or []
    if state == "Running":
        pid = (record.get("child") or {}).get("pid")
        return Phase("Running", "active", f"attempt {attempt}/{max_attempts}, pid {pid}",
                     elapsed_seconds=_elapsed(record.get("started_at")))
    if state == "BackingOff":
        return Phase("Running", "warning", str(record.get("message", "")),
                     hint="the supervisor retries automatically (resilience.*)")
    if attempts:
        total = sum(filter(None, (_elapsed(a.get("started_at"), a.get("finished_at")) for a in attempts)))
        last = attempts[-1] if isinstance(attempts[-1], dict) else {}
        if last.get("interrupted"):
            return Phase("Running", "warning", f"ran {len(attempts)} attempt(s); attempt {last.get('attempt')} "
                         f"was interrupted ({last.get('reason')}): {last.get('message')}", elapsed_seconds=total)
        return Phase("Running", "done", f"ran {len(attempts)} attempt(s)", elapsed_seconds=total)
    if terminal:
        return Phase("Running", "skipped", "no attempt ran")
    return Phase("Running", "pending", "not started")


def _outcome_phase(run: RunDir, record: dict[str, Any]) -> Phase:
    state = str(record.get("state"))
    message = str(record.get("message") or "")
    if state == "Succeeded":
        return Phase("Completed", "done", message or "exit code 0")
    if state == "Failed":
        return Phase("Failed", "warning", f"{record.get('reason') or 'Unknown'}: {message}",
                     hint=f"tau run logs {run.run_id} --tail 50")
    if state == "Cancelled":
        return Phase("Cancelled", "warning", message or "cancelled")
    return Phase("Completed", "pending", "running")


def _evidence_phase(record: dict[str, Any], evidence: dict[str, Any], terminal: bool) -> Phase:
    if not record.get("history"):
        return Phase("Evidence", "skipped", "no metrics.history in the config")
    rows = int(evidence.get("rows") or 0)
    chunks = len(evidence.get("imported") or {})
    store = evidence.get("store", "")
    if evidence.get("unavailable"):
        return Phase("Evidence", "warning", f"not imported: {evidence['unavailable']}",
                     hint="pip install taugrid-portal, then re-run to collect evidence")
    if evidence.get("error"):
        return Phase("Evidence", "warning", f"{rows} rows from {chunks} chunk(s); {evidence['error']}")
    if terminal and record.get("evidence_done"):
        detail = f"{rows} rows from {chunks} chunk(s) in {store}"
        detail += "; terminal tau/run_status marker written" if evidence.get("marker") else ""
        if evidence.get("stellar"):
            detail += f"; Stellar: {evidence['stellar']}"
        return Phase("Evidence", "done" if evidence.get("marker") else "warning", detail,
                     hint=None if evidence.get("stellar") else evidence.get("stellar_error"))
    if chunks or str(record.get("state")) == "Running":
        return Phase("Evidence", "active", f"{rows} rows from {chunks} chunk(s) imported into {store}")
    return Phase("Evidence", "pending", "waiting for metric chunks")


def _failure(record: dict[str, Any]) -> FailureReason:
    state = str(record.get("state"))
    if state == "Succeeded":
        return FailureReason.COMPLETED
    if state == "Failed":
        try:
            return FailureReason.parse(str(record.get("reason") or "Unknown"))
        except ValueError:
            return FailureReason.UNKNOWN
    return FailureReason.UNKNOWN if state == "Cancelled" else FailureReason.RUNNING


def _extra(run: RunDir, record: dict[str, Any], evidence: dict[str, Any], sup_alive: bool) -> StatusDetails:
    attempts = record.get("attempts") or []
    last = attempts[-1] if attempts else {}
    exit_code, signal = record.get("exit_code", last.get("exit_code")), record.get("signal", last.get("signal"))
    return StatusDetails(
        backend=BACKEND, exists=True, state=str(record.get("state")), run_dir=str(run.path),
        output_dir=_text(record.get("output_dir")), log_path=_text(record.get("log_path")),
        exit_code=None if exit_code is None else int(exit_code), signal=_text(signal),
        pid=(record.get("child") or {}).get("pid"), supervisor_pid=(record.get("supervisor") or {}).get("pid"),
        supervisor_alive=sup_alive, evidence_done=bool(record.get("evidence_done")),
        stellar=_text(evidence.get("stellar")), store=_text(evidence.get("store")),
        created_at=_text(record.get("created_at")), finished_at=_text(record.get("finished_at")),
        name=_text(record.get("name")), attempts=tuple(LocalAttempt.from_record(a) for a in attempts),
        transitions=tuple(Transition.from_record(t) for t in record.get("transitions") or []),
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def build_status(run: RunDir, record: dict[str, Any], evidence: dict[str, Any]) -> RunStatus:
    state = str(record.get("state"))
    attempts = record.get("attempts") or []
    max_attempts = int(record.get("max_attempts") or 1)
    attempt = int(record.get("attempt") or len(attempts) or 1)
    sup = record.get("supervisor") or {}
    sup_alive = bool(sup.get("pid")) and oom.alive(sup.get("pid"), sup.get("start_ticks"))
    # over once the process ended *and* its evidence is written (or nobody is left to write it), so
    # `tau run status --watch` and other watchers end with the Evidence phase settled
    terminal = state in TERMINAL and (bool(record.get("evidence_done")) or not sup_alive)
    phases = [*_start_phases(run, record, sup_alive, terminal), _running_phase(record, attempt, max_attempts, terminal),
              _outcome_phase(run, record), _evidence_phase(record, evidence, terminal)]
    retried = max_attempts > 1 or len(attempts) > 1
    return RunStatus(
        ref=RunRef(name=run.run_id, backend=BACKEND), kind=KIND, phases=phases, terminal=terminal,
        succeeded=state == "Succeeded", failure=_failure(record),
        attempt=attempt if retried else None, max_attempts=max_attempts if retried else None,
        message=str(record.get("message") or ""), extra=_extra(run, record, evidence, sup_alive))
