"""Lifecycle rows from what the API server shows: state derivation, failure enrichment, idempotent ids.

Pure functions over the JSON of Jobs, RayJobs, Kueue Workloads and Pods (no I/O).  Per observed workload,
:func:`observe` returns a ``submitted`` receipt (reason ``initial-observation``) and the current state:

* Job: ``Complete`` → succeeded, ``Failed`` → failed, deleting → cancelled, ``active > 0`` → running,
  otherwise queued (``suspended``: waiting for Kueue admission), or admitted once its Workload is.
* RayJob: ``deploymentStatus`` Complete/Succeeded → succeeded, Failed → failed, deleting → cancelled,
  Running → running, otherwise queued (admitted once its Workload is).

A failed row carries the best pod evidence (none < waiting < pod reason < terminated < fatal: OOMKilled or a
non-zero exit) as ``<JobReason>/<cause>`` and a one-line message, and its ``observed_at`` is offset by the
evidence's rank in milliseconds, so a query's ``arg_max`` prefers the best evidence.  Pods are read for
their status only: never their spec, env or logs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from tau_core import keys
from tau_core.history import LifecycleRow, lifecycle_json

Obj = Mapping[str, Any]
MESSAGE_LIMIT = 512
#: a ``submitted`` receipt also leaves out what changes after submission (Kueue's unsuspend bumps generation)
SUBMITTED_EXCLUDED = ("kueue_admitted_time", "pod_start_time", "completion_time", "cluster_queue", "generation")
ID_EXCLUDED = ("observed_at", "observation_id", "resource_version")
WAITING, POD_REASON, TERMINATED, FATAL = 1, 2, 3, 4


@attrs.frozen
class Scope:
    """Where the recorder runs: the observability cluster name, the namespace and fallbacks."""

    cluster: str
    namespace: str
    workspace_id: str = ""
    result_scope: str = ""


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def _cond(obj: Obj, ctype: str) -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype and cond.get("status") == "True":
            found: Mapping[str, Any] = cond
            return found
    return None


def owned_by(obj: Obj, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in _meta(obj).get("ownerReferences") or [])


def workload_of(owner: Obj, workloads: Sequence[Obj]) -> Obj | None:
    uid = str(_meta(owner).get("uid") or "")
    return next((w for w in workloads if uid and owned_by(w, uid)), None)


def pods_of(kind: str, owner: Obj, pods: Sequence[Obj]) -> list[Obj]:
    name = str(_meta(owner).get("name") or "")
    if kind == "Job":
        uid = str(_meta(owner).get("uid") or "")
        return [p for p in pods if owned_by(p, uid) or (_meta(p).get("labels") or {}).get(keys.JOB_NAME) == name]
    cluster = str((owner.get("status") or {}).get("rayClusterName") or "")
    return [p for p in pods if cluster and (_meta(p).get("labels") or {}).get("ray.io/cluster") == cluster]


def _base(kind: str, obj: Obj, workload: Obj | None, scope: Scope) -> LifecycleRow:
    meta = _meta(obj)
    labels: Mapping[str, str] = meta.get("labels") or {}
    ann: Mapping[str, str] = meta.get("annotations") or {}
    name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    project = ann.get(keys.STELLAR_PROJECT_VALUE) or labels.get(keys.STELLAR_PROJECT, "")
    experiment = ann.get(keys.STELLAR_EXPERIMENT_ID) or labels.get(keys.STELLAR_EXPERIMENT, "")
    source = ann.get(keys.EXPERIMENT_SOURCE, "")
    admission = ((workload or {}).get("status") or {}).get("admission") or {}
    admitted = _cond(workload, "Admitted") if workload else None
    return LifecycleRow(
        run_id=labels.get(keys.RUN_ID) or labels.get(keys.JOB) or name,
        durable_id=f"{scope.cluster}/{scope.namespace}/{uid or kind + '/' + name}",
        workspace_id=ann.get(keys.WORKSPACE_ID) or labels.get(keys.WORKSPACE) or scope.workspace_id,
        result_scope=ann.get(keys.RESULT_SCOPE) or scope.result_scope, project=project,
        run_group_id=ann.get(keys.STELLAR_GROUP_VALUE) or labels.get(keys.STELLAR_GROUP, ""),
        owning_resource_kind=kind, owning_resource_name=name, namespace=scope.namespace, cluster=scope.cluster,
        local_queue=labels.get(keys.KUEUE_QUEUE_NAME) or str(((workload or {}).get("spec") or {}).get("queueName")
                                                             or ""),
        cluster_queue=str(admission.get("clusterQueue") or ""),
        workload_kind=labels.get(keys.WORKLOAD_KIND) or kind.lower(), resource_uid=uid,
        resource_version=str(meta.get("resourceVersion") or ""), generation=int(meta.get("generation") or 0),
        submit_time=_time(meta.get("creationTimestamp")), created_time=_time(meta.get("creationTimestamp")),
        kueue_admitted_time=_time(admitted.get("lastTransitionTime")) if admitted else None,
        pod_start_time=_time((obj.get("status") or {}).get("startTime")),
        completion_time=_time((obj.get("status") or {}).get("completionTime")
                              or (obj.get("status") or {}).get("endTime")),
        artifact_uri=ann.get(keys.ARTIFACT_STORE, ""), checkpoint_uri=ann.get(keys.CHECKPOINT_ARTIFACT, ""),
        image=ann.get(keys.IMAGE, ""), image_digest=ann.get(keys.IMAGE_DIGEST, ""),
        config_hash=ann.get(keys.CONFIG_HASH, ""), code_sha=ann.get(keys.CODE_SHA, ""),
        tau_command=ann.get(keys.TAU_COMMAND, ""), result_path=ann.get(keys.RESULT_PATH, ""),
        result_pvc=ann.get(keys.RESULT_PVC, ""),
        experiment_tracking="tracked" if source and (project or experiment) else "untracked",
        experiment_source=source, controller_version=ann.get(keys.CONTROLLER_VERSION, ""),
    )


def _job_state(obj: Obj, row: LifecycleRow) -> tuple[str, str, str, datetime | None]:
    status = obj.get("status") or {}
    for ctype, state in (("Complete", "succeeded"), ("Failed", "failed")):
        cond = _cond(obj, ctype)
        if cond is not None:
            when = row.completion_time or _time(cond.get("lastTransitionTime"))
            return state, str(cond.get("reason") or ctype), str(cond.get("message") or ""), when
    if _meta(obj).get("deletionTimestamp"):
        return ("cancelled", "Deleting", "workload deletion observed before terminal completion",
                _time(_meta(obj).get("deletionTimestamp")))
    if int(status.get("active") or 0) > 0:
        return "running", "", "", row.pod_start_time or row.created_time
    if (obj.get("spec") or {}).get("suspend"):
        return "queued", "suspended", "waiting for Kueue admission", row.created_time
    return "queued", "", "", row.created_time


def _rayjob_state(obj: Obj, row: LifecycleRow) -> tuple[str, str, str, datetime | None]:
    status = obj.get("status") or {}
    deployment = str(status.get("jobDeploymentStatus") or "").lower()
    message = str(status.get("message") or "")
    if deployment in ("complete", "completed", "succeeded"):
        return "succeeded", str(status.get("jobStatus") or "Complete"), message, row.completion_time
    if deployment == "failed":
        return "failed", str(status.get("reason") or "Failed"), message, row.completion_time
    if _meta(obj).get("deletionTimestamp"):
        return ("cancelled", "Deleting", "workload deletion observed before terminal completion",
                _time(_meta(obj).get("deletionTimestamp")))
    if deployment == "running":
        return "running", "", "", row.pod_start_time or row.created_time
    if (obj.get("spec") or {}).get("suspend"):
        return "queued", "suspended", "waiting for Kueue admission", row.created_time
    return "queued", "", "", row.created_time


def _evidence(pod: Obj) -> list[tuple[int, str, str, int | None, str]]:
    """``(rank, container, cause, exit code, detail)`` of each container of ``pod`` (status only)."""
    status = pod.get("status") or {}
    found: list[tuple[int, str, str, int | None, str]] = []
    if status.get("reason"):
        found.append((POD_REASON, "", str(status["reason"]), None, str(status.get("message") or "")))
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        name = str(cs.get("name") or "")
        for state in (cs.get("state") or {}, cs.get("lastState") or {}):
            if "terminated" in state:
                term = state["terminated"] or {}
                code = int(term.get("exitCode") or 0)
                cause = str(term.get("reason") or ("Error" if code else "Completed"))
                rank = FATAL if cause == "OOMKilled" or code != 0 else TERMINATED
                found.append((rank, name, cause, code, str(term.get("message") or "")))
            elif "waiting" in state and (state["waiting"] or {}).get("reason"):
                wait = state["waiting"]
                found.append((WAITING, name, str(wait["reason"]), None, str(wait.get("message") or "")))
    return found


def enrich(row: LifecycleRow, pods: Sequence[Obj]) -> LifecycleRow:
    """A failed row with the best pod evidence folded into reason, message and ``observed_at``."""
    ranked = [(rank, str(_meta(p).get("name") or ""), c, cause, code, detail)
              for p in pods for rank, c, cause, code, detail in _evidence(p)]
    if not ranked:
        return row
    ranked.sort(key=lambda e: (-e[0], e[1], e[2]))
    rank, pod, container, cause, code, detail = ranked[0]
    more = len({(p, c) for r, p, c, *_ in ranked[1:] if r == FATAL and (p, c) != (pod, container)})
    text = f"pod {pod}" + (f" container {container}" if container else "") + f": {cause}"
    text += f" (exit code {code})" if code is not None else ""
    text += f": {detail}" if detail else ""
    text += f" [+{more} more failed container(s)]" if more else ""
    text += f" — {row.message}" if row.message else ""
    when = (row.observed_at + timedelta(milliseconds=rank)) if row.observed_at else None
    return attrs.evolve(row, reason=f"{row.reason}/{cause}", message=text[:MESSAGE_LIMIT], observed_at=when)


def observation_id(row: LifecycleRow) -> str:
    """sha256 over the row minus its observation time, id and resourceVersion (and, for a ``submitted``
    receipt, minus what only later states know)."""
    doc = lifecycle_json(row)
    for name in ID_EXCLUDED + (SUBMITTED_EXCLUDED if row.state == "submitted" else ()):
        doc.pop(name, None)
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def observe(kind: str, obj: Obj, workloads: Sequence[Obj], pods: Sequence[Obj], scope: Scope) -> list[LifecycleRow]:
    """The ``submitted`` receipt and the current state of one Job or RayJob, with their observation ids."""
    workload = workload_of(obj, workloads)
    base = _base(kind, obj, workload, scope)
    state, reason, message, when = (_job_state if kind == "Job" else _rayjob_state)(obj, base)
    if state == "queued" and workload is not None and base.kueue_admitted_time is not None:
        state, reason, message, when = "admitted", "KueueAdmitted", "Kueue Workload admitted", base.kueue_admitted_time
    current = attrs.evolve(base, state=state, reason=reason, message=message, observed_at=when or base.created_time)
    if state == "failed":
        current = enrich(current, pods_of(kind, obj, pods))
    receipt = attrs.evolve(base, state="submitted", reason="initial-observation", message="",
                           observed_at=base.created_time)
    return [attrs.evolve(r, observation_id=observation_id(r)) for r in (receipt, current)]
