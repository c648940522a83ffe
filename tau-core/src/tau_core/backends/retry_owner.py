"""Which side resubmits a failed run: the Tau controller (when its TauCluster advertises it) or this CLI.

Exactly one owner per run: at submission the CLI stamps ``tau.azure.com/retry-owner`` (``controller`` only when
the capability is present and current, ``cli`` otherwise) and the retry policy; each side acts only on runs it
owns.  When the controller owns the retry, ``tau run`` only follows the attempts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tau_core import keys
from tau_core.errors import TauError
from tau_core.kube import KubeApiError, KubeSession
from tau_core.lifecycle.base import FailureReason
from tau_core.retry import OWNER_CLI, OWNER_CONTROLLER, RetryPolicy, policy_annotation, retry_owner

TAU_CLUSTER_PATH = f"/apis/{keys.API_VERSION}/clusters/cluster"
#: how long past the backoff the CLI waits for the controller's next attempt before giving up following
RESUBMIT_GRACE = 120.0
#: how long a failure this command classifies as Unknown waits for the controller's own decision
DECISION_GRACE = 10.0


async def read_owner(session: KubeSession) -> str:
    """``controller`` or ``cli`` from the live TauCluster (unreadable: ``cli``, which keeps today's behaviour)."""
    try:
        return retry_owner(await session.get(TAU_CLUSTER_PATH, missing_ok=True))
    except KubeApiError:
        return OWNER_CLI


def stamp(obj: dict[str, Any], owner: str, policy: RetryPolicy) -> None:
    annotations = obj.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[keys.RETRY_OWNER] = owner
    annotations[keys.RETRY_POLICY] = policy_annotation(policy)


def follow(backend: Any, ref: Any, policy: RetryPolicy, say: Callable[[str], None]) -> Any:
    """Follow a controller-owned run to its final outcome; raises TauError when it finally fails."""
    where = f"{ref.namespace}/{ref.name}"
    say(f"submitted {where}; automatic retry (up to {policy.max_retries} on {', '.join(policy.retry_on)}) is owned "
        "by the Tau controller, which retries even when this command stops. Ctrl-C stops following, not the run.")
    expected = 0  # the attempt this command last knew of
    while True:
        st = backend.wait(ref)
        attempt = st.attempt or 0
        for replaced in range(expected, attempt):  # failed and resubmitted before this command saw them fail
            say(f"attempt {replaced + 1}/{policy.max_retries} failed — the Tau controller has already resubmitted it")
        if st.succeeded:
            say(f"workload {where} completed successfully")
            return st
        reason = st.failure or FailureReason.UNKNOWN
        if not policy.allows(reason):
            coming = _controller_retries(backend, ref, attempt) if reason is FailureReason.UNKNOWN else None
            if coming is None:
                raise TauError(f"workload {where} failed ({reason.value}) — not in retry_on list "
                               f"[{', '.join(policy.retry_on)}]",
                               hint=f"inspect it with `tau run status {ref.name}` and `tau logs {ref.name}`")
            expected = attempt  # the next wait reports the attempt as resubmitted
            if coming > 0:
                say(f"attempt {attempt + 1}/{policy.max_retries} failed — the Tau controller retries in {coming:g}s")
                _await_next(backend, ref, attempt, coming + RESUBMIT_GRACE)
                expected = attempt + 1
            continue
        if attempt >= policy.max_retries:
            raise TauError(f"workload {where} exhausted all {policy.max_retries} retries (last failure: "
                           f"{reason.value})", hint="if it keeps failing the same way, check the cluster with "
                           "`tau cluster validate nodes` before resubmitting")
        delay = policy.backoff(attempt + 1)
        say(f"attempt {attempt + 1}/{policy.max_retries} failed ({reason.value}) — the Tau controller retries in "
            f"{delay:g}s")
        _await_next(backend, ref, attempt, delay + RESUBMIT_GRACE)
        expected = attempt + 1


def _controller_retries(backend: Any, ref: Any, attempt: int) -> float | None:
    """Whether the controller retries a failed attempt this command could not classify: 0 once it has resubmitted
    it, the seconds left once it has stamped the retry's due time, None when it does neither within
    ``DECISION_GRACE`` seconds.

    The controller watches the pods and Events of the run, so it can hold evidence that had already vanished
    when this command read the run (the controller itself deletes the failed attempt when its backoff is 0).
    Its decision, visible on the cluster, outranks this command's ``Unknown``."""
    deadline = time.monotonic() + DECISION_GRACE
    while True:
        try:
            st = backend.status(ref)
        except TauError:
            st = None  # between the old attempt's deletion and the new one's creation
        if st is not None and (st.attempt or 0) > attempt:
            return 0.0
        pending = st.extra.retry_pending if st is not None else None
        if pending is not None and pending.owner == OWNER_CONTROLLER:
            return float(pending.in_seconds)
        if time.monotonic() >= deadline:
            return None
        backend.sleep(0.5)


def _await_next(backend: Any, ref: Any, attempt: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if (backend.status(ref).attempt or 0) > attempt:
                return
        except TauError:
            pass  # between the old attempt's deletion and the new one's creation
        backend.sleep(0.5)
    raise TauError(f"the Tau controller did not resubmit {ref.namespace}/{ref.name} within {int(timeout)}s",
                   hint="check the controller (kubectl -n tau-system logs deploy/tau-core-controller); the run's "
                        "retry stays with the controller")


__all__ = ["OWNER_CLI", "OWNER_CONTROLLER", "follow", "read_owner", "stamp"]


def pending_retry(workload: Any, *, terminal: bool, succeeded: bool, failure: FailureReason | None,
                  now: Any = None) -> dict[str, Any] | None:
    """What ``tau run status`` shows for a failed run that its owner will retry: the owner, the next attempt
    ``k/N`` and the seconds left of the backoff; None when no retry is coming.

    The seconds left come from the due time the Tau controller stamps on a workload it owns
    (``tau.azure.com/retry-due``: it keeps the original backoff across controller restarts), else from the
    failure time plus the policy's backoff."""
    from datetime import UTC, datetime

    from tau_core.retry import policy_from_annotation
    from tau_core.status_tree import parse_time

    annotations = ((workload or {}).get("metadata") or {}).get("annotations") or {}
    policy = policy_from_annotation(annotations.get(keys.RETRY_POLICY))
    owner = annotations.get(keys.RETRY_OWNER) or OWNER_CLI
    due = parse_time(annotations.get(keys.RETRY_DUE)) if owner == OWNER_CONTROLLER else None
    if not terminal or succeeded or policy is None:
        return None
    if due is None and (failure is None or not policy.allows(failure)):  # a stamped due: the controller's decision
        return None
    attempt = int(annotations.get(keys.RETRY_ATTEMPT) or 0)
    if attempt >= policy.max_retries:
        return None
    failed_at = None
    for cond in ((workload or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Failed" and cond.get("status") == "True" and cond.get("lastTransitionTime"):
            failed_at = datetime.fromisoformat(str(cond["lastTransitionTime"]).replace("Z", "+00:00"))
    now = now or datetime.now(UTC)
    delay = policy.backoff(attempt + 1)
    if due is not None:
        delay = max(0.0, (due - now).total_seconds())
    elif failed_at is not None:
        delay = max(0.0, delay - (now - failed_at).total_seconds())
    return {"owner": owner, "attempt": attempt + 1,
            "max": policy.max_retries, "inSeconds": round(delay, 1)}
