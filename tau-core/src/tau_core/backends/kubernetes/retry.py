"""Submission with automatic retry (reference run-config-and-rendering §4.3) and the retry step itself.

The command that submitted the run waits for a terminal state, classifies a failure and resubmits while
``retry_on`` and the budget allow, unless the Tau controller owns the retry (see
:mod:`tau_core.backends.retry_owner`): then it only follows.  Interrupting the wait loses nothing: the
run continues and its attempt count lives on the workload.
"""

from __future__ import annotations

from typing import Any

from tau_core import keys
from tau_core.errors import TauError, interrupted
from tau_core.kube import KubeSession
from tau_core.lifecycle.base import FailureReason, RunRef, RunStatus, SubmitRequest, SubmitResult
from tau_core.status_tree import failure_signature

from .objects import _ann, _create_event, _meta, _reason, _stamp_attempt
from .submit import Submit
from .watch import Watch


class Retry(Submit, Watch):
    def submit(self, request: SubmitRequest) -> SubmitResult:
        """Create the run; with ``resilience.max_retries > 0`` (and no dry run) also wait and retry it."""
        dry_run = request.context.dry_run or ""
        if dry_run or request.context.auto_retry is False:
            result: SubmitResult = self._run(self.submit_async, request)
            return result
        from tau_core.backends import retry_owner
        from tau_core.retry import RetryPolicy

        policy = RetryPolicy.from_config(request.name, request.config)
        owner = self._run(retry_owner.read_owner) if policy.enabled and request.objects else None
        if owner is not None:
            retry_owner.stamp(request.objects[0], owner, policy)
        result = self._run(self.submit_async, request)
        if owner == retry_owner.OWNER_CONTROLLER:
            from tau_core.output import info

            retry_owner.follow(self, result.ref, policy, self.progress or info)
        elif policy.enabled:
            self.supervise(result.ref, request, policy)
        return result

    def supervise(self, ref: RunRef, request: SubmitRequest, policy: Any) -> RunStatus:
        """Wait for ``ref`` to finish and retry it per ``policy``; raises TauError when it finally fails."""
        from tau_core.output import info

        say = self.progress or info
        where = f"{ref.namespace}/{ref.name}"
        say(f"submitted {where}; waiting for it to finish (automatic retry: up to {policy.max_retries} on "
            f"{', '.join(policy.retry_on)}). Ctrl-C stops waiting, not the run.")
        try:
            while True:
                st = self.wait(ref)
                if st.succeeded:
                    say(f"workload {st.ref.namespace}/{st.ref.name} completed successfully")
                    if st.attempt:
                        self.record_retry_outcome(ref, outcome="succeeded", attempt=st.attempt,
                                                  max_retries=policy.max_retries,
                                                  reason=_reason(st.extra.retry_reason))
                    return st
                self._retry_failed(ref, request, policy, st, say)
        except BaseException as exc:
            if not interrupted(exc):
                raise
            raise TauError(f"interrupted while waiting for {where}; it keeps running and its retry count is kept "
                           "on the workload", hint=f"follow it with `tau run status {ref.name} --watch`",
                           exit_code=130) from None

    def _retry_failed(self, ref: RunRef, request: SubmitRequest, policy: Any, st: RunStatus, say: Any) -> None:
        """Replace the failed attempt ``st`` after the backoff, or raise when the policy gives up."""
        where = f"{st.ref.namespace}/{st.ref.name}"
        reason = st.failure or FailureReason.UNKNOWN
        if not policy.allows(reason):
            listed = ", ".join(policy.retry_on)
            raise TauError(f"workload {where} failed ({reason.value}) — not in retry_on list [{listed}]",
                           hint=f"inspect it with `tau run status {ref.name}` and `tau logs {ref.name}`")
        attempt = (st.attempt or 0) + 1
        if attempt > policy.max_retries:
            self.record_retry_outcome(ref, outcome="exhausted", attempt=attempt - 1,
                                      max_retries=policy.max_retries, reason=reason)
            raise TauError(f"workload {where} exhausted all {policy.max_retries} retries "
                           f"(last failure: {reason.value})",
                           hint="if it keeps failing the same way, check the cluster with "
                                "`tau cluster validate nodes` before resubmitting")
        delay = policy.backoff(attempt)
        say(f"attempt {attempt}/{policy.max_retries} failed ({reason.value}) — retrying in {delay:g}s")
        self.sleep(delay)
        with _deferred_interrupts():
            self.retry(ref, request, attempt=attempt, reason=reason)

    def retry(self, ref: RunRef, request: SubmitRequest, *, attempt: int, reason: FailureReason) -> SubmitResult:
        result: SubmitResult = self._run(self._retry_async, ref, request, attempt, reason)
        return result

    async def _retry_async(self, session: KubeSession, ref: RunRef, request: SubmitRequest, attempt: int,
                           reason: FailureReason) -> SubmitResult:
        from tau_core.retry import RetryPolicy, retry_event

        policy = RetryPolicy.from_config(request.name, request.config)
        ns = (await self.resolve(session, ref)).namespace
        snap = await self.snapshot(session, ns, ref.name)
        workload = snap.workload
        event = retry_event(namespace=ns, name=ref.name, attempt=attempt, max_retries=policy.max_retries,
                            reason=reason, signature=failure_signature(snap), kind=snap.kind or "Job",
                            uid=_meta(workload).get("uid") if workload else None)
        await _create_event(session, event)
        from tau_core.rendering.context import RetryInfo

        context = request.context.evolve(retry=RetryInfo(attempt=attempt, max=policy.max_retries,
                                                         reason=reason.value),
                                         resume_from=policy.checkpoint_path or None)
        replacement = self._rerender(request, context)
        _stamp_attempt(replacement[0], attempt, policy.max_retries, reason)
        if workload is not None:
            await self._delete_and_wait(session, ns, ref.name, workload)
        new = SubmitRequest(request.name, request.config, replacement, context, request.config_path,
                            request.config_hash, _ann(replacement[0]).get(keys.SUBMISSION_ID, ""), request.extra_env)
        return await self.submit_async(session, new)

    def record_retry_outcome(self, ref: RunRef, *, outcome: str, attempt: int, max_retries: int,
                             reason: FailureReason) -> None:
        """Record the ``exhausted`` or ``succeeded`` Event of a retried run."""
        from tau_core.retry import retry_event

        async def go(session: KubeSession) -> None:
            target = await self.resolve(session, ref)
            snap = await self.snapshot(session, target.namespace, ref.name)
            workload = snap.workload
            await _create_event(session, retry_event(
                namespace=target.namespace, name=ref.name, attempt=attempt, max_retries=max_retries, reason=reason,
                signature=failure_signature(snap), kind=snap.kind or "Job",
                uid=_meta(workload).get("uid") if workload else None, outcome=outcome))

        self._run(go)


class _deferred_interrupts:
    """Hold Ctrl-C while a failed workload is replaced, so an interrupt never leaves it deleted but not resubmitted."""

    def __enter__(self) -> None:
        import signal
        import threading

        self._pending = False
        self._previous: Any = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)

            def hold(signum: int, frame: Any) -> None:
                self._pending = True

            signal.signal(signal.SIGINT, hold)

    def __exit__(self, *exc: object) -> None:
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        if self._pending:
            raise KeyboardInterrupt
