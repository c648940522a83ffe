"""Manual restart of a failed run from its checkpoint: classify, re-render (validated first), replace."""

from __future__ import annotations

import json

from tau_core import keys
from tau_core.classification import verdict
from tau_core.errors import ConflictError, NotFoundError, TauError, UsageError
from tau_core.kube import KubeSession
from tau_core.lifecycle.base import FailureReason, RunRef, SubmitRequest, SubmitResult

from .objects import RETRY_ATTEMPT, RETRY_MAX, Obj, _ann, _meta, _stamp_attempt
from .status import Status
from .submit import Submit


class Resume(Submit, Status):
    def resume(self, ref: RunRef, request: SubmitRequest, *, from_dir: str | None = None,
               force: bool = False, dry_run: bool = False) -> SubmitResult:
        result: SubmitResult = self._run(self._resume_async, ref, request, from_dir, force, dry_run)
        return result

    async def _resume_async(self, session: KubeSession, ref: RunRef, request: SubmitRequest,
                            from_dir: str | None, force: bool, dry_run: bool) -> SubmitResult:
        from tau_core.retry import checkpoint_path

        if from_dir is not None and not from_dir.startswith("/"):
            raise UsageError(f"--from \"{from_dir}\" must be an absolute checkpoint directory")
        ns = (await self.resolve(session, ref)).namespace
        snap = await self.settle(session, await self.snapshot(session, ns, ref.name))
        workload = snap.workload
        if workload is None:
            raise NotFoundError(f"no workload named \"{ref.name}\" found in namespace {ns}",
                                hint="check the name with `tau run list`; resume needs the failed workload")
        reason = verdict(snap).reason
        _check_resumable(ref.name, reason, force)
        _check_same_place(ref.name, ns, workload, request)
        resume_from = from_dir or checkpoint_path(request.name, request.config)
        context = request.context.evolve(resume_from=resume_from or None,
                                         metrics_session_id=_ann(workload).get(keys.METRICS_SESSION_ID) or
                                         request.context.metrics_session_id)
        replacement = self._rerender(request, context)  # validated by a client render before anything is deleted
        ann = _ann(workload)
        if ann.get(RETRY_ATTEMPT):
            _stamp_attempt(replacement[0], int(ann[RETRY_ATTEMPT]), int(ann.get(RETRY_MAX, "0") or 0), reason)
        new = SubmitRequest(request.name, request.config, replacement, context, request.config_path,
                            request.config_hash, _ann(replacement[0]).get(keys.SUBMISSION_ID, ""), request.extra_env)
        if dry_run:
            return SubmitResult(RunRef(ref.name, "kubernetes", ns, session.context), created=False,
                                message=json.dumps(replacement))
        await self._delete_and_wait(session, ns, ref.name, workload)
        result = await self.submit_async(session, new)
        result.message = f"resumed {ref.name} from {resume_from} after {reason.value} (ns={ns})"
        return result


def _check_resumable(name: str, reason: FailureReason, force: bool) -> None:
    if reason is FailureReason.RUNNING:
        raise ConflictError(f"workload \"{name}\" is still running — cancel it first", hint=f"tau run cancel {name}")
    if reason is FailureReason.COMPLETED:
        raise ConflictError(f"workload \"{name}\" completed successfully — nothing to resume")
    if reason is FailureReason.UNKNOWN:
        raise TauError(f"workload \"{name}\" failed with non-retryable reason Unknown — inspect logs/status "
                       "before resubmitting manually", hint=f"tau run status {name}; tau logs {name}")
    if reason is FailureReason.OOM_KILLED and not force:
        raise TauError(f"workload \"{name}\" was OOMKilled; resuming with the same resources usually fails "
                       "the same way", hint="raise the memory (compute.*) first, then pass --force to resume")


def _check_same_place(name: str, ns: str, workload: Obj, request: SubmitRequest) -> None:
    """Warn when the config changed; refuse to resume into another namespace."""
    from tau_core.output import warning

    old_hash = _ann(workload).get(keys.CONFIG_HASH, "")
    if old_hash and request.config_hash and old_hash != request.config_hash:
        warning(f"config hash changed ({old_hash[:8]} → {request.config_hash[:8]}) — the resumed run uses the "
                "new config")
    new_ns = _meta(request.objects[0]).get("namespace") if request.objects else ns
    if new_ns and new_ns != ns:
        raise ConflictError(f"the workspace now targets namespace \"{new_ns}\" but {name} ran in \"{ns}\"; "
                            "refusing to resume across namespaces", hint="submit a new run instead")
