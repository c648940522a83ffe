"""Automatic retry policy (``resilience.*``; reference run-config-and-rendering §1.13, §4.3).

Pure functions: the policy read from a run config, exponential backoff, ``retry_on`` matching
(case-insensitive), the environment injected into a retried attempt, and the Kubernetes Event
recorded for each attempt.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tau_core import keys
from tau_core.errors import ConfigError
from tau_core.lifecycle.base import FailureReason

if TYPE_CHECKING:
    from tau_core.config.run_model import RunConfig

DEFAULT_RETRY_ON = ("Preempted", "Evicted")
RETRYABLE = (FailureReason.OOM_KILLED, FailureReason.PREEMPTED, FailureReason.EVICTED)
DEFAULT_BACKOFF_INITIAL = 30.0
DEFAULT_BACKOFF_MAX = 300.0
EVENT_REPORTER = "tau-cli"

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(value: Any, field: str) -> float:
    """Seconds from ``30s``, ``5m``, ``1h30m``, ``250ms`` or a bare number of seconds."""
    if isinstance(value, bool):
        raise ConfigError(f"{field} must be a duration such as 30s or 5m, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ConfigError(f"{field} must not be negative")
        return float(value)
    text = str(value).strip()
    if not text:
        raise ConfigError(f"{field} must be a duration such as 30s or 5m")
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        pos = m.end()
        total += float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    if pos != len(text):
        raise ConfigError(f"{field} \"{text}\" is not a duration; use a value such as 30s, 5m or 1h")
    return total


def checkpoint_path(name: str, config: RunConfig | None = None) -> str:
    configured = config.resilience.checkpoint_path if config is not None else None
    return str(configured or f"/data/checkpoints/finetunes/{name}")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 0
    retry_on: tuple[str, ...] = DEFAULT_RETRY_ON
    backoff_initial: float = DEFAULT_BACKOFF_INITIAL
    backoff_max: float = DEFAULT_BACKOFF_MAX
    checkpoint_path: str = ""

    @classmethod
    def from_config(cls, name: str, config: RunConfig) -> RetryPolicy:
        r = config.resilience
        max_retries = r.max_retries or 0
        if max_retries < 0:
            raise ConfigError("resilience.max_retries must not be negative")
        retry_on = list(DEFAULT_RETRY_ON) if r.retry_on is None else r.retry_on
        initial = parse_duration(r.backoff_initial or "30s", "resilience.backoff_initial")
        cap = parse_duration(r.backoff_max or "5m", "resilience.backoff_max")
        return cls(max_retries, tuple(str(x) for x in retry_on), initial, max(cap, initial),
                   checkpoint_path(name, config))

    @property
    def enabled(self) -> bool:
        return self.max_retries > 0

    def allows(self, reason: FailureReason) -> bool:
        """True when ``reason`` is in ``retry_on`` (case-insensitive)."""
        wanted = {r.strip().lower() for r in self.retry_on}
        return reason.value.lower() in wanted

    def backoff(self, attempt: int) -> float:
        """Delay before retry ``attempt`` (1-based): initial × 2^(attempt-1), capped at max."""
        delay: float = self.backoff_initial * (2 ** max(0, attempt - 1))
        return min(delay, self.backoff_max)

    def env(self, attempt: int, reason: FailureReason) -> dict[str, str]:
        """Environment injected into retry ``attempt``."""
        return {
            "TAU_RESUME_FROM": self.checkpoint_path,
            "TAU_RETRY_ATTEMPT": str(attempt),
            "TAU_RETRY_MAX": str(self.max_retries),
            "TAU_RETRY_REASON": reason.value,
        }


def retry_event(*, namespace: str, name: str, attempt: int, max_retries: int, reason: FailureReason,
                signature: str, kind: str, uid: str | None, outcome: str = "attempt",
                now: datetime | None = None) -> dict[str, Any]:
    """The ``v1`` Event recorded for a retry attempt, exhaustion (``exhausted``) or success (``succeeded``)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    suffix, event_reason, etype = {
        "attempt": (f"retry-{attempt}", RETRY_ATTEMPT_REASON, "Warning"),
        "exhausted": (f"retries-exhausted-{max_retries}", "RayJobRetriesExhausted", "Warning"),
        "succeeded": (f"retry-succeeded-{attempt}", "RayJobRetrySucceeded", "Normal"),
    }[outcome]
    api_version = "batch/v1" if kind == "Job" else "ray.io/v1"
    involved: dict[str, Any] = {"kind": kind, "apiVersion": api_version, "namespace": namespace, "name": name}
    if uid:
        involved["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}-{suffix}", "namespace": namespace},
        "involvedObject": involved,
        "reason": event_reason,
        "action": "Retry",
        "type": etype,
        "message": f"submission_id={name} attempt={attempt}/{max_retries} failure={reason.value} "
                   f"signature={signature[:160]}",
        "reportingComponent": EVENT_REPORTER,
        "reportingInstance": EVENT_REPORTER,
        "source": {"component": EVENT_REPORTER},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


# -- retry ownership (server-side retry by the Tau controller) -------------------------------

