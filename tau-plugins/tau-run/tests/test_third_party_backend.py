"""A third-party execution backend, registered in-process through ``tau_register_execution_backends``,
serves every lifecycle verb: the commands reach backends only through the registry dispatch
(:func:`tau_core.lifecycle.backend_for`) and call only the :class:`ExecutionBackend` protocol."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tau_core.hookspecs import hookimpl
from tau_core.lifecycle import (
    ArtifactListing,
    ExecutionBackend,
    LogOptions,
    Phase,
    RunRef,
    RunStatus,
    RunSummary,
    SubmitRequest,
    SubmitResult,
)

CONFIG = ("name: acme-smoke\nengine: job\nentrypoint: train.sh\nimage: bash:5.2\ncompute:\n  gpus: 0\n"
          "  cpu_request: 100m\npolicy:\n  namespace: acme\n  queue: q\n")
NS = ["-n", "acme"]


class AcmeBackend:
    """An in-memory backend: what a plugin author writes against the protocol, and nothing more."""

    name = "acme"
    runs: dict[str, dict[str, Any]] = {}
    calls: list[tuple[str, dict[str, Any]]] = []

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.last_get: dict[str, Any] = {}

    def _note(self, verb: str, **details: Any) -> None:
        self.calls.append((verb, {**details, "options": dict(self.options)}))

    def _status(self, ref: RunRef, state: str) -> RunStatus:
        run = self.runs.get(ref.name)
        done = state == "done"
        return RunStatus(ref=RunRef(ref.name, "kubernetes", ref.namespace), kind="AcmeJob",
                         phases=[Phase("Accepted", "done", "by acme"), Phase("Ready", state, "acme worker")],
                         terminal=done, succeeded=done, message="" if done else "warming up",
                         extra={"exists": run is not None, "queue": "acme-q"})

    def submit(self, request: SubmitRequest) -> SubmitResult:
        self._note("submit", name=request.name)
        self.runs[request.name] = {"objects": request.objects}
        return SubmitResult(RunRef(request.name, "kubernetes", "acme"), True, "accepted by acme")

    def status(self, ref: RunRef, *, run_profile: bool = False) -> RunStatus:
        self._note("status", name=ref.name, namespace=ref.namespace)
        return self._status(ref, "active")

    def watch_status(self, ref: RunRef, *, interval: float = 2.0, max_iterations: int = 0,
                     run_profile: bool = False) -> Iterator[RunStatus]:
        self._note("watch_status", name=ref.name, interval=interval)
        yield self._status(ref, "active")
        yield self._status(ref, "done")

    def list(self, *, namespace: str | None = None, queue: str | None = None, include_external: bool = False,
             workspace: str | None = None) -> list[RunSummary]:
        self._note("list", namespace=namespace)
        return [RunSummary(RunRef(n, "kubernetes", namespace), "AcmeJob", "Running") for n in sorted(self.runs)]

    def logs(self, ref: RunRef, options: LogOptions) -> Iterator[str]:
        self._note("logs", name=ref.name, follow=options.follow)
        yield from (f"acme line {i}" for i in range(3))

    def get(self, ref: RunRef, artifact: str | None = None, *, path: str | None = None,
            pvc: str | None = None) -> ArtifactListing | bytes:
        self._note("get", name=ref.name, artifact=artifact)
        self.last_get = {"path": f"acme://{ref.name}", "pvc": "acme-volume"}
        if artifact:
            return b"acme bytes\n"
        return ArtifactListing(root=f"acme://{ref.name}", entries=[{"path": "model.bin", "size": 3, "type": "file"}])

    def cancel(self, ref: RunRef, *, wait: bool = True, timeout: float = 600.0, object_timeout: float = 30.0) -> str:
        self._note("cancel", name=ref.name, wait=wait)
        self.runs.pop(ref.name, None)
        return f"acme stopped {ref.name}"

    def resume(self, ref: RunRef, request: SubmitRequest, *, from_dir: str | None = None, force: bool = False,
               dry_run: bool = False) -> SubmitResult:
        self._note("resume", name=ref.name, from_dir=from_dir, rendered=request.objects[0]["kind"])
        return SubmitResult(RunRef(ref.name, "kubernetes", "acme"), True, f"acme resumed {ref.name}")


class AcmePlugin:
    @hookimpl
    def tau_register_execution_backends(self, register):  # type: ignore[no-untyped-def]
        register("kubernetes", AcmeBackend, priority=100, help="acme's cluster")


@pytest.fixture
def acme(tau_plugins, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> type[AcmeBackend]:  # type: ignore[no-untyped-def]
    (tmp_path / ".git").mkdir()
    (tmp_path / "tau").mkdir()
    (tmp_path / "tau" / "train.sh").write_text("#!/bin/sh\necho hi\n")
    (tmp_path / "tau" / "acme.yaml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    AcmeBackend.runs, AcmeBackend.calls = {}, []
    tau_plugins.register(AcmePlugin(), name="acme")
    return AcmeBackend


def test_the_backend_satisfies_the_protocol() -> None:
    assert isinstance(AcmeBackend(), ExecutionBackend)


def test_every_lifecycle_verb_reaches_the_registered_backend(acme, tau_cli) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", "acme")
    assert r.exit_code == 0, r
    assert "accepted by acme" in r.stdout
    r = tau_cli("run", "status", "acme-smoke", *NS)
    assert r.exit_code == 0, r
    assert "Run: acme/acme-smoke (AcmeJob)" in r.stdout and "[>] Ready" in r.stdout
    r = tau_cli("run", "status", "acme-smoke", *NS, "-o", "json")
    assert json.loads(r.stdout)["kind"] == "AcmeJob"
    r = tau_cli("run", "status", "acme-smoke", *NS, "--watch", "--interval", "0.1s")
    assert r.exit_code == 0, r
    assert "[x] Ready" in r.stdout.strip().split("\n\n")[-1]
    r = tau_cli("run", "list", *NS)
    assert r.exit_code == 0 and "acme-smoke" in r.stdout, r
    for argv in (["run", "logs", "acme-smoke", *NS], ["logs", "acme-smoke", *NS]):
        r = tau_cli(*argv)
        assert r.exit_code == 0 and r.stdout.splitlines() == ["acme line 0", "acme line 1", "acme line 2"], r
    r = tau_cli("run", "get", "acme-smoke", *NS)
    assert r.exit_code == 0 and "PVC:  acme-volume" in r.stdout and "model.bin" in r.stdout, r
    r = tau_cli("run", "get", "acme-smoke", *NS, "--artifact", "model.bin", "-o", "raw")
    assert r.stdout == "acme bytes\n", r
    r = tau_cli("run", "resume", "acme-smoke", "-c", "tau/acme.yaml", *NS)
    assert r.exit_code == 0 and "acme resumed acme-smoke" in r.stdout, r
    r = tau_cli("run", "cancel", "acme-smoke", *NS)
    assert r.exit_code == 0 and "acme stopped acme-smoke" in r.stdout, r
    verbs = [verb for verb, _ in acme.calls]
    assert verbs == ["submit", "status", "status", "watch_status", "list", "logs", "logs", "get", "get", "resume",
                     "cancel"]
    resumed = dict(acme.calls)["resume"]
    assert resumed["rendered"] == "Job"  # the command rendered the replacement before handing it over
    cancel_options = dict(acme.calls)["cancel"]["options"]
    assert "poll_interval" in cancel_options and "system_namespace" in cancel_options
