"""``tau python submit``: train, poll to success, clean up, then eval with the upstream checkpoint."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tau_core.errors import ClusterError, NotFoundError, TauError
from tau_core.output import info


class CLIFailed(TauError):
    """The tau CLI failed; the exit code is the CLI's own."""


@dataclass
class PollOptions:
    context: str | None = None
    dry_run: str | None = None
    timeout: float = 24 * 3600.0
    poll_interval: float = 15.0
    cleanup_timeout: float = 300.0
    keep_train_rayjob: bool = False


def tau_run(manifest: Path, opts: PollOptions, namespace: str | None) -> None:
    """``tau run --config MANIFEST`` in-process (or ``$TAU_BINARY``); a failure keeps its exit code."""
    from tau._submit import run_tau, tau_run_args

    code, _, _ = run_tau(tau_run_args(manifest, dry_run=opts.dry_run, context=opts.context, namespace=namespace),
                         capture=False)
    if code != 0:
        raise CLIFailed(f"tau python submit: tau CLI failed (exit={code})", exit_code=code)


def _backend(opts: PollOptions) -> Any:
    from tau_core.lifecycle import get_backend

    return get_backend("kubernetes", context=opts.context, progress=info)


def wait_for_success(name: str, namespace: str, opts: PollOptions, *,
                     sleep: Callable[[float], None] = time.sleep) -> None:
    """Poll the RayJob until it succeeds; a failure or the timeout is an error naming the next step."""
    from tau_core.lifecycle.base import RunRef

    backend = _backend(opts)
    ref = RunRef(name, "kubernetes", namespace, opts.context)
    deadline = time.monotonic() + opts.timeout
    while True:
        st = backend.status(ref)
        if st.terminal:
            if st.succeeded:
                info(f"{namespace}/{name} succeeded")
                return
            reason = str(st.failure) if st.failure else "failed"
            detail = f": {st.message}" if st.message else ""
            raise TauError(f"RayJob {namespace}/{name} failed ({reason}){detail}",
                           hint=f"see its logs: tau run logs {name} -n {namespace}")
        if time.monotonic() >= deadline:
            raise TauError(f"timed out after {opts.timeout:g}s waiting for RayJob {namespace}/{name}",
                           hint=f"follow it with: tau run status {name} -n {namespace} --watch")
        sleep(opts.poll_interval)


def cleanup(name: str, namespace: str, opts: PollOptions) -> None:
    from tau_core.lifecycle.base import RunRef

    try:
        message = _backend(opts).cancel(RunRef(name, "kubernetes", namespace, opts.context), wait=True,
                                        timeout=opts.cleanup_timeout)
        info(message.replace("cancelled", "cleaned up"))
    except NotFoundError:
        info(f"{namespace}/{name} is already gone")
    except ClusterError as exc:
        info(f"warning: could not clean up {namespace}/{name}: {exc.message}")


def submit_workflow(wf: Any, opts: PollOptions, stage_dir: Path, *, upstream: str | None) -> None:
    """Submit the module's train and eval (cluster path)."""
    from tau._staging import stage

    train, ev = wf.train, wf.eval
    if train is not None:
        ns = train.placement.namespace or "ray"
        tau_run(stage(train, stage_dir / train.name), opts, None)
        if opts.dry_run:
            return  # a dry run skips polling and the eval
        if ev is not None:
            wait_for_success(train.resource_name, ns, opts)
            if not opts.keep_train_rayjob:
                cleanup(train.resource_name, ns, opts)
    if ev is not None:
        if not upstream:
            raise TauError("@tau.eval needs an upstream checkpoint", hint="pass --upstream-checkpoint /data/...")
        tau_run(stage(ev, stage_dir / ev.name, upstream_checkpoint=upstream), opts, None)
