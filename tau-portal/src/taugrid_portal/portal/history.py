"""The Runs board's durable tier: the runs the lifecycle recorder kept in Kusto (``TauExpRunLifecycle``), read
through the ``kusto`` history source (``tau_register_history_sources``), merged with the live runs.

Degradation: history off → ``live-only``; on but no endpoint, no history source or a failing query →
``history-unavailable`` with the reason; otherwise ``available``, and runs whose workloads are gone appear as
durable-only rows.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import attrs

from tau_core.errors import TauError
from tau_core.history import LifecycleRow, RunQuery, history_source, transitions

#: recorded state -> the Runs board's status words (the live board's Job conditions)
STATUS = {"succeeded": "Complete", "failed": "Failed", "cancelled": "Cancelled", "running": "Running",
          "admitted": "Pending", "queued": "Pending", "submitted": "Pending"}


@attrs.frozen
class DurableRuns:
    state: str  # live-only | history-unavailable | available
    diagnostic: str = ""
    latest: tuple[LifecycleRow, ...] = ()


def durable_runs(config: Any, namespace: str, cluster: str) -> DurableRuns:
    """The latest recorded row of every run in ``namespace`` (terminal rows win), or why there are none."""
    history, kusto = config.run_history, config.kusto
    if not history.enabled:
        return DurableRuns("live-only")
    if not kusto.endpoint:
        return DurableRuns("history-unavailable", "durable run history needs --kusto-endpoint; showing live runs "
                                                  "only")
    try:
        source = history_source("kusto", endpoint=kusto.endpoint, database=kusto.database, table=history.table)
        try:
            rows = source.run_history(RunQuery("", namespace=namespace, cluster=cluster, limit=history.limit))
        finally:
            source.close()
    except TauError as exc:
        return DurableRuns("history-unavailable", f"durable run history is unavailable ({exc.message}); showing "
                                                  "live runs only")
    by: dict[str, list[LifecycleRow]] = {}
    for row in rows:
        by.setdefault(row.durable_id, []).append(row)
    return DurableRuns("available", "", tuple(transitions(v)[-1] for v in by.values()))


def durable_row(row: LifecycleRow) -> dict[str, Any]:
    """A Runs-board row for a run whose workload is gone."""
    created = row.created_time.isoformat().replace("+00:00", "Z") if row.created_time else ""
    return {"name": row.owning_resource_name, "kind": row.owning_resource_kind, "runId": row.run_id,
            "namespace": row.namespace, "cluster": row.cluster, "resourceUid": row.resource_uid,
            "durableId": row.durable_id, "source": "durable", "status": STATUS.get(row.state, row.state),
            "created": created, "age": "", "queue": row.local_queue, "experimentTracking": row.experiment_tracking,
            "experimentPath": "", "executionTarget": "", "attempt": None, "historyReason": row.reason}


def ray_history(config: Any, namespace: str, cluster: str) -> dict[str, Any]:
    """The Ray board's durable tier: the recorded RayJobs (latest row each, deleted ones included), each with
    the path of its timeline, and the same ``historyState`` words as the Runs board."""
    durable = durable_runs(config, namespace, cluster)
    rows = [{**durable_row(r), "historyPath": f"/api/portal/ray/history/{quote(r.resource_uid, safe='')}"}
            for r in durable.latest if r.owning_resource_kind == "RayJob" and r.resource_uid]
    rows.sort(key=lambda r: (r["created"], r["name"]), reverse=True)
    return {"historyState": durable.state, "historyDiagnostic": durable.diagnostic, "history": rows}