#: TauCluster condition with which the Tau controller advertises that it retries runs it owns.
RETRY_CAPABILITY = "ServerSideRetry"
OWNER_CONTROLLER = "controller"
OWNER_CLI = "cli"
#: ``tau.azure.com/retry-state`` of a controller's retry record (the ``<run>-retry-<n>`` Event): the next attempt
#: is recorded and not yet created (``pending``), created (``submitted``), or must never be (``cancelled``: the
#: run was deleted by someone else, or ``tau run cancel`` stopped it between two attempts).
RETRY_STATE_PENDING, RETRY_STATE_SUBMITTED, RETRY_STATE_CANCELLED = "pending", "submitted", "cancelled"
#: the reason of a retry-attempt Event (see :func:`retry_event`)
RETRY_ATTEMPT_REASON = "RayJobAttempt"
_SERVER_META = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink",
                "deletionTimestamp", "deletionGracePeriodSeconds")
_JOB_CONTROLLER_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name",
                          "batch.kubernetes.io/job-name")


def policy_annotation(policy: RetryPolicy) -> str:
    """``tau.azure.com/retry-policy``: the policy a retry owner applies (stable JSON)."""
    import json

    return json.dumps({"maxRetries": policy.max_retries, "retryOn": list(policy.retry_on),
                       "backoffInitialSeconds": policy.backoff_initial, "backoffMaxSeconds": policy.backoff_max,
                       "checkpointPath": policy.checkpoint_path}, sort_keys=True, separators=(",", ":"))


def policy_from_annotation(text: str | None) -> RetryPolicy | None:
    """The policy stamped on a workload, or None when absent or unreadable."""
    import json

    try:
        data = json.loads(text or "")
        return RetryPolicy(int(data["maxRetries"]), tuple(str(r) for r in data.get("retryOn") or DEFAULT_RETRY_ON),
                           float(data.get("backoffInitialSeconds", DEFAULT_BACKOFF_INITIAL)),
                           float(data.get("backoffMaxSeconds", DEFAULT_BACKOFF_MAX)),
                           str(data.get("checkpointPath") or ""))
    except (ValueError, TypeError, KeyError):
        return None


def retry_owner(tau_cluster: Mapping[str, Any] | None) -> str:
    """``controller`` when the TauCluster advertises server-side retry, current for its generation; else ``cli``."""
    if not tau_cluster:
        return OWNER_CLI
    generation = (tau_cluster.get("metadata") or {}).get("generation")
    for cond in (tau_cluster.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == RETRY_CAPABILITY:
            current = cond.get("observedGeneration") == generation
            return OWNER_CONTROLLER if cond.get("status") == "True" and current else OWNER_CLI
    return OWNER_CLI


def next_attempt(workload: Mapping[str, Any], *, attempt: int, reason: FailureReason, policy: RetryPolicy,
                 submission_id: str, publication_id: str | None = None,
                 pod_template: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The next attempt of ``workload`` from its own spec: server fields and status removed, suspended for Kueue,
    the attempt environment and annotations updated, fresh submission (and publication) ids.

    ``pod_template`` (a Job's template as first submitted, e.g. from its Kueue Workload) replaces the node
    placement Kueue injected at admission.
    """
    import copy
    import json

    obj = copy.deepcopy(dict(workload))
    obj.pop("status", None)
    meta = obj.setdefault("metadata", {})
    for key in _SERVER_META:
        meta.pop(key, None)
    annotations = meta.setdefault("annotations", {})
    old_submission = annotations.get(keys.SUBMISSION_ID)
    old_publication = annotations.get(keys.ARTIFACT_PUBLICATION_ID)
    spec = obj.setdefault("spec", {})
    if obj.get("kind") == "Job":
        spec.pop("selector", None)
        for labels in (meta.get("labels") or {}, ((spec.get("template") or {}).get("metadata") or {}).get("labels")
                       or {}):
            for key in _JOB_CONTROLLER_LABELS:
                labels.pop(key, None)
        if pod_template:
            pod_spec = spec.setdefault("template", {}).setdefault("spec", {})
            original = pod_template.get("spec") or {}
            for key in ("nodeSelector", "tolerations", "affinity"):
                if key in original:
                    pod_spec[key] = copy.deepcopy(original[key])
                else:
                    pod_spec.pop(key, None)
    spec["suspend"] = True
    env = policy.env(attempt, reason)
    for container in _containers(obj):
        items = [e for e in container.get("env") or [] if e.get("name") not in env]
        container["env"] = items + [{"name": k, "value": v} for k, v in env.items()]
    annotations.update({keys.RETRY_ATTEMPT: str(attempt), keys.RETRY_MAX: str(policy.max_retries),
                        keys.RETRY_REASON: reason.value})
    text = json.dumps(obj)
    for old, new in ((old_submission, submission_id), (old_publication, publication_id)):
        if old and new:
            text = text.replace(old, new)
    result: dict[str, Any] = json.loads(text)
    result["metadata"]["annotations"][keys.SUBMISSION_ID] = submission_id
    return result


def _containers(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec") or {}
    templates = [spec.get("template")]
    cluster = spec.get("rayClusterSpec") or {}
    templates.append((cluster.get("headGroupSpec") or {}).get("template"))
    templates += [g.get("template") for g in cluster.get("workerGroupSpecs") or []]
    out: list[dict[str, Any]] = []
    for template in templates:
        if isinstance(template, dict):
            out += list((template.get("spec") or {}).get("containers") or [])
    return out
