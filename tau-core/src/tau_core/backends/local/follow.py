"""Follow a local run to its end: stream its log, then print the outcome and where the evidence is.

``tau run TARGET --local --follow`` (and ``tau run status --watch`` for local runs) call
:func:`follow_run`; it returns the process exit code (0 when the run succeeded).
"""

from __future__ import annotations

import sys
from typing import TextIO

from tau_core.lifecycle.base import LogOptions, RunRef, RunStatus, backend_for


def summary_lines(st: RunStatus) -> list[str]:
    """The closing block: outcome, output directory, logs, and the Stellar page (or why there is none)."""
    extra = st.extra
    name = st.ref.name
    outcome = {"Succeeded": "succeeded", "Failed": "failed", "Cancelled": "was cancelled"}.get(extra.state or "",
                                                                                            "is still running")
    lines = [f"Run {name} {outcome}" + (f": {st.message}" if st.message and not st.succeeded else "")]
    lines.append(f"Output:  {extra.output_dir}")
    lines.append(f"Logs:    tau logs {name}")
    stellar = extra.stellar
    if stellar:
        lines.append(f"Stellar: {stellar}")
        lines.append(f"         taugrid-portal experiment stellar {name} --store {extra.store}")
    else:
        evidence = next((p for p in st.phases if p.name == "Evidence"), None)
        if evidence is not None and evidence.state == "skipped":
            lines.append("Stellar: no metrics.history in the config, so no evidence was collected")
        elif evidence is not None:
            why = evidence.hint or evidence.detail
            lines.append(f"Stellar: not written ({why})")
    return lines


def follow_run(name: str, *, out: TextIO | None = None, err: TextIO | None = None, tail: int | None = -1) -> int:
    """Stream the run's log until it ends, then print :func:`summary_lines` on stderr; returns 0 on success."""
    out = out or sys.stdout
    err = err or sys.stderr
    backend = backend_for("local")
    ref = RunRef(name=name, backend="local")
    for line in backend.logs(ref, LogOptions(follow=True, tail=tail)):
        out.write(line + "\n")
        out.flush()
    wait = getattr(backend, "wait", None)  # the built-in backend bounds the wait for the evidence (120 s)
    st = wait(ref, timeout=120) if wait is not None else backend.status(ref)
    if wait is None:
        for frame in backend.watch_status(ref, interval=0.2):
            st = frame
    for line in summary_lines(st):
        err.write(line + "\n")
    err.flush()
    return 0 if st.succeeded else 1
