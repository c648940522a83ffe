"""``.submit()``: stage the handle, then run ``tau run --config`` in-process (or ``$TAU_BINARY``)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tau._errors import TauCLIError, TauSDKError
from tau._staging import stage

if TYPE_CHECKING:
    from tau._workflow import WorkloadHandle


@dataclass
class SubmitOutcome:
    """What ``.submit()`` returns: the CLI's exit code and, with ``capture=True``, its output."""

    exit_code: int
    stdout: str
    stderr: str
    resource_name: str


def refuse_inside_job() -> None:
    """Submitting from inside a cluster job is refused: the renderers set the marker in every workload."""
    from tau_core.keys import ENV_CLUSTER_JOB

    if os.environ.get(ENV_CLUSTER_JOB):
        raise TauSDKError("tau-py: refusing to .submit() from inside what looks like a cluster-submitted job "
                          f"({ENV_CLUSTER_JOB} is set)")


def require_root(root: str, distribution: str) -> None:
    """The in-process CLI must have the ``root`` command (registered by a plugin in tau_core's root registry)."""
    if os.environ.get("TAU_BINARY"):
        return
    from tau_core.plugins import get_host

    if root not in get_host().roots():
        raise TauSDKError(f"tau-py: the `tau {root}` command is not installed in this Python environment; "
                          f"pip install {distribution} (or set TAU_BINARY to a tau CLI that has it)")


def run_tau(args: list[str], *, capture: bool, stamp_argv: bool = False) -> tuple[int, str, str]:
    """The tau CLI: in-process through tau_core (same installation), or ``$TAU_BINARY`` when set.

    ``stamp_argv``: commands that record their own command line (``tau serve deploy`` stamps it on the
    workload) see ``tau ARGS`` as ``sys.argv``, as they would from a shell, not the caller's script.
    """
    binary = os.environ.get("TAU_BINARY")
    if binary:
        proc = subprocess.run([binary, *args], capture_output=capture, text=True, check=False)
        return proc.returncode, proc.stdout or "", proc.stderr or ""
    from tau_core.cli import cli, run

    saved = sys.argv
    if stamp_argv:
        sys.argv = ["tau", *args]
    try:
        if not capture:
            return run(cli, args), "", ""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run(cli, args)
        return code, out.getvalue(), err.getvalue()
    finally:
        sys.argv = saved


def cli_reason(stderr: str) -> str:
    """``": <the CLI's error line>"`` (its last line that is not a hint), or nothing without output."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if not line.startswith("hint:")]
    return f": {(errors or lines)[-1]}" if lines else ""


def tau_run_args(manifest: Path, *, dry_run: str | None, context: str | None, namespace: str | None) -> list[str]:
    args = ["run", "--config", str(manifest)]
    if dry_run:
        args.append(f"--dry-run={dry_run}")
    if context:
        args += ["--context", context]
    if namespace:
        args += ["--namespace", namespace]
    return args


def submit_handle(handle: WorkloadHandle, *, dry_run: str | None, context: str | None, namespace: str | None,
                  upstream_checkpoint: str | None, capture: bool) -> SubmitOutcome:
    prefix = "tau-py-eval-" if handle.kind == "rayjob-eval" else "tau-py-"
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        manifest = stage(handle, tmp, upstream_checkpoint=upstream_checkpoint)
        code, out, err = run_tau(tau_run_args(manifest, dry_run=dry_run, context=context, namespace=namespace),
                                 capture=capture)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the secret payload never outlives the call
    if code != 0:
        raise TauCLIError(f"tau-py: tau run failed for {handle.name!r} (exit={code})" + cli_reason(err), code)
    return SubmitOutcome(code, out, err, handle.resource_name)

