"""``engine: rayjob`` on the local backend with a real Ray head (``ray[default]`` from PyPI), through ``tau``.

Every test drives the installed ``tau`` entry point in subprocesses, as a user would.  Each run
starts one Ray head (a few seconds on two cores), so the tests are few and each proves several
things.  The ``no_ray_left`` fixture fails a test when any process of one of its runs' heads (found by
the ``TAU_LOCAL_RAY_RUN`` marker in its environment, which job drivers inherit) outlives it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tau_core.backends.local import ray as local_ray

pytestmark = [pytest.mark.realclock, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TAU = str(BIN / "tau")
PORTAL = str(BIN / "taugrid-portal")
RUN_TIMEOUT = 240.0


class Local:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "tau-home"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("TAU_", "RAY_"))}
        self.env.update({"TAU_DATA_DIR": str(self.home), "NO_COLOR": "1", "HOME": str(root),
                         "KUBECONFIG": str(root / "no-kubeconfig")})

    def tau(self, *args: str, cwd: Path | None = None, check: bool = True,
            timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([TAU, *args], cwd=cwd or self.root, env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        if check:
            assert proc.returncode == 0, (args, proc.returncode, proc.stdout, proc.stderr)
        return proc

    def project(self, script: str, **config: Any) -> Path:
        project = self.root / f"project-{len(list(self.root.glob('project-*'))) + 1}"
        (project / "tau").mkdir(parents=True)
        (project / "driver.py").write_text(textwrap.dedent(script))
        cfg: dict[str, Any] = {"name": "job", "engine": "rayjob", "entrypoint": "../driver.py",
                               "compute": {"workers": 1, "gpus_per_worker": 0}}
        cfg.update(config)
        (project / "tau" / "job.yaml").write_text(json.dumps(cfg, indent=2))
        return project

    def submit(self, project: Path, target: str = "job") -> str:
        doc = json.loads(self.tau("run", target, "--local", "-o", "json", cwd=project).stdout)
        assert doc["backend"] == "local", doc
        return str(doc["run"])

    def status(self, run: str) -> dict[str, Any]:
        proc = self.tau("run", "status", run, "-o", "json", check=False)
        assert proc.returncode in (0, 1), proc.stderr
        return dict(json.loads(proc.stdout))

    def wait(self, run: str) -> dict[str, Any]:
        self.tau("run", "status", run, "--watch", "--interval", "500ms", check=False)
        doc = self.status(run)
        assert doc["terminal"], doc
        return doc

    def record(self, run: str) -> dict[str, Any]:
        return dict(json.loads((self.home / "runs" / run / "run.json").read_text()))

    def log(self, run: str) -> str:
        return self.tau("logs", run, "--tail", "-1").stdout


def running(pid: int) -> bool:
    """Alive and not a zombie (one whose parent has not reaped it yet is gone for our purposes)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def phases(doc: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {p["name"]: (p["state"], p.get("detail") or "") for p in doc["phases"]}


@pytest.fixture
def local(tmp_path: Path) -> Local:
    return Local(tmp_path)


@pytest.fixture(autouse=True)
def no_ray_left(local: Local) -> Iterator[None]:
    yield
    runs = sorted((local.home / "runs").glob("*")) if (local.home / "runs").is_dir() else []
    left: dict[str, list[int]] = {}
    deadline = time.monotonic() + 20
    while True:
        left = {r.name: local_ray.head_processes(r) for r in runs}
        left = {k: v for k, v in left.items() if v}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for run in runs:  # never leave them running, even when failing
        local_ray.sweep(run)
    temp_roots = [str((local.record(r.name).get("ray") or {}).get("temp_root")) for r in runs
                  if (r / "run.json").is_file() and local.record(r.name).get("ray")]
    assert not left, f"Ray processes outlived their runs: {left}"
    assert not [t for t in temp_roots if Path(t).exists()], temp_roots


def test_example_runs_as_written_with_the_driver_log_followed(local: Local) -> None:
    """examples/cpu-multi-interest-ray as written: working_dir + excludes, TAU_* contract, runtime.pip noted."""
    example = local.root / "cpu-multi-interest-ray"
    shutil.copytree(REPO / "examples" / "cpu-multi-interest-ray", example)
    proc = local.tau("run", "train", "--local", cwd=example)
    assert "runtime.pip (PyYAML==6.0.2) is not installed locally" in proc.stdout + proc.stderr
    run = next(line.split()[-1] for line in proc.stdout.splitlines() if line.startswith("Run: "))
    follow = local.tau("logs", run, "-f")  # returns when the run ends
    lines = follow.stdout.splitlines()
    assert "shards: 8" in lines, lines  # TAU_NUM_WORKERS=4 reached the driver: 2 shards per worker
    assert any(x.startswith("mean_recall_at_10: ") for x in lines), lines
    assert any("advertises 5 logical CPUs (what the run asks for) on" in x for x in lines), lines
    assert lines[-1] == "[tau] run succeeded", lines[-5:]
    doc = local.status(run)
    assert doc["succeeded"], doc
    ray_phase = phases(doc)["Ray job"]
    assert ray_phase[0] == "done" and f"{run}-a1 SUCCEEDED on the local head http://127.0.0.1:" in ray_phase[1]
    record = local.record(run)["ray"]
    assert record["job_state"] == "SUCCEEDED" and record["num_cpus"] == 5
    assert len(record["temp_root"]) < 40 and record["temp_root"] not in str(local.home)
    token = Path(record["token_file"])
    assert token.parent == local.home / "runs" / run and token.stat().st_mode & 0o777 == 0o600
    assert token.read_text().strip() not in local.log(run) + json.dumps(local.record(run))


def test_an_injected_preemption_is_retried_on_the_same_head_and_a_failure_reports_its_exit_code(local: Local) -> None:
    """One run, one head: attempt 1 is killed from outside tau (Preempted, retried), attempt 2 exits 7."""
    project = local.project("""
        import os, signal, sys
        attempt = os.environ.get("TAU_RETRY_ATTEMPT")
        print("attempt", attempt, "flavour", os.environ["FLAVOUR"], "output", os.environ["TAU_OUTPUT_DIR"], flush=True)
        if attempt is None:
            os.kill(os.getpid(), signal.SIGTERM)  # injected: the driver is killed from outside tau
        open(os.path.join(os.environ["TAU_OUTPUT_DIR"], "attempt.txt"), "w").write("reached attempt " + attempt)
        sys.exit(7)
    """, runtime={"env": {"FLAVOUR": "vanilla"}},
        resilience={"max_retries": 1, "retry_on": ["Preempted"], "backoff_initial": "1s"})
    run = local.submit(project)
    doc = local.wait(run)
    assert not doc["succeeded"] and doc["failure"] == "Unknown", doc
    assert f"Ray job {run}-a2 FAILED (exit code 7)" in doc["message"], doc
    assert phases(doc)["Ray job"][0] == "warning" and f"{run}-a2 FAILED" in phases(doc)["Ray job"][1], doc
    record = local.record(run)
    assert record["exit_code"] == 7 and [a["state"] for a in record["attempts"]] == ["Failed", "Failed"]
    first, second = record["attempts"]
    assert first["reason"] == "Preempted" and "SIGTERM" in first["message"], first
    assert second["reason"] == "Unknown" and second["exit_code"] == 7, second
    assert [a["ray_job"]["submission_id"] for a in record["attempts"]] == [f"{run}-a1", f"{run}-a2"]
    log = local.log(run)
    assert "attempt None flavour vanilla output " in log and "attempt 1 flavour vanilla output " in log
    assert log.count("[tau] starting a local Ray head") == 1, log  # the retry reused the run's head
    raw = subprocess.run([TAU, "run", "get", run, "--artifact", "attempt.txt", "-o", "raw"], env=local.env,
                         capture_output=True, text=True, timeout=60)
    assert raw.stdout == "reached attempt 1", raw


def test_cancel_stops_the_job_then_the_head(local: Local) -> None:
    project = local.project("""
        import time
        print("ready", flush=True)
        time.sleep(600)
    """)
    run = local.submit(project)
    deadline = time.monotonic() + RUN_TIMEOUT
    while "ready" not in local.log(run).splitlines():
        assert time.monotonic() < deadline, local.log(run)
        time.sleep(0.5)
    while local.record(run)["ray"]["job_state"] != "RUNNING":  # the supervisor records the state it polls
        assert time.monotonic() < deadline, local.record(run)
        time.sleep(0.2)
    head = local_ray.head_processes(local.home / "runs" / run)
    assert len(head) >= 3, head  # ray start, gcs_server, raylet, the driver...
    local.tau("run", "cancel", run, "--timeout", "60s")
    doc = local.status(run)
    assert doc["terminal"] and not doc["succeeded"] and local.record(run)["state"] == "Cancelled", doc
    assert phases(doc)["Ray job"][0] == "warning" and "STOPPED" in phases(doc)["Ray job"][1], doc
    assert local_ray.head_processes(local.home / "runs" / run) == []  # cancel returned after the head went
    assert not [pid for pid in head if running(pid)], head
    log = local.log(run)
    assert f"cancel requested: stopping Ray job {run}-a1" in log and "[tau] stopping the local Ray head" in log


def test_ray_tune_smoke_cpu_target_records_its_best_trial_in_the_store(local: Local) -> None:
    example = local.root / "ray-tune-smoke"
    shutil.copytree(REPO / "examples" / "ray-tune-smoke", example)
    gpu = local.tau("run", "tune", "--local", cwd=example, check=False)
    assert gpu.returncode == 1 and "asks for GPUs and this machine has none" in gpu.stderr, gpu.stderr
    assert "compute.gpus_per_worker: 0" in gpu.stderr and "Traceback" not in gpu.stderr
    proc = local.tau("run", "tune-cpu", "--local", "--follow", cwd=example)
    assert "Best config {'batch_size': 64, 'lr': 0.1}" in proc.stdout, proc.stdout[-3000:]
    run = next(line.split()[-1] for line in proc.stdout.splitlines() if line.startswith("Run: "))
    doc = local.status(run)
    assert doc["succeeded"] and phases(doc)["Evidence"][0] == "done", doc
    best = json.loads(subprocess.run([TAU, "run", "get", run, "--artifact", "tune/best_trial.json", "-o", "raw"],
                                     env=local.env, capture_output=True, text=True, timeout=60).stdout)
    assert best["config"] == {"batch_size": 64, "lr": 0.1} and best["trials"] == 6 and best["errors"] == 0
    compare = subprocess.run([PORTAL, "experiment", "compare", "cpu-sweep", "--metric", "best/loss", "--direction",
                              "min", "--store", str(local.home / "expstore"), "-o", "json"],
                             env=local.env, capture_output=True, text=True, timeout=60)
    assert compare.returncode == 0, compare.stderr
    result = json.loads(compare.stdout)
    assert result["best_run_id"] == run and result["groups"][0]["best_value"] == pytest.approx(0.796875), result


def test_a_killed_supervisor_takes_its_head_and_driver_along(local: Local) -> None:
    """kill -9 of the supervisor: PR_SET_PDEATHSIG stops ``ray start``, which stops the head; the driver
    (its own session, ignoring SIGTERM) goes with the job agent; cancel then removes the temp root."""
    project = local.project("""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(600)
    """)
    run = local.submit(project)
    deadline = time.monotonic() + RUN_TIMEOUT
    while "ready" not in local.log(run).splitlines():
        assert time.monotonic() < deadline, local.log(run)
        time.sleep(0.5)
    record = local.record(run)
    sup = int(record["supervisor"]["pid"])
    os.kill(sup, signal.SIGKILL)  # the supervisor dies without cleaning up: its head follows it
    deadline = time.monotonic() + 90  # ray start stops its head gracefully: about 35 s on two loaded cores
    while local_ray.head_processes(local.home / "runs" / run) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:3] for pid in
            local_ray.head_processes(local.home / "runs" / run)]
    assert left == [], left
    assert local.status(run)["terminal"]  # status notices the lost supervisor
    local.tau("run", "cancel", run, "--timeout", "30s")
    assert not Path(record["ray"]["temp_root"]).exists()


