"""The local backend through its lifecycle API: real supervisor processes, real files, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tau_core.backends.local.backend import LocalBackend
from tau_core.errors import ConfigError, ConflictError, NotFoundError, TauError, UsageError
from tau_core.lifecycle import LogOptions, RunRef, SubmitRequest, get_backend
from tau_core.lifecycle.base import ArtifactListing, FailureReason

pytestmark = pytest.mark.realclock  # real supervisor processes and signals on the wall clock

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart"


Submit = Callable[..., RunRef]


@pytest.fixture
def submit(backend: LocalBackend, tmp_path: Path) -> Submit:
    counter = [0]

    def _submit(script: str, name: str = "job", **config: Any) -> RunRef:
        counter[0] += 1
        project = tmp_path / f"project-{counter[0]}"
        (project / "tau").mkdir(parents=True)
        (project / "script.py").write_text(textwrap.dedent(script))
        cfg: dict[str, Any] = {"name": name, "engine": "job", "entrypoint": "../script.py", "compute": {"gpus": 0}}
        for key, value in config.items():
            cfg[key] = value
        request = SubmitRequest(name=name, config=cfg, objects=[], context={},
                                config_path=project / "tau" / f"{name}.yaml", config_hash="hash-1")
        return backend.submit(request).ref

    return _submit


def logs(backend: LocalBackend, ref: RunRef, **kw: Any) -> list[str]:
    return list(backend.logs(ref, LogOptions(**{"tail": -1, **kw})))


def test_registered_as_the_local_execution_backend(home: Path) -> None:
    assert isinstance(get_backend("local"), LocalBackend)


def test_success_records_transitions_logs_and_output(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("""
        import os, pathlib
        print("hello from", os.getcwd())
        out = pathlib.Path(os.environ["TAU_OUTPUT_DIR"])
        (out / "reports").mkdir(parents=True, exist_ok=True)
        (out / "reports" / "eval.json").write_text('{"score": 1}')
    """)
    st = backend.wait(ref, timeout=30)
    assert st.terminal and st.succeeded and st.failure is FailureReason.COMPLETED, st
    assert [p.name for p in st.phases] == ["Submitted", "Started", "Running", "Completed", "Evidence"]
    assert [p.state for p in st.phases] == ["done", "done", "done", "done", "skipped"]
    states = [t.state for t in st.extra.transitions]
    assert states == ["Submitted", "Started", "Running", "Succeeded"]
    assert st.extra.exit_code == 0
    lines = logs(backend, ref)
    assert any(line.startswith("hello from ") and line.endswith("project-1") for line in lines), lines
    listing = backend.get(ref)
    assert isinstance(listing, ArtifactListing)
    assert "reports/eval.json" in [e["path"] for e in listing.entries]
    assert backend.get(ref, "reports/eval.json") == b'{"score": 1}'
    sub = backend.get(ref, "reports")
    assert isinstance(sub, ArtifactListing) and [e["path"] for e in sub.entries] == ["eval.json"]
    # the target name finds the newest run of that target
    assert backend.status(RunRef(name="job", backend="local")).ref.name == ref.name


def test_failing_exit_code_is_failed_unknown(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("import sys; print('about to fail'); sys.exit(3)")
    st = backend.wait(ref, timeout=30)
    assert st.terminal and not st.succeeded and st.failure is FailureReason.UNKNOWN
    assert st.extra.exit_code == 3 and "exit code 3" in st.message
    failed = st.phases[3]
    assert failed.name == "Failed" and failed.state == "warning" and f"tau run logs {ref.name}" in (failed.hint or "")


def test_environment_mirrors_the_cluster(backend: LocalBackend, submit: Submit, home: Path) -> None:
    ref = submit("""
        import json, os
        keys = [k for k in os.environ if k.startswith("TAU_")] + ["GREETING", "PYTHONUNBUFFERED"]
        print("ENV " + json.dumps({k: os.environ.get(k) for k in keys}))
        print("CWD " + os.getcwd())
    """, runtime={"env": {"GREETING": "hi"}}, storage={"output": "/data/projects/demo/run-1"})
    backend.wait(ref, timeout=30)
    lines = logs(backend, ref)
    env = json.loads(next(x for x in lines if x.startswith("ENV "))[4:])
    assert env["TAU_OUTPUT_DIR"] == str(home / "data" / "projects" / "demo" / "run-1")
    assert env["TAU_DATA_DIR"] == str(home / "data")
    assert env["TAU_DURABLE_CHECKPOINTS_DIR"] == str(home / "data" / "checkpoints")
    assert env["GREETING"] == "hi" and env["PYTHONUNBUFFERED"] == "1"
    assert "TAU_EXP_STORE" not in env and "TAU_RESUME_FROM" not in env and "TAU_OUTPUT_STAGING_DIR" not in env
    assert next(x for x in lines if x.startswith("CWD ")).endswith("project-1")


def test_env_secret_rayjob_and_missing_entrypoint_fail_before_anything_runs(backend: LocalBackend,
                                                                            submit: Submit, home: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed (the CI environment has it)
    with pytest.raises(ConfigError) as err:
        submit("print(1)", runtime={"env_secret": {"TOKEN": "hf:token"}})
    assert "runtime.env_secret" in err.value.message and "TOKEN" in err.value.message
    assert "hf:token" not in err.value.message and "export" in (err.value.hint or "")
    with pytest.raises(ConfigError) as err:
        submit("print(1)", engine="rayjob", compute={"workers": 1})
    assert "Ray is not installed" in err.value.message and "pip install 'tau[ray]'" in (err.value.hint or "")
    with pytest.raises(ConfigError, match="entrypoint"):
        submit("print(1)", entrypoint="../nope.py")
    with pytest.raises(ConfigError, match=r"execution\.nodes"):
        submit("print(1)", execution={"nodes": 2})
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())


def test_oom_by_memory_error_under_the_address_space_limit(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("""
        blob = bytearray(3 * 1024 ** 3)
        print("allocated", len(blob))
    """, compute={"gpus": 0, "memory_limit": "64Mi"})
    st = backend.wait(ref, timeout=30)
    assert st.failure is FailureReason.OOM_KILLED, st
    assert "MemoryError" in st.message


def test_oom_by_resident_memory_is_killed_by_the_supervisor(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("""
        import time
        hog = []
        for i in range(40):
            hog.append(bytearray(8 * 1024 * 1024))
            for j in range(0, len(hog[-1]), 4096):
                hog[-1][j] = 1
            print("allocated", (i + 1) * 8, "MiB", flush=True)
            time.sleep(0.05)
        time.sleep(30)
    """, compute={"gpus": 0, "memory_limit": "96Mi"})
    st = backend.wait(ref, timeout=60)
    assert st.failure is FailureReason.OOM_KILLED, st
    assert st.extra.signal == "SIGKILL" and "exceeded the limit" in st.message
    assert any("exceeds the limit" in line for line in logs(backend, ref))


def test_cancel_sends_sigterm_then_sigkill_after_grace(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("""
        import signal, time
        signal.signal(signal.SIGTERM, lambda *a: print("got SIGTERM, ignoring", flush=True))
        print("started", flush=True)
        while True:
            time.sleep(0.05)
    """)
    assert _wait_for_line(backend, ref, "started")
    backend.cancel(ref, wait=True, timeout=4)
    st = backend.wait(ref, timeout=30)
    assert st.extra.state == "Cancelled" and st.extra.signal == "SIGKILL", st
    assert st.phases[3].name == "Cancelled"
    lines = logs(backend, ref)
    assert "got SIGTERM, ignoring" in lines and any("sending SIGKILL" in x for x in lines)
    backend.cancel(ref)  # cancelling a finished run is a no-op


def test_cancel_of_a_cooperative_run_needs_only_sigterm(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    assert _wait_for_line(backend, ref, "started")
    backend.cancel(ref, wait=True, timeout=30)
    st = backend.status(ref)
    assert st.extra.state == "Cancelled" and st.extra.signal == "SIGTERM"


def test_retry_succeeds_on_the_second_attempt(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("""
        import os
        attempt = os.environ.get("TAU_RETRY_ATTEMPT")
        print("attempt", attempt, os.environ.get("TAU_RETRY_MAX"), os.environ.get("TAU_RETRY_REASON"),
              os.environ.get("TAU_RESUME_FROM"))
        if attempt is None:
            bytearray(3 * 1024 ** 3)  # first attempt: too much memory
        print("trained with a smaller batch")
    """, compute={"gpus": 0, "memory_limit": "64Mi"},
        resilience={"max_retries": 2, "retry_on": ["oomkilled"], "backoff_initial": "100ms", "backoff_max": "1s"})
    st = backend.wait(ref, timeout=60)
    assert st.succeeded, st
    assert st.attempt == 2 and st.max_attempts == 3
    attempts = st.extra.attempts
    assert [a.reason for a in attempts] == ["OOMKilled", "Completed"]
    lines = logs(backend, ref)
    out = st.extra.output_dir
    assert f"attempt 1 2 OOMKilled {out}/checkpoints" in lines, lines
    assert any("failed (OOMKilled) — retrying in 0.1s" in x for x in lines)
    assert "BackingOff" in [t.state for t in st.extra.transitions]


def test_failure_not_in_retry_on_is_not_retried(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("import sys; sys.exit(2)", resilience={"max_retries": 3, "backoff_initial": "10ms"})
    st = backend.wait(ref, timeout=30)
    assert len(st.extra.attempts) == 1
    assert "Unknown is not in resilience.retry_on [Preempted, Evicted]" in st.message


def test_retries_exhausted(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("bytearray(3 * 1024 ** 3)", compute={"gpus": 0, "memory_limit": "64Mi"},
                 resilience={"max_retries": 1, "retry_on": ["OOMKilled"], "backoff_initial": "10ms"})
    st = backend.wait(ref, timeout=30)
    assert len(st.extra.attempts) == 2 and "exhausted all 1 retries" in st.message


def test_each_attempt_is_classified_on_its_own_output(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("""
        import os, sys
        if "TAU_RETRY_ATTEMPT" not in os.environ:
            bytearray(3 * 1024 ** 3)
        sys.exit(1)
    """, compute={"gpus": 0, "memory_limit": "64Mi"},
        resilience={"max_retries": 1, "retry_on": ["OOMKilled"], "backoff_initial": "10ms"})
    st = backend.wait(ref, timeout=30)
    assert [a.reason for a in st.extra.attempts] == ["OOMKilled", "Unknown"], st
    assert st.failure is FailureReason.UNKNOWN


@pytest.mark.slow
def test_resume_from_a_checkpoint_after_cancel(backend: LocalBackend, home: Path) -> None:
    request = SubmitRequest(
        name="train", objects=[], context={}, config_path=QUICKSTART / "tau" / "train.yaml", config_hash="h1",
        config={"name": "train", "engine": "job", "entrypoint": "../train.py", "compute": {"gpus": 0},
                "runtime": {"env": {"QUICKSTART_STEPS": "30", "QUICKSTART_STEP_SECONDS": "0.2"}}})
    ref = backend.submit(request).ref
    assert _wait_for_line(backend, ref, "step   6", timeout=60)
    with pytest.raises(ConflictError, match="still running"):
        backend.resume(ref, request)
    backend.cancel(ref, timeout=30)
    assert backend.status(ref).extra.state == "Cancelled"
    dry = backend.resume(ref, request, dry_run=True)
    assert not dry.created and json.loads(dry.message)["resume_from"].endswith("/checkpoints")
    result = backend.resume(ref, request)
    assert result.ref.name == ref.name and "resuming" in result.message
    st = backend.wait(ref, timeout=60)
    assert st.succeeded, st
    lines = logs(backend, ref)
    resumed = [x for x in lines if x.startswith("resumed from step ")]
    assert resumed and int(resumed[0].split()[3]) >= 4, lines
    assert len(st.extra.attempts) == 2 and str(st.extra.attempts[1].resume_from).endswith("/checkpoints")
    report = json.loads(backend.get(ref, "report.json"))  # type: ignore[arg-type]
    assert report["resumed_from_step"] >= 5
    with pytest.raises(ConflictError, match="nothing to resume"):
        backend.resume(ref, request)


def test_resume_refuses_unknown_failures_and_unforced_oom(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("import sys; sys.exit(1)")
    backend.wait(ref, timeout=30)
    req = SubmitRequest(name="job", config={"entrypoint": "x.py"}, objects=[], context={})
    with pytest.raises(TauError, match="non-retryable reason Unknown"):
        backend.resume(ref, req)
    oom_ref = submit("bytearray(3 * 1024 ** 3)", compute={"gpus": 0, "memory_limit": "64Mi"})
    backend.wait(oom_ref, timeout=30)
    with pytest.raises(TauError, match="OOMKilled") as err:
        backend.resume(oom_ref, req)
    assert "--force" in (err.value.hint or "")
    with pytest.raises(UsageError, match="absolute"):
        backend.resume(oom_ref, SubmitRequest(name="job", config={}, objects=[], context={}), from_dir="rel",
                       force=True)


def test_logs_follow_until_the_end_and_tail(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("""
        import time
        for i in range(10):
            print(f"line {i}", flush=True)
            time.sleep(0.05)
        print("partial without newline", end="")
    """)
    followed = logs(backend, ref, follow=True)
    assert [x for x in followed if x.startswith("line ")] == [f"line {i}" for i in range(10)]
    assert "partial without newline" in followed
    assert followed[-1] == "[tau] run succeeded"
    assert backend.status(ref).terminal
    tail = logs(backend, ref, tail=2)
    assert len(tail) == 2 and tail[-1] == "[tau] run succeeded"
    assert logs(backend, ref, tail=0) == []
    stamped = logs(backend, ref, tail=1, timestamps=True)
    assert stamped[0].endswith("Z [tau] run succeeded") or " [tau] run succeeded" in stamped[0]
    with pytest.raises(UsageError):
        logs(backend, ref, container="trainer")


def test_two_concurrent_runs(backend: LocalBackend, submit: Submit) -> None:
    script = """
        import os, time
        for i in range(5):
            print(os.environ["WHO"], i, flush=True)
            time.sleep(0.05)
    """
    a = submit(script, name="alpha", runtime={"env": {"WHO": "alpha"}})
    b = submit(script, name="beta", runtime={"env": {"WHO": "beta"}})
    assert a.name != b.name
    sa, sb = backend.wait(a, timeout=30), backend.wait(b, timeout=30)
    assert sa.succeeded and sb.succeeded
    assert [x for x in logs(backend, a) if not x.startswith("[tau]")] == [f"alpha {i}" for i in range(5)]
    assert [x for x in logs(backend, b) if not x.startswith("[tau]")] == [f"beta {i}" for i in range(5)]
    assert sa.extra.output_dir != sb.extra.output_dir
    names = [s.ref.name for s in backend.list()]
    assert names[:2] == [b.name, a.name] and all(s.kind == "local" for s in backend.list())
    assert backend.list(queue="some-queue") == []


def test_run_survives_the_submitting_process_being_killed(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "tau").mkdir(parents=True)
    (project / "script.py").write_text("import time\nfor i in range(8):\n    print('tick', i, flush=True)\n"
                                       "    time.sleep(0.1)\n")
    code = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from tau_core.lifecycle import SubmitRequest
        from tau_core.backends.local.backend import LocalBackend
        ref = LocalBackend().submit(SubmitRequest(name="job", config={{"entrypoint": "../script.py"}}, objects=[],
                                    context={{}}, config_path=Path({str(project / 'tau' / 'job.yaml')!r}))).ref
        print(ref.name, flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    assert proc.stdout is not None
    name = proc.stdout.readline().strip()
    proc.kill()
    proc.wait()
    backend = LocalBackend()
    st = backend.wait(RunRef(name=name, backend="local"), timeout=30)
    assert st.succeeded, st
    assert [x for x in logs(backend, st.ref) if x.startswith("tick")] == [f"tick {i}" for i in range(8)]


def test_lost_supervisor_is_classified_evicted(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    assert _wait_for_line(backend, ref, "started")
    st = backend.status(ref)
    sup, child = st.extra.supervisor_pid, st.extra.pid
    os.kill(sup, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while backend.status(ref).extra.state != "Failed" and time.monotonic() < deadline:
        time.sleep(0.05)
    st = backend.status(ref)
    assert st.failure is FailureReason.EVICTED and "supervisor" in st.message, st
    # the evidence says the attempt ran and was interrupted (not "no attempt ran")
    running = next(p for p in st.phases if p.name == "Running")
    assert running.state == "warning" and "ran 1 attempt(s)" in running.detail, running
    assert "interrupted (Evicted)" in running.detail and f"pid {child}" in running.detail, running
    backend.cancel(ref)  # stops the orphaned process group
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_staged_publication(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("""
        import os, pathlib
        staging = pathlib.Path(os.environ["TAU_OUTPUT_STAGING_DIR"])
        (staging / "model.bin").write_bytes(b"weights")
    """, storage={"publish": "staged"})
    st = backend.wait(ref, timeout=30)
    assert st.succeeded, st
    listing = backend.get(ref)
    assert isinstance(listing, ArtifactListing) and "/.tau-artifacts/" in listing.root
    assert [e["path"] for e in listing.entries] == [".tau-artifacts-complete", "model.bin"]
    assert backend.get(ref, "model.bin") == b"weights"
    bad = submit("""
        import os, pathlib
        (pathlib.Path(os.environ["TAU_OUTPUT_STAGING_DIR"]) / "adir").mkdir()
    """, storage={"publish": "staged"})
    st = backend.wait(bad, timeout=30)
    assert not st.succeeded and st.extra.exit_code == 126 and "directory" in st.message
    with pytest.raises(NotFoundError, match="staged publication"):
        backend.get(bad)


def test_hostile_artifact_paths_through_the_backend(backend: LocalBackend, submit: Submit, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("secret")
    ref = submit(f"""
        import os, pathlib
        out = pathlib.Path(os.environ["TAU_OUTPUT_DIR"])
        (out / "ok.txt").write_text("ok")
        os.symlink({str(tmp_path / 'secret.txt')!r}, out / "leak.txt")
    """)
    backend.wait(ref, timeout=30)
    assert backend.get(ref, "ok.txt") == b"ok"
    for hostile in ("../../secret.txt", "/etc/passwd", "ok\0.txt", "leak.txt"):
        with pytest.raises(UsageError):
            backend.get(ref, hostile)
    with pytest.raises(NotFoundError):
        backend.status(RunRef(name="no-such-run", backend="local"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def _wait_for_line(backend: LocalBackend, ref: RunRef, prefix: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(x.startswith(prefix) for x in logs(backend, ref)):
            return True
        time.sleep(0.05)
    return False


def test_cancel_during_backoff_stops_the_retry_loop(backend: LocalBackend, submit: Submit) -> None:
    ref = submit("bytearray(3 * 1024 ** 3)", compute={"gpus": 0, "memory_limit": "64Mi"},
                 resilience={"max_retries": 3, "retry_on": ["OOMKilled"], "backoff_initial": "5m"})
    deadline = time.monotonic() + 30
    while backend.status(ref).extra.state != "BackingOff":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    backing = backend.status(ref)
    assert not backing.terminal and backing.phases[2].state == "warning" and "retrying in 300s" in backing.message
    backend.cancel(ref, timeout=30)
    st = backend.wait(ref, timeout=30)
    assert st.extra.state == "Cancelled" and len(st.extra.attempts) == 1


def test_follow_prints_the_log_then_where_the_evidence_is(backend: LocalBackend, submit: Submit) -> None:
    import io

    from tau_core.backends.local.follow import follow_run

    ref = submit("print('one')\nprint('two')\n")
    out, err = io.StringIO(), io.StringIO()
    assert follow_run(ref.name, out=out, err=err) == 0
    assert [x for x in out.getvalue().splitlines() if not x.startswith("[tau]")] == ["one", "two"]
    summary = err.getvalue()
    assert f"Run {ref.name} succeeded" in summary and "Output:  " in summary
    assert "no metrics.history" in summary
    bad = submit("import sys; sys.exit(4)")
    out, err = io.StringIO(), io.StringIO()
    assert follow_run(bad.name, out=out, err=err) == 1
    assert "failed: exit code 4" in err.getvalue()


def test_cli_compatibility_surface(backend: LocalBackend, submit: Submit) -> None:
    """What the lifecycle verbs call beyond the protocol: watch_status, cancel, get(path=, pvc=)."""
    ref = submit("import time\nprint('up', flush=True)\ntime.sleep(0.5)\nprint('down')\n")
    frames = list(backend.watch_status(ref, interval=0.1))
    assert frames[-1].terminal and frames[-1].succeeded and frames[-1].extra.exists
    assert len(frames) >= 2 and not frames[0].terminal
    assert "already finished" in backend.cancel(ref)
    with pytest.raises(UsageError, match="--path and --pvc"):
        backend.get(ref, path="/data/x", pvc="blob")
    assert backend.list(namespace="ignored", workspace="ignored")[0].ref == ref
    slow = submit("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    assert _wait_for_line(backend, slow, "started")
    assert backend.cancel(slow, timeout=30) == f"local run {slow.name} cancelled (SIGTERM)"


def test_retry_through_the_backend_starts_one_attempt_with_the_retry_environment(backend: LocalBackend,
                                                                                  submit: Submit) -> None:
    script = """
        import os, sys
        print("env", os.environ.get("TAU_RETRY_ATTEMPT"), os.environ.get("TAU_RETRY_MAX"),
              os.environ.get("TAU_RETRY_REASON"))
        sys.exit(0 if os.environ.get("TAU_RETRY_ATTEMPT") else 5)
    """
    ref = submit(script, resilience={"max_retries": 2, "retry_on": ["Preempted"]})
    first = backend.wait(ref, timeout=30)
    assert first.extra.exit_code == 5 and len(first.extra.attempts) == 1
    config_path = Path(backend.find(ref.name).request()["config_path"])  # type: ignore[union-attr]
    request = SubmitRequest(name="job", config={"entrypoint": "../script.py", "resilience": {"max_retries": 2}},
                            objects=[], context={}, config_path=config_path)
    result = backend.retry(ref, request, attempt=1, reason=FailureReason.PREEMPTED)
    assert result.ref == ref
    st = backend.wait(ref, timeout=30)
    assert st.succeeded and len(st.extra.attempts) == 2, st
    assert "env 1 2 Preempted" in logs(backend, ref)
    with pytest.raises(ConflictError, match="nothing to resume"):
        backend.resume(ref, request)
