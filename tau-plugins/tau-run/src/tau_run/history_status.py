"""``tau run status`` for a run whose Kubernetes objects are gone: its recorded lifecycle, read back through the
``kusto`` history source (``tau_register_history_sources``), one block per attempt (durable id)."""

from __future__ import annotations

from typing import Any

import attrs

from tau_core.history import LifecycleRow, RunQuery, history_source, transitions


@attrs.frozen
class Attempt:
    durable_id: str
    kind: str
    name: str
    uid: str
    rows: tuple[LifecycleRow, ...]

    @property
    def state(self) -> str:
        return self.rows[-1].state if self.rows else ""


@attrs.frozen
class RecordedRun:
    name: str
    namespace: str
    where: str
    attempts: tuple[Attempt, ...]


def recorded_run(name: str, namespace: str, *, endpoint: str, database: str, cluster: str = "") -> RecordedRun:
    """The run's attempts, oldest first, each with its transitions (repeats collapsed)."""
    source = history_source("kusto", endpoint=endpoint, database=database)
    try:
        rows = source.run_history(RunQuery(name, namespace=namespace, cluster=cluster))
    finally:
        source.close()
    groups: dict[str, list[LifecycleRow]] = {}
    for row in rows:
        groups.setdefault(row.durable_id, []).append(row)
    attempts = [Attempt(d, r[0].owning_resource_kind, r[0].owning_resource_name, r[0].resource_uid,
                        tuple(transitions(r))) for d, r in groups.items()]
    attempts.sort(key=lambda a: a.rows[0].observed_at.isoformat() if a.rows and a.rows[0].observed_at else "")
    return RecordedRun(name, namespace, f"Kusto {database}.TauExpRunLifecycle at {endpoint}", tuple(attempts))


def _when(row: LifecycleRow) -> str:
    return row.observed_at.isoformat(timespec="seconds").replace("+00:00", "Z") if row.observed_at else "-"


def history_text(run: RecordedRun) -> str:
    lines = [f"Run: {run.name} (namespace {run.namespace}): its objects are gone; recorded history from {run.where}"]
    for i, attempt in enumerate(run.attempts, 1):
        lines.append(f"Attempt {i}: {attempt.kind} {attempt.name} (uid {attempt.uid or '-'})")
        for row in attempt.rows:
            detail = " ".join(x for x in (row.reason, f"- {row.message}" if row.message else "") if x)
            lines.append(f"  {_when(row):<21} {row.state:<10} {detail}".rstrip())
    last = run.attempts[-1] if run.attempts else None
    lines.append(f"Result: {last.state if last else 'unknown'}" + (f" ({last.rows[-1].reason})"
                                                                   if last and last.rows[-1].reason else ""))
    return "\n".join(lines)


def history_doc(run: RecordedRun) -> dict[str, Any]:
    return {"name": run.name, "namespace": run.namespace, "exists": False, "source": "kusto", "where": run.where,
            "state": run.attempts[-1].state if run.attempts else "",
            "attempts": [{"durableId": a.durable_id, "kind": a.kind, "name": a.name, "uid": a.uid, "state": a.state,
                          "transitions": [{"state": r.state, "reason": r.reason, "message": r.message,
                                           "observedAt": _when(r)} for r in a.rows]} for a in run.attempts]}