def test_cancel_while_the_head_starts_leaves_nothing_behind(local: Local) -> None:
    project = local.project("print('never')\n")
    run = local.submit(project)
    deadline = time.monotonic() + 60
    while "[tau] starting a local Ray head" not in local.log(run):  # the head is on its way up
        assert time.monotonic() < deadline, local.log(run)
        time.sleep(0.05)
    local.tau("run", "cancel", run, "--timeout", "60s")
    record = local.record(run)
    assert record["state"] == "Cancelled", record
    log = local.log(run)
    assert "[tau] cancelled while the local Ray head was starting" in log and "never" not in log.splitlines(), log
    assert local_ray.head_processes(local.home / "runs" / run) == []
    temp_root = local.log(run).split("temp root ", 1)[1].split()[0]
    assert not Path(temp_root).exists(), temp_root


def test_a_preempted_run_resumes_from_its_checkpoint_on_a_fresh_head(local: Local) -> None:
    """``tau run resume``: attempt 1 saves a checkpoint and is killed from outside tau (Preempted, no retry
    configured); the resume starts a new head and submits a job whose driver sees TAU_RESUME_FROM."""
    project = local.project("""
        import os, signal
        checkpoints = os.path.join(os.environ["TAU_OUTPUT_DIR"], "checkpoints")
        resume = os.environ.get("TAU_RESUME_FROM")
        if resume is None:
            os.makedirs(checkpoints, exist_ok=True)
            open(os.path.join(checkpoints, "step.txt"), "w").write("5")
            print("saved step 5", flush=True)
            os.kill(os.getpid(), signal.SIGTERM)  # injected: the driver is preempted
        step = open(os.path.join(resume, "step.txt")).read()
        print("resumed at step", step, "from", resume, flush=True)
        open(os.path.join(os.environ["TAU_OUTPUT_DIR"], "final.txt"), "w").write("done after step " + step)
    """)
    run = local.submit(project)
    doc = local.wait(run)
    assert not doc["succeeded"] and local.record(run)["reason"] == "Preempted", doc
    dry = local.tau("run", "resume", run, "--config", "tau/job.yaml", "--dry-run", cwd=project)
    checkpoint = str(local.record(run)["output_dir"]) + "/checkpoints"
    import yaml

    plan = yaml.safe_load(dry.stdout)
    assert plan["resume_from"] == checkpoint and not [n for n in plan["notes"] if "warning" in n], plan
    resumed = local.tau("run", "resume", run, "--config", "tau/job.yaml", cwd=project)
    assert f"resuming local run {run} from {checkpoint}" in resumed.stdout, resumed.stdout
    doc = local.wait(run)
    assert doc["succeeded"], doc
    record = local.record(run)
    assert [a["state"] for a in record["attempts"]] == ["Failed", "Succeeded"], record["attempts"]
    assert record["attempts"][1]["resume_from"] == checkpoint
    assert record["attempts"][1]["ray_job"] == {"submission_id": f"{run}-a2", "state": "SUCCEEDED"}
    log = local.log(run)
    assert "saved step 5" in log and f"resumed at step 5 from {checkpoint}" in log, log
    assert log.count("[tau] starting a local Ray head") == 2, log  # the first head went with the first run
    raw = subprocess.run([TAU, "run", "get", run, "--artifact", "final.txt", "-o", "raw"], env=local.env,
                         capture_output=True, text=True, timeout=60)
    assert raw.stdout == "done after step 5", raw


