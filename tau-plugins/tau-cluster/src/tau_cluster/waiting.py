"""Polling the readiness report until ready or timeout; progress goes to stderr, only on a terminal."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from tau_cluster.helm import Helm, HelmError
from tau_cluster.readiness import Checker, Report
from tau_core.errors import TauError
from tau_core.kube import KubeSession


class Progress:
    """An elapsed-time line on stderr when stderr is a terminal; silent otherwise."""

    def __init__(self, label: str) -> None:
        self.label, self.start = label, time.monotonic()
        self.live = sys.stderr.isatty()

    def tick(self, note: str = "") -> None:
        if self.live:
            elapsed = int(time.monotonic() - self.start)
            sys.stderr.write(f"\r{self.label} {elapsed:>4}s {note[:60]:<60}")
            sys.stderr.flush()

    def done(self) -> None:
        if self.live:
            sys.stderr.write("\n")
            sys.stderr.flush()


def release_values(helm: Helm, release: str, namespace: str) -> dict[str, Any] | None:
    try:
        return helm.values(release, namespace)
    except HelmError as exc:
        print(f"Cannot read the values of Helm release {release} ({exc.message}); validating every component.",
              file=sys.stderr)
        return None


async def wait_ready(session: KubeSession, release: str, namespace: str, values: dict[str, Any] | None, *,
                     timeout: float, poll: float, timeout_text: str) -> Report:
    """Poll the checks until every one passes; raises a :class:`TauError` naming what failed at the deadline."""
    print("Waiting for TauGrid installation readiness...", file=sys.stderr)
    checker = Checker(session, release, namespace, values)
    progress = Progress("waiting for readiness")
    deadline = time.monotonic() + timeout
    try:
        while True:
            report = await checker.run()
            if report.ready:
                return report
            if time.monotonic() + poll > deadline:
                raise NotReady(report, timeout_text)
            progress.tick(report.failures())
            await asyncio.sleep(poll)
    finally:
        progress.done()


class NotReady(TauError):
    def __init__(self, report: Report, timeout_text: str) -> None:
        super().__init__(f"TauGrid did not become ready within {timeout_text}: {report.failures()}",
                         hint="the release stays installed; rerun `tau cluster validate installation` to follow it")
        self.report = report
