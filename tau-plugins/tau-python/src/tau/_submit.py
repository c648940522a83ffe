"""``.submit()``: stage the handle, then run ``tau run --config`` in-process (or ``$TAU_BINARY``)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tau._errors import TauCLIError
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


def run_tau(args: list[str], *, capture: bool) -> tuple[int, str, str]:
    """The tau CLI: in-process through tau_core (same installation), or ``$TAU_BINARY`` when set."""
    binary = os.environ.get("TAU_BINARY")
    if binary:
        proc = subprocess.run([binary, *args], capture_output=capture, text=True, check=False)
        return proc.returncode, proc.stdout or "", proc.stderr or ""
    from tau_core.cli import cli, run

    if not capture:
        return run(cli, args), "", ""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(cli, args)
    return code, out.getvalue(), err.getvalue()


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
        raise TauCLIError(f"tau-py: tau run failed for {handle.name!r} (exit={code})"
                          + (f": {err.strip().splitlines()[-1]}" if err.strip() else ""), code)
    return SubmitOutcome(code, out, err, handle.resource_name)

