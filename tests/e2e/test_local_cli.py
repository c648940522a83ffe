"""End to end: the local backend through the installed ``tau`` entry point, in subprocesses.

Every test gets a private ``TAU_DATA_DIR`` (run registry, local /data, experiment store) and a
throw-away project with ``tau/<target>.yaml``; runs are submitted with ``tau run TARGET --local``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.realclock, pytest.mark.slow]  # real `tau` processes; minutes per round

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TAU = str(BIN / "tau")
PORTAL = str(BIN / "taugrid-portal")
QUICKSTART = REPO / "examples" / "quickstart"


class Local:
    """A private tau home plus helpers that drive ``tau`` as a user would."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "tau-home"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TAU_")}
        self.env.update({"TAU_DATA_DIR": str(self.home), "NO_COLOR": "1", "HOME": str(root),
                         "KUBECONFIG": str(root / "no-kubeconfig")})
        self.count = 0

    def project(self, script: str, target: str = "job", **config: Any) -> Path:
        self.count += 1
        project = self.root / f"project-{self.count}"
        (project / "tau").mkdir(parents=True)
        (project / "script.py").write_text(textwrap.dedent(script))
        cfg: dict[str, Any] = {"name": target, "engine": "job", "entrypoint": "../script.py",
                               "compute": {"gpus": 0}, "runtime": {"image": "python:3.12-slim"}}
        for key, value in config.items():
            if isinstance(value, dict) and isinstance(cfg.get(key), dict):
                cfg[key] = {**cfg[key], **value}
            else:
                cfg[key] = value
        (project / "tau" / f"{target}.yaml").write_text(json.dumps(cfg, indent=2))
        return project

    def tau(self, *args: str, cwd: Path | None = None, check: bool = True, timeout: float = 120,
            ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([TAU, *args], cwd=cwd or self.root, env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        if check:
            assert proc.returncode == 0, (args, proc.returncode, proc.stdout, proc.stderr)
        return proc

    def submit(self, project: Path, target: str = "job", *, local_flag: bool = True) -> str:
        proc = self.tau("run", target, *(["--local"] if local_flag else []), "-o", "json", cwd=project)
        doc = json.loads(proc.stdout)
        assert doc["backend"] == "local" and doc["created"] is True, doc
        return str(doc["run"])

    # -- lifecycle verbs, through the CLI ----------------------------------------------------
    def status(self, run: str) -> dict[str, Any]:
        proc = self.tau("run", "status", run, "-o", "json", check=False)
        assert proc.returncode in (0, 1), proc.stderr
        doc = json.loads(proc.stdout)
        extra = self._extra(run)
        return {"state": extra["state"], "terminal": doc["terminal"], "succeeded": doc["succeeded"],
                "failure": doc["failure"], "message": doc["message"],
                "phases": [(p["name"], p["state"]) for p in doc["phases"]], "extra": extra}

    def _extra(self, run: str) -> dict[str, Any]:
        import attrs

        from tau_core.backends.local.backend import LocalBackend
        return attrs.asdict(LocalBackend(env=self.env).status(_ref(run)).extra)  # the typed details, as plain data

    def wait(self, run: str, timeout: float = 60) -> dict[str, Any]:
        proc = self.tau("run", "status", run, "--watch", "--interval", "200ms", check=False, timeout=timeout)
        assert "Run: " in proc.stdout, proc.stderr
        doc = self.status(run)
        assert doc["terminal"], doc
        return doc

    def logs(self, run: str, *, follow: bool = False, tail: int = -1) -> list[str]:
        args = ["logs", run, "--tail", str(tail)] + (["-f"] if follow else [])
        return self.tau(*args).stdout.splitlines()

    def get(self, run: str, artifact: str | None = None) -> Any:
        if artifact is None:
            return json.loads(self.tau("run", "get", run, "-o", "json").stdout)
        proc = subprocess.run([TAU, "run", "get", run, "--artifact", artifact, "-o", "raw"], cwd=self.root,
                              env=self.env, capture_output=True, timeout=60)
        if proc.returncode != 0:
            from tau_core.errors import UsageError
            raise UsageError(proc.stderr.decode())
        return proc.stdout

    def cancel(self, run: str, timeout: float = 30) -> None:
        self.tau("run", "cancel", run, "--timeout", f"{int(timeout)}s")

    def resume(self, run: str, project: Path, target: str = "job") -> Any:
        return self.tau("run", "resume", run, "--config", f"tau/{target}.yaml", cwd=project)

    def wait_line(self, run: str, prefix: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(x.startswith(prefix) for x in self.logs(run)):
            assert time.monotonic() < deadline, self.logs(run)
            time.sleep(0.1)


def _ref(run: str) -> Any:
    from tau_core.lifecycle import RunRef

    return RunRef(name=run, backend="local")


@pytest.fixture
def local(tmp_path: Path) -> Local:
    return Local(tmp_path)


def test_quickstart_runs_to_completion_with_evidence_in_the_store(local: Local) -> None:
    run = local.submit(QUICKSTART, "train")
    doc = local.wait(run)
    assert doc["succeeded"], doc
    assert doc["phases"] == [("Submitted", "done"), ("Started", "done"), ("Running", "done"),
                             ("Completed", "done"), ("Evidence", "done")], doc
    out = Path(doc["extra"]["output_dir"])
    assert (out / "report.json").is_file() and (out / "checkpoints" / "checkpoint.json").is_file()
    chunks = sorted((out / "metrics").glob("chunk-*.jsonl"))
    assert len(chunks) == 40 and not list((out / "metrics").glob(".*"))
    row = json.loads(chunks[0].read_text())
    assert set(row) == {"_step", "_timestamp", "loss", "accuracy"} and row["_step"] == 0
    store = local.home / "expstore"
    search = subprocess.run([PORTAL, "experiment", "search", "--store", str(store), "-o", "json"],
                            capture_output=True, text=True, env=local.env, check=True)
    runs = {r["run_id"]: r for r in json.loads(search.stdout)["runs"]}
    assert run in runs and {"loss", "accuracy", "tau/run_status"} <= set(runs[run]["metric_names"])
    page = Path(doc["extra"]["stellar"])
    assert page.is_file() and out.as_uri() in page.read_text()
    again = subprocess.run([PORTAL, "experiment", "stellar", run, "--store", str(store), "-o", "json"],
                           capture_output=True, text=True, env=local.env)
    assert again.returncode == 0, again.stderr


def test_a_local_descriptor_makes_plain_tau_run_local(local: Local) -> None:
    run = local.submit(QUICKSTART, "train", local_flag=False)
    assert local.wait(run)["succeeded"]


def test_init_repo_local_scaffold_runs_its_smoke_target(local: Local) -> None:
    local.tau("workspace", "init-repo", "my-research", "--local")
    repo = local.root / "my-research"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    run = local.submit(repo, "smoke", local_flag=False)
    doc = local.wait(run)
    assert doc["succeeded"] and doc["phases"][-1] == ("Evidence", "done"), doc
    assert "step 1 loss" in "\n".join(local.logs(run))


def test_failing_exit_code(local: Local) -> None:
    run = local.submit(local.project("import sys\nprint('bad hyperparameter')\nsys.exit(7)\n"))
    doc = local.wait(run)
    assert doc["state"] == "Failed" and doc["failure"] == "Unknown" and doc["extra"]["exit_code"] == 7
    assert ("Failed", "warning") in doc["phases"]
    assert "bad hyperparameter" in local.logs(run)


def test_output_keeps_the_archived_log_the_cluster_wrapper_would(local: Local) -> None:
    script = "import sys\nprint('to out', flush=True)\nprint('to err', file=sys.stderr, flush=True)\nsys.exit(2)\n"
    run = local.submit(local.project(script))
    local.wait(run)
    archived = f"logs/{run}-main.log"  # logs/<pod>-<container>.log on a cluster; the run id stands for the pod
    assert archived in [e["path"] for e in local.get(run)["entries"]]
    assert local.get(run, archived).decode().splitlines() == ["to out", "to err"]


def test_run_list_shows_local_runs_without_a_cluster(local: Local) -> None:
    run = local.submit(local.project("import sys\nsys.exit(3)\n"))
    local.wait(run)
    proc = local.tau("run", "list", "-o", "json", check=False)
    rows = [r for r in json.loads(proc.stdout) if r["name"] == run]
    assert rows == [{"name": run, "namespace": None, "kind": "local", "status": "Failed (Unknown)", "queue": None,
                     "created": rows[0]["created"], "source": "local"}], proc.stdout
    assert rows[0]["created"]


def test_oom_is_classified(local: Local) -> None:
    run = local.submit(local.project("blob = bytearray(3 * 1024 ** 3)\n", compute={"memory_limit": "64Mi"}))
    doc = local.wait(run)
    assert doc["failure"] == "OOMKilled", doc


def test_cancel_during_a_run(local: Local) -> None:
    run = local.submit(local.project("import time\nprint('working', flush=True)\ntime.sleep(120)\n"))
    local.wait_line(run, "working")
    local.cancel(run)
    doc = local.status(run)
    assert doc["state"] == "Cancelled" and doc["extra"]["signal"] == "SIGTERM", doc


def test_retry_succeeds_on_the_second_attempt(local: Local) -> None:
    project = local.project("""
        import os
        if "TAU_RETRY_ATTEMPT" not in os.environ:
            bytearray(3 * 1024 ** 3)
        print("retry", os.environ["TAU_RETRY_ATTEMPT"], os.environ["TAU_RETRY_REASON"])
    """, compute={"memory_limit": "64Mi"},
        resilience={"max_retries": 1, "retry_on": ["OOMKilled"], "backoff_initial": "200ms"})
    run = local.submit(project)
    doc = local.wait(run)
    assert doc["succeeded"], doc
    assert [a["reason"] for a in doc["extra"]["attempts"]] == ["OOMKilled", "Completed"]
    assert "retry 1 OOMKilled" in local.logs(run)


def test_resume_from_a_checkpoint(local: Local) -> None:
    # The first attempt is slow (40 steps of 1 s), so it is still running when the evidence has arrived and the
    # cancel lands, however loaded the machine; the resumed attempt runs fast (the config change is only warned).
    def project_with(pause: str) -> Path:
        return local.project((QUICKSTART / "train.py").read_text(), target="train",
                             runtime={"env": {"QUICKSTART_STEPS": "40", "QUICKSTART_STEP_SECONDS": pause}},
                             metrics={"history": ["metrics/*.jsonl"]}, experiment={"project": "resume-demo"})

    project = project_with("1.0")
    run = local.submit(project, "train")
    local.wait_line(run, "step   7")
    # evidence arrives while the run progresses, not only at the end
    deadline = time.monotonic() + 30
    while True:
        search = subprocess.run([PORTAL, "experiment", "search", "--store", str(local.home / "expstore"), "-o",
                                 "json"], capture_output=True, text=True, env=local.env)
        found = [r for r in json.loads(search.stdout or '{"runs": []}').get("runs", []) if r["run_id"] == run]
        if found and "loss" in found[0]["metric_names"]:
            break
        assert time.monotonic() < deadline, search.stderr
        time.sleep(0.2)
    assert local.status(run)["state"] == "Running"
    local.cancel(run)
    assert local.status(run)["state"] == "Cancelled"
    fast = project_with("0.02")
    (project / "tau" / "train.yaml").write_text((fast / "tau" / "train.yaml").read_text())
    local.resume(run, project, "train")
    doc = local.wait(run)
    assert doc["succeeded"], doc
    resumed = [x for x in local.logs(run) if x.startswith("resumed from step")]
    assert resumed, local.logs(run)
    report = json.loads(local.get(run, "report.json"))
    assert report["resumed_from_step"] >= 5 and report["steps"] == 40


def test_logs_follow_until_the_end(local: Local) -> None:
    run = local.submit(local.project("""
        import time
        for i in range(15):
            print("tick", i, flush=True)
            time.sleep(0.05)
    """))
    lines = local.logs(run, follow=True)
    assert [x for x in lines if x.startswith("tick")] == [f"tick {i}" for i in range(15)]
    assert lines[-1] == "[tau] run succeeded"
    assert local.logs(run, tail=1) == ["[tau] run succeeded"]


def test_two_concurrent_runs(local: Local, tmp_path: Path) -> None:
    # each run waits for the other to start: both succeed only if they really ran at the same time
    script = """
        import os, pathlib, sys, time
        me, other = os.environ["WHO"], os.environ["OTHER"]
        barrier = pathlib.Path(os.environ["BARRIER"])
        (barrier / me).touch()
        deadline = time.time() + 60
        while not (barrier / other).exists():
            if time.time() > deadline:
                sys.exit("the other run never started")
            time.sleep(0.05)
        for i in range(3):
            print(me, i, flush=True)
    """
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    a = local.submit(local.project(script, runtime={"env": {"WHO": "a", "OTHER": "b", "BARRIER": str(barrier)}}))
    b = local.submit(local.project(script, runtime={"env": {"WHO": "b", "OTHER": "a", "BARRIER": str(barrier)}}))
    assert a != b
    assert local.wait(a)["succeeded"] and local.wait(b)["succeeded"]
    assert [x for x in local.logs(a) if not x.startswith("[tau]")] == [f"a {i}" for i in range(3)]
    assert [x for x in local.logs(b) if not x.startswith("[tau]")] == [f"b {i}" for i in range(3)]
    assert local.status(a)["extra"]["output_dir"] != local.status(b)["extra"]["output_dir"]


def test_the_cli_killed_mid_run_leaves_status_and_logs_right(local: Local) -> None:
    project = local.project("import time\nfor i in range(10):\n    print('tick', i, flush=True)\n"
                            "    time.sleep(0.1)\n")
    proc = subprocess.Popen([TAU, "run", "job", "--local"], cwd=project, env=local.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert first.startswith("Run: "), first
    run = first.split()[1]
    doc = local.wait(run)
    assert doc["succeeded"], doc
    assert [x for x in local.logs(run) if x.startswith("tick")] == [f"tick {i}" for i in range(10)]


def test_the_cli_killed_at_any_point_of_submission_leaves_a_consistent_registry(local: Local) -> None:
    from tau_core.backends.local.backend import LocalBackend

    project = local.project("print('ran to the end')\n")
    for delay in (0.05, 0.3, 0.6, 1.0):
        proc = subprocess.Popen([TAU, "run", "job", "--local"], cwd=project, env=local.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    runs = LocalBackend(env=local.env).list()
    for summary in runs:  # whatever got registered either runs to completion or says why it never started
        doc = local.wait(summary.ref.name)
        if doc["succeeded"]:
            assert "ran to the end" in local.logs(summary.ref.name)
        else:
            assert "exited before starting it" in doc["message"], doc


def test_hostile_artifact_paths_are_refused(local: Local, tmp_path: Path) -> None:
    from tau_core.errors import UsageError

    (tmp_path / "secret.txt").write_text("secret")
    run = local.submit(local.project(f"""
        import os, pathlib
        out = pathlib.Path(os.environ["TAU_OUTPUT_DIR"])
        (out / "ok.txt").write_text("ok")
        os.symlink({str(tmp_path / 'secret.txt')!r}, out / "escape.txt")
    """))
    local.wait(run)
    assert local.get(run, "ok.txt") == b"ok"
    for hostile in ("../../../secret.txt", "/etc/passwd", "escape.txt"):  # argv cannot carry NUL
        with pytest.raises(UsageError):
            local.get(run, hostile)


def test_env_secret_and_rayjob_fail_with_clear_errors(local: Local) -> None:
    secret = local.project("print(1)", runtime={"env_secret": {"HF_TOKEN": "hf-secret:token"}})
    proc = local.tau("run", "job", "--local", cwd=secret, check=False)
    assert proc.returncode == 1 and "runtime.env_secret" in proc.stderr and "Traceback" not in proc.stderr
    assert "hf-secret" not in proc.stderr
    ray = local.project("print(1)", engine="rayjob")
    cfg = json.loads((ray / "tau" / "job.yaml").read_text())
    cfg["compute"] = {"workers": 1, "gpus_per_worker": 0}
    (ray / "tau" / "job.yaml").write_text(json.dumps(cfg))
    no_ray = local.root / "no-ray"  # Ray is installed here: hide it as a machine without the extra would
    no_ray.mkdir()
    (no_ray / "sitecustomize.py").write_text("import sys\nsys.modules['ray'] = None\n")
    local.env["PYTHONPATH"] = str(no_ray) + os.pathsep + local.env.get("PYTHONPATH", "")
    proc = local.tau("run", "job", "--local", cwd=ray, check=False)
    assert proc.returncode == 1 and "pip install 'tau[ray]'" in proc.stderr, proc.stderr


def test_three_projects_on_one_machine_all_keep_their_evidence(local: Local) -> None:
    """Issue 19, D13: every project has a run group `default`; the store keys groups by project."""
    first = local.submit(QUICKSTART, "train")
    assert local.wait(first)["phases"][-1] == ("Evidence", "done")
    for name in ("r2", "r3"):
        local.tau("workspace", "init-repo", name, "--local")
        repo = local.root / name
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        run = local.submit(repo, "smoke", local_flag=False)
        doc = local.wait(run)
        assert doc["succeeded"] and doc["phases"][-1] == ("Evidence", "done"), doc
        assert Path(doc["extra"]["stellar"]).is_file(), doc
    search = subprocess.run([PORTAL, "experiment", "list", "--kind", "groups", "--store", str(local.home / "expstore"),
                             "-o", "json"], capture_output=True, text=True, env=local.env, check=True)
    groups = {(g["project"], g["run_group_id"]) for g in json.loads(search.stdout)}
    assert {("quickstart", "default"), ("r2", "default"), ("r3", "default")} <= groups, groups
