"""The one external binary of ``tau cluster``: Helm 3 or 4, found on PATH and probed offline.

:class:`Helm` runs ``helm`` with captured output. A failure becomes a one-line :class:`HelmError` that
names the verb, the Helm version and its path. :meth:`Helm.capabilities` reads ``helm upgrade --help``
(no cluster contact) to learn whether this Helm has server-side apply with ``--force-conflicts`` and
``--rollback-on-failure`` (Helm 4) or only ``--atomic`` (Helm 3).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from tau_core.errors import TauError

MISSING = "Helm is required: install Helm 3 or 4 and make sure `helm` is on PATH"
RELEASE_STATES = ("--deployed", "--failed", "--pending", "--superseded", "--uninstalled", "--uninstalling")


class HelmError(TauError):
    """A helm command failed; ``stderr`` keeps Helm's own words for callers that classify them."""

    def __init__(self, message: str, *, stderr: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.stderr = stderr


@attrs.frozen
class Capabilities:
    """What this Helm binary accepts on ``helm upgrade``."""

    force_conflicts: bool
    rollback_on_failure: bool

    def conflict_flags(self) -> list[str]:
        """Server-side apply that settles field ownership (Helm 4); nothing on Helm 3."""
        return ["--server-side=true", "--force-conflicts"] if self.force_conflicts else []

    def rollback_flag(self) -> str:
        return "--rollback-on-failure" if self.rollback_on_failure else "--atomic"


@attrs.frozen
class Release:
    name: str
    namespace: str
    status: str
    chart: str


@attrs.define
class Helm:
    path: Path
    env: Mapping[str, str] | None = None
    kube_context: str | None = None
    _version: str | None = None

    @classmethod
    def locate(cls, *, env: Mapping[str, str] | None = None, kube_context: str | None = None) -> Helm:
        environ = dict(os.environ if env is None else env)
        found = shutil.which("helm", path=environ.get("PATH"))
        if not found:
            raise TauError(MISSING, hint="see https://helm.sh/docs/intro/install/")
        return cls(Path(found), environ, kube_context or None)

    def _exec(self, args: Sequence[str], *, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run([str(self.path), *args], capture_output=True, text=True, env=self.env,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise HelmError(f"helm {args[0]} did not finish within {timeout:.0f}s (using {self.describe()})") from exc
        except OSError as exc:
            raise TauError(f"{MISSING} ({self.path}: {exc.strerror})") from exc

    def version(self) -> str:
        if self._version is None:
            result = self._exec(["version", "--short"], timeout=30)
            self._version = (result.stdout.strip().splitlines() or ["unknown"])[0] if result.returncode == 0 \
                else "unknown"
        return self._version

    def describe(self) -> str:
        return f"{self.version()} at {self.path}"

    def run(self, args: Sequence[str], *, timeout: float | None = None, kube: bool = True) -> str:
        """Run ``helm args`` (plus ``--kube-context`` when ``kube``); the stdout, or a :class:`HelmError`."""
        full = [*args, *(["--kube-context", self.kube_context] if kube and self.kube_context else [])]
        result = self._exec(full, timeout=timeout)
        if result.returncode != 0:
            detail = _last_error_line(result.stderr or result.stdout)
            raise HelmError(f"helm {args[0]} failed (using {self.describe()}): {detail}", stderr=result.stderr)
        return result.stdout

    def capabilities(self) -> Capabilities:
        text = self.run(["upgrade", "--help"], timeout=30, kube=False)
        return Capabilities(force_conflicts="--force-conflicts" in text,
                            rollback_on_failure="--rollback-on-failure" in text)

    def releases(self, name: str) -> list[Release]:
        """Every release called ``name`` in any namespace and any state."""
        out = self.run(["list", "--all-namespaces", *RELEASE_STATES, "--filter", f"^{name}$", "-o", "json"],
                       timeout=60)
        return [Release(r["name"], r["namespace"], r.get("status", ""), r.get("chart", ""))
                for r in json.loads(out or "[]") if r.get("name") == name]

    def values(self, release: str, namespace: str) -> dict[str, Any]:
        out = self.run(["get", "values", release, "--namespace", namespace, "--all", "-o", "json"], timeout=60)
        data = json.loads(out or "{}")
        return data if isinstance(data, dict) else {}

    def metadata(self, release: str, namespace: str) -> dict[str, Any]:
        out = self.run(["get", "metadata", release, "--namespace", namespace, "-o", "json"], timeout=60)
        data = json.loads(out or "{}")
        return data if isinstance(data, dict) else {}


def _last_error_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.lower().startswith("error")]
    return (errors or lines or ["no output"])[-1].removeprefix("Error: ")