def test_runs_submit_to_an_existing_head_when_asked(local: Local, monkeypatch: pytest.MonkeyPatch) -> None:
    """TAU_LOCAL_RAY_ADDRESS: two runs use one session head (started here as a user would, with a token)
    and leave it running; a malformed address is a one-line error naming the variable."""
    session = local.root / "session-head"
    session.mkdir()
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # start_head points this process at its head; undone after
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(session / local_ray.TOKEN_FILE))
    head = local_ray.start_head(session, 2, lambda _: None)
    try:
        local.env.update({"TAU_LOCAL_RAY_ADDRESS": head.dashboard, **local_ray.auth_env(session / local_ray.TOKEN_FILE)})
        project = local.project("""
            import os
            print("hello from the session head", os.environ["TAU_NUM_WORKERS"], flush=True)
        """)
        runs = [local.submit(project), local.submit(project)]
        for run in runs:
            doc = local.wait(run)
            assert doc["succeeded"], doc
            state, detail = phases(doc)["Ray job"]
            assert state == "done" and f"on the Ray head at {head.dashboard} (TAU_LOCAL_RAY_ADDRESS)" in detail, doc
            log = local.log(run)
            assert "hello from the session head 1" in log.splitlines(), log
            assert f"[tau] using the Ray head at {head.dashboard}" in log and "starting a local Ray head" not in log
            assert "stopping the local Ray head" not in log
        assert head.alive() and len(local_ray.head_processes(session)) >= 3  # the session head is still up
        local.env["TAU_LOCAL_RAY_ADDRESS"] = "127.0.0.1:8265"
        bad = local.tau("run", "job", "--local", cwd=project, check=False)
        assert bad.returncode == 1 and "TAU_LOCAL_RAY_ADDRESS='127.0.0.1:8265' is not the URL" in bad.stderr, bad
        assert "Traceback" not in bad.stderr
    finally:
        local_ray.stop_head(head)
    assert local_ray.head_processes(session) == []
