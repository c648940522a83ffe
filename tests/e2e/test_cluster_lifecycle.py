"""End to end through the `tau` entry point against the simulated TauGrid cluster.

Each test writes a small repository with a checked-in target, submits it with `tau run`, and
follows it with the lifecycle verbs.  Fake-clock tests move simulated time by hand; retry,
`--watch` and `logs -f` use the real clock sped up so the CLI can wait on its own.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tau_core import keys
from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario
from tau_testing.sim.scripts import PodScript, scripts_of

NS = ["-n", NAMESPACE]


def pull_until_watched(cluster: Any, job_name: str, *, watches: int = 1) -> None:
    """Script ``job_name``'s pod to pull its image until a client has opened ``watches`` pod watches, then run.

    A condition instead of a race between scaled time and process start-up: on a loaded machine the
    watching CLI may need seconds to start, and it must still see the pull before the pod is ready.
    """
    import threading
    import time

    opened = threading.Event()

    def watch_opened() -> None:
        deadline = time.monotonic() + 120  # generous: a stuck CLI fails its own assertions long before
        while time.monotonic() < deadline and cluster.requests.count(verb="watch", resource="pods") < watches:
            time.sleep(0.05)
        opened.set()

    book = scripts_of(cluster)
    book.add(lambda p: (p["metadata"].get("labels") or {}).get("job-name") == job_name and not opened.is_set(),
             PodScript(pull_seconds=10**6, run_seconds=600))
    book.add({"job-name": job_name}, PodScript(run_seconds=600))
    threading.Thread(target=watch_opened, daemon=True).start()


def write_target(repo: Path, name: str = "train", *, engine: str = "job", extra: str = "") -> Path:
    (repo / "tau").mkdir(parents=True, exist_ok=True)
    (repo / "train.py").write_text("print('training')\n")
    compute = ("compute:\n  gpus: 0\n  cpu_request: \"1\"\n  memory_limit: 1Gi\n" if engine == "job" else
               "compute:\n  workers: 1\n  gpus_per_worker: 0\n")
    body = (f"name: {name}\nengine: {engine}\nentrypoint: ../train.py\n{compute}"
            "runtime:\n  image: ghcr.io/acme/train:1.0\npolicy:\n  queue: jobqueue\n" + extra)
    path = repo / "tau" / f"{name}.yaml"
    path.write_text(body)
    return path


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(root)
    return root


def pods_of(scenario: TauGridScenario, job: str) -> list[dict[str, Any]]:
    return [p for p in scenario.cluster.store.list("v1", "Pod", NAMESPACE)
            if (p["metadata"].get("labels") or {}).get("job-name") == job]


def env_of(obj: dict[str, Any]) -> dict[str, str]:
    containers = obj["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in containers[0].get("env") or []}


def is_retry(pod: dict[str, Any]) -> bool:
    return any(e.get("name") == "TAU_RETRY_ATTEMPT" for c in pod["spec"]["containers"] for e in c.get("env") or [])


# -- success --------------------------------------------------------------------------------------

def test_job_succeeds_and_every_verb_follows_it(taugrid_cluster: TauGridScenario, tau_cli, repo: Path) -> None:
    cluster = taugrid_cluster.cluster
    scripts_of(cluster).add({"job-name": "train"}, PodScript(pull_seconds=2, run_seconds=10,
                                                            logs=["step 1 loss=0.9", "step 2 loss=0.4"]))
    write_target(repo)
    r = tau_cli("run", "train", *NS)
    assert r.exit_code == 0, r
    assert "Run: train" in r.stdout and "submitted train (kind=job, ns=aurora)" in r.stdout
    assert "tau run status train" in r.stdout

    r = tau_cli("run", "status", "train", *NS)
    assert r.exit_code == 0, r
    assert "[x] Submitted" in r.stdout and "1/1 admitted queue=jobqueue" in r.stdout

    r = tau_cli("run", "status", "train", *NS, "--run-profile")
    assert "Run profile:" in r.stdout and "queue: local=jobqueue cluster=tau-cq" in r.stdout, r
    assert "gpu_runtime: unavailable" in r.stdout

    cluster.advance(20)
    r = tau_cli("run", "status", "train", *NS, "-o", "json")
    doc = json.loads(r.stdout)
    assert doc["succeeded"] is True and doc["kind"] == "Job"
    assert [p["state"] for p in doc["phases"]].count("warning") == 0
    assert any(c.startswith("kubectl logs train-") for c in doc["diagnosticCommands"])

    r = tau_cli("run", "list", *NS)
    assert r.exit_code == 0, r
    assert "train" in r.stdout and "Succeeded" in r.stdout

    r = tau_cli("run", "logs", "train", *NS)
    assert r.stdout.splitlines() == ["step 1 loss=0.9", "step 2 loss=0.4"]

    r = tau_cli("run", "status", "train", *NS, "--diagnostic-hints")
    assert "kubectl top pod train-" in r.stdout and "-n aurora --context tau-sim-researcher" in r.stdout


def test_rayjob_succeeds_and_logs_are_the_driver_output(taugrid_cluster: TauGridScenario, tau_cli,
                                                       repo: Path) -> None:
    cluster = taugrid_cluster.cluster
    scripts_of(cluster).add({}, PodScript(run_seconds=15, logs=["driver: trial 1 done", "driver: best=0.1"]),
                            kind="RayJob")
    write_target(repo, "tune", engine="rayjob")
    r = tau_cli("run", "tune", *NS)
    assert r.exit_code == 0, r
    cluster.advance(8)
    r = tau_cli("run", "status", "tune", *NS)
    assert "[x] RayCluster" in r.stdout, r
    r = tau_cli("run", "logs", "tune", *NS)
    assert r.exit_code == 0, r
    assert "driver: trial 1 done" in r.stdout
    cluster.advance(30)
    r = tau_cli("run", "status", "tune", *NS, "-o", "json")
    doc = json.loads(r.stdout)
    assert doc["kind"] == "RayJob" and doc["succeeded"] is True
    names = [p["name"] for p in doc["phases"]]
    assert names[:3] == ["Submitted", "Kueue admission", "RayCluster"]
    assert names[-2:] == ["RayJob status", "Compute release"]
    r = tau_cli("run", "logs", "tune", *NS, "--timestamps")
    assert r.exit_code == 2 and "supported only for batch/v1 Job logs" in r.stderr


def test_cancel_a_rayjob_tears_down_its_cluster(taugrid_cluster: TauGridScenario, tau_cli, repo: Path) -> None:
    cluster = taugrid_cluster.cluster
    scripts_of(cluster).add({}, PodScript(run_seconds=600), kind="RayJob")
    write_target(repo, "ray-c", engine="rayjob")
    assert tau_cli("run", "ray-c", *NS).exit_code == 0
    cluster.advance(10)
    rayjob = cluster.store.get("ray.io/v1", "RayJob", NAMESPACE, "ray-c")
    raycluster = rayjob["status"]["rayClusterName"]
    assert [p for p in cluster.store.list("v1", "Pod", NAMESPACE)
            if (p["metadata"].get("labels") or {}).get("ray.io/cluster") == raycluster]
    r = tau_cli("run", "cancel", "ray-c", *NS, "--teardown-timeout", "30s", "--interval", "0.05s")
    assert r.exit_code == 0, r
    assert cluster.store.get("ray.io/v1", "RayJob", NAMESPACE, "ray-c") is None
    live = [p for p in cluster.store.list("v1", "Pod", NAMESPACE)
            if (p["metadata"].get("labels") or {}).get("ray.io/cluster") == raycluster
            and not p["metadata"].get("deletionTimestamp")]
    assert live == []


# -- pending, failures --------------------------------------------------------------------------------

def test_pending_on_quota_says_why(taugrid_cluster: TauGridScenario, tau_cli, repo: Path) -> None:
    write_target(repo, "huge").write_text(write_target(repo, "huge").read_text().replace('"1"', '"500"'))
    assert tau_cli("run", "huge", *NS).exit_code == 0
    taugrid_cluster.cluster.advance(5)
    r = tau_cli("run", "status", "huge", *NS)
    assert "[>] Kueue admission  0/1 admitted queue=jobqueue reason=couldn't assign flavors" in r.stdout, r
    assert "insufficient" in r.stdout and "quota" in r.stdout, r.stdout
    assert "tip: the queue lacks free quota right now" in r.stdout


@pytest.mark.realclock
def test_image_pull_failure_fails_watch(taugrid_factory, tau_cli, repo: Path) -> None:
    scenario = taugrid_factory(clock="real", time_scale=20)
    scripts_of(scenario.cluster).add({"job-name": "pull"}, PodScript(pull_error="ErrImagePull"))
    write_target(repo, "pull")
    assert tau_cli("run", "pull", *NS).exit_code == 0
    r = tau_cli("run", "status", "pull", *NS, "--watch", "--interval", "0.1s")
    assert r.exit_code == 1, r
    assert "watching aurora/pull every 0.1s" in r.stdout
    assert "[!] Image pull" in r.stdout and "ErrImagePull" in r.stdout
    assert "startup phase failed for aurora/pull" in r.stderr


@pytest.mark.realclock
def test_watch_follows_a_run_to_ready_and_exits_zero(taugrid_factory, tau_cli, repo: Path) -> None:
    scenario = taugrid_factory(clock="real", time_scale=10)
    pull_until_watched(scenario.cluster, "w")
    write_target(repo, "w")
    assert tau_cli("run", "w", *NS).exit_code == 0
    r = tau_cli("run", "status", "w", *NS, "--watch", "--interval", "0.05s")
    assert r.exit_code == 0, r
    frames = r.stdout.strip().split("\n\n")
    assert len(frames) >= 2  # one frame per change: at least "pulling" and "ready"
    assert "[>] Image pull" in frames[0]  # the pull lasts until the watch is open
    assert "[x] Ready" in frames[-1]


def test_status_flag_conflicts_are_usage_errors(taugrid_cluster, tau_cli, repo: Path) -> None:
    for args in (["--watch", "--diagnostic-hints"], ["--watch", "-o", "json"], ["--diagnostic-hints", "-o", "json"],
                 ["-o", "yaml"], ["--interval", "0s", "--watch"]):
        r = tau_cli("run", "status", "x", *NS, *args)
        assert r.exit_code == 2, (args, r)


# -- retry and resume --------------------------------------------------------------------------------

RETRY = "resilience:\n  max_retries: 2\n  retry_on: [{on}]\n  backoff_initial: 0s\n"


@pytest.mark.realclock
def test_oomkilled_is_retried_when_retry_on_allows_it(taugrid_factory, tau_cli, repo: Path) -> None:
    scenario = taugrid_factory(clock="real", time_scale=40)
    book = scripts_of(scenario.cluster)
    book.add(lambda p: (p["metadata"].get("labels") or {}).get("job-name") == "oom" and not is_retry(p),
             PodScript(run_seconds=5, oom=True))
    book.add({"job-name": "oom"}, PodScript(run_seconds=5))
    write_target(repo, "oom", extra=RETRY.format(on="oomkilled"))  # matched case-insensitively
    r = tau_cli("run", "oom", *NS)
    assert r.exit_code == 0, r
    assert "attempt 1/2 failed (OOMKilled) — retrying in 0s" in r.stderr
    assert "workload aurora/oom completed successfully" in r.stderr
    job = scenario.cluster.store.get("batch/v1", "Job", NAMESPACE, "oom")
    env = env_of(job)
    assert env["TAU_RETRY_ATTEMPT"] == "1" and env["TAU_RETRY_MAX"] == "2"
    assert env["TAU_RETRY_REASON"] == "OOMKilled"
    assert env["TAU_RESUME_FROM"] == "/data/checkpoints/finetunes/oom"
    assert job["metadata"]["annotations"][keys.RETRY_ATTEMPT] == "1"
    events = {e["metadata"]["name"]: e for e in scenario.cluster.store.list("v1", "Event", NAMESPACE)}
    assert events["oom-retry-1"]["reason"] == "RayJobAttempt"
    assert "attempt=1/2 failure=OOMKilled" in events["oom-retry-1"]["message"]
    assert "oom-retry-succeeded-1" in events
    r = tau_cli("run", "status", "oom", *NS)
    assert "attempt 1/2" in r.stdout


@pytest.mark.realclock
def test_oomkilled_is_not_retried_by_default(taugrid_factory, tau_cli, repo: Path) -> None:
    scenario = taugrid_factory(clock="real", time_scale=40)
    scripts_of(scenario.cluster).add({"job-name": "oom2"}, PodScript(run_seconds=5, oom=True))
    write_target(repo, "oom2", extra="resilience:\n  max_retries: 2\n  backoff_initial: 0s\n")
    r = tau_cli("run", "oom2", *NS)
    assert r.exit_code == 1, r
    assert "workload aurora/oom2 failed (OOMKilled) — not in retry_on list [Preempted, Evicted]" in r.stderr
    assert scenario.cluster.store.get("batch/v1", "Job", NAMESPACE, "oom2") is not None


@pytest.mark.realclock
def test_preemption_is_retried_until_the_budget_is_exhausted(taugrid_factory, tau_cli, repo: Path) -> None:
    scenario = taugrid_factory(clock="real", time_scale=40)
    scripts_of(scenario.cluster).add({"job-name": "pre"}, PodScript(run_seconds=60, preempt_after=3))
    write_target(repo, "pre", extra=RETRY.format(on="Preempted"))
    r = tau_cli("run", "pre", *NS)
    assert r.exit_code == 1, r
    assert "attempt 1/2 failed (Preempted)" in r.stderr and "attempt 2/2 failed (Preempted)" in r.stderr
    assert "exhausted all 2 retries (last failure: Preempted)" in r.stderr
    events = {e["metadata"]["name"] for e in scenario.cluster.store.list("v1", "Event", NAMESPACE)}
    assert {"pre-retry-1", "pre-retry-2", "pre-retries-exhausted-2"} <= events
    job = scenario.cluster.store.get("batch/v1", "Job", NAMESPACE, "pre")
    assert job["metadata"]["annotations"][keys.RETRY_ATTEMPT] == "2"


@pytest.mark.realclock
def test_preemption_retry_then_success(taugrid_factory, tau_cli, repo: Path) -> None:
    scenario = taugrid_factory(clock="real", time_scale=40)
    book = scripts_of(scenario.cluster)
    book.add(lambda p: (p["metadata"].get("labels") or {}).get("job-name") == "pre2" and not is_retry(p),
             PodScript(run_seconds=60, preempt_after=3))
    book.add({"job-name": "pre2"}, PodScript(run_seconds=4))
    write_target(repo, "pre2", extra=RETRY.format(on="Preempted"))
    r = tau_cli("run", "pre2", *NS)
    assert r.exit_code == 0, r
    assert "attempt 1/2 failed (Preempted)" in r.stderr
    assert env_of(scenario.cluster.store.get("batch/v1", "Job", NAMESPACE, "pre2"))["TAU_RETRY_REASON"] == \
        "Preempted"


def test_resume_after_a_failure(taugrid_cluster: TauGridScenario, tau_cli, repo: Path) -> None:
    cluster = taugrid_cluster.cluster
    book = scripts_of(cluster)
    book.add(lambda p: (p["metadata"].get("labels") or {}).get("job-name") == "res" and not any(
        e.get("name") == "TAU_RESUME_FROM" for c in p["spec"]["containers"] for e in c.get("env") or []),
        PodScript(run_seconds=60, evict_after=3))
    book.add({"job-name": "res"}, PodScript(run_seconds=5))
    config = write_target(repo, "res")
    assert tau_cli("run", "res", *NS).exit_code == 0
    r = tau_cli("run", "resume", "res", "--config", str(config), *NS)
    assert r.exit_code == 1 and "still running — cancel it first" in r.stderr, r
    cluster.advance(10)
    old_uid = cluster.store.get("batch/v1", "Job", NAMESPACE, "res")["metadata"]["uid"]
    r = tau_cli("run", "resume", "res", "--config", str(config), *NS, "--dry-run")
    assert r.exit_code == 0, r
    assert "TAU_RESUME_FROM" in r.stdout
    assert cluster.store.get("batch/v1", "Job", NAMESPACE, "res")["metadata"]["uid"] == old_uid
    r = tau_cli("run", "resume", "res", "--config", str(config), *NS, "--from", "/data/ckpt/res/step-9")
    assert r.exit_code == 0, r
    assert "resumed res from /data/ckpt/res/step-9 after Evicted" in r.stdout
    job = cluster.store.get("batch/v1", "Job", NAMESPACE, "res")
    assert job["metadata"]["uid"] != old_uid
    assert env_of(job)["TAU_RESUME_FROM"] == "/data/ckpt/res/step-9"
    cluster.advance(15)
    r = tau_cli("run", "resume", "res", "--config", str(config), *NS)
    assert r.exit_code == 1 and "completed successfully — nothing to resume" in r.stderr


def test_resume_refuses_oom_without_force_and_unknown(taugrid_cluster: TauGridScenario, tau_cli,
                                                      repo: Path) -> None:
    cluster = taugrid_cluster.cluster
    scripts_of(cluster).add({"job-name": "o"}, PodScript(run_seconds=3, oom=True))
    scripts_of(cluster).add({"job-name": "u"}, PodScript(run_seconds=3, exit_code=3))
    cfg_o, cfg_u = write_target(repo, "o"), write_target(repo, "u")
    assert tau_cli("run", "o", *NS).exit_code == 0
    assert tau_cli("run", "u", *NS).exit_code == 0
    cluster.advance(10)
    r = tau_cli("run", "resume", "o", "--config", str(cfg_o), *NS)
    assert r.exit_code == 1 and "OOMKilled" in r.stderr and "--force" in r.stderr, r
    r = tau_cli("run", "resume", "u", "--config", str(cfg_u), *NS)
    assert r.exit_code == 1 and "non-retryable reason Unknown" in r.stderr, r
    cfg_o.write_text(cfg_o.read_text().replace("memory_limit: 1Gi", "memory_limit: 2Gi"))
    r = tau_cli("run", "resume", "o", "--config", str(cfg_o), *NS, "--force")
    assert r.exit_code == 0, r
    assert "config hash changed" in r.stderr


# -- cancel, logs -f ------------------------------------------------------------------------------------

def test_cancel_during_a_run(taugrid_cluster: TauGridScenario, tau_cli, repo: Path) -> None:
    cluster = taugrid_cluster.cluster
    scripts_of(cluster).add({"job-name": "c"}, PodScript(run_seconds=None))
    write_target(repo, "c")
    assert tau_cli("run", "c", *NS).exit_code == 0
    cluster.advance(5)
    assert pods_of(taugrid_cluster, "c")
    r = tau_cli("run", "cancel", "c", *NS, "--teardown-timeout", "20s", "--interval", "0.05s")
    assert r.exit_code == 0, r
    assert "cancelled aurora/c" in r.stdout
    assert cluster.store.get("batch/v1", "Job", NAMESPACE, "c") is None
    assert not [p for p in pods_of(taugrid_cluster, "c") if not p["metadata"].get("deletionTimestamp")]
    r = tau_cli("run", "cancel", "c", *NS)
    assert r.exit_code == 1 and "no Job or RayJob named \"c\"" in r.stderr


def test_cancel_timeout_prints_a_manual_cleanup_command(taugrid_cluster: TauGridScenario, tau_cli,
                                                         repo: Path) -> None:
    cluster = taugrid_cluster.cluster
    scripts_of(cluster).add({"job-name": "stuck"}, PodScript(run_seconds=None))
    write_target(repo, "stuck")
    assert tau_cli("run", "stuck", *NS).exit_code == 0
    cluster.advance(5)
    (pod,) = pods_of(taugrid_cluster, "stuck")
    pod["metadata"]["finalizers"] = ["example.com/hold"]
    cluster.store.update(pod)
    r = tau_cli("run", "cancel", "stuck", *NS, "--teardown-timeout", "0.3s", "--interval", "0.05s")
    assert r.exit_code == 1, r
    assert "timed out after 0.3s waiting for aurora/stuck to tear down (1 pod(s) remain)" in r.stderr
    assert "kubectl delete pods -n aurora -l controller-uid=" in r.stderr


@pytest.mark.realclock
def test_logs_follow_until_completion(taugrid_factory, tau_cli, repo: Path) -> None:
    scenario = taugrid_factory(clock="real", time_scale=20)
    lines = [f"step {i}" for i in range(1, 9)]
    scripts_of(scenario.cluster).add({"job-name": "f"}, PodScript(pull_seconds=2, run_seconds=8, logs=lines,
                                                                 log_every=1))
    write_target(repo, "f")
    assert tau_cli("run", "f", *NS).exit_code == 0
    r = tau_cli("run", "logs", "f", *NS, "-f")
    assert r.exit_code == 0, r
    assert r.stdout.splitlines() == lines


# -- run get --------------------------------------------------------------------------------------------

STORAGE = "storage:\n  data_pvc: blob-training\n  output: /data/projects/aurora/runs/art\n"  # under the workspace output root


def test_run_get_artifact_and_hostile_paths(taugrid_cluster: TauGridScenario, tau_cli, repo: Path) -> None:
    taugrid_cluster.write("projects/aurora/runs/art/metrics.json", '{"loss": 0.25}\n')
    write_target(repo, "art", extra=STORAGE)
    assert tau_cli("run", "art", *NS).exit_code == 0
    r = tau_cli("run", "get", "art", *NS)
    assert r.exit_code == 0, r
    assert "PATH: /data/projects/aurora/runs/art" in r.stdout and "metrics.json" in r.stdout
    assert "PVC:  blob-training" in r.stdout
    r = tau_cli("run", "get", "art", *NS, "--artifact", "metrics.json", "-o", "raw")
    assert r.stdout == '{"loss": 0.25}\n'
    r = tau_cli("run", "get", "art", *NS, "-o", "json")
    assert json.loads(r.stdout)["entries"][0]["path"] == "metrics.json"
    before = len(taugrid_cluster.cluster.requests.entries)
    for hostile in ("../../etc/passwd", "/etc/passwd", "a/../../x.txt", "evil -> /etc/shadow"):
        r = tau_cli("run", "get", "art", *NS, "--artifact", hostile)
        assert r.exit_code == 2, (hostile, r)
        assert "--artifact" in r.stderr
    assert len(taugrid_cluster.cluster.requests.entries) == before


# -- robustness ---------------------------------------------------------------------------------------------

def test_status_is_right_with_20_percent_503s_on_reads(taugrid_cluster: TauGridScenario, tau_cli,
                                                       repo: Path) -> None:
    cluster = taugrid_cluster.cluster
    scripts_of(cluster).add({"job-name": "flaky"}, PodScript(run_seconds=5))
    write_target(repo, "flaky")
    assert tau_cli("run", "flaky", *NS).exit_code == 0
    cluster.advance(10)
    fault = cluster.faults.add(method="GET", status=503, rate=0.2)
    try:
        for _ in range(5):
            r = tau_cli("run", "status", "flaky", *NS, "-o", "json")
            assert r.exit_code == 0, r
            doc = json.loads(r.stdout)
            assert doc["succeeded"] is True
    finally:
        fault.remove()
    assert fault.fired > 0


def test_dropped_connection_after_create_does_not_submit_twice(taugrid_cluster: TauGridScenario, tau_cli,
                                                               repo: Path) -> None:
    cluster = taugrid_cluster.cluster
    write_target(repo, "drop")
    fault = cluster.faults.latency(1.5, method="POST", path_regex="/jobs$", count=1)
    try:
        r = tau_cli("run", "drop", *NS, env={"TAU_REQUEST_TIMEOUT": "0.5"})
    finally:
        fault.remove()
    assert r.exit_code == 0, r

    def posts() -> list[Any]:
        return [x for x in cluster.requests.entries if x.method == "POST" and x.resource == "jobs.batch"]

    cluster.wait_for(lambda: len(posts()) == 2, timeout=10)  # the lost create lands late; its repeat is safe
    assert sorted(x.status for x in posts()) == [201, 409]
    jobs = [j for j in cluster.store.list("batch/v1", "Job", NAMESPACE) if j["metadata"]["name"] == "drop"]
    assert len(jobs) == 1


def test_researcher_without_permission_gets_a_clear_forbidden_error(taugrid_factory, tau_cli, repo: Path) -> None:
    taugrid_factory(user="outsider")
    write_target(repo, "nope")
    r = tau_cli("run", "nope", *NS)
    assert r.exit_code == 1
    # refused while resolving the workspace (its LocalQueue), before anything is created
    assert 'error: forbidden: you may not get localqueues.kueue.x-k8s.io in namespace "aurora"' in r.stderr
    assert "tau-researcher-v1 role" in r.stderr
    r = tau_cli("run", "status", "nope", *NS)
    assert r.exit_code == 1 and "forbidden: you may not get jobs.batch" in r.stderr
    assert "Traceback" not in r.stderr


def test_unreachable_cluster_and_bad_name(tau_cli, tau_env, repo: Path, tmp_path: Path) -> None:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "gone",
              "clusters": [{"name": "gone", "cluster": {"server": "http://127.0.0.1:9"}}],
              "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}]}
    (tmp_path / "kc").write_text(json.dumps(config))
    r = tau_cli("run", "status", "x", *NS, env={"KUBECONFIG": str(tmp_path / "kc")})
    assert r.exit_code == 1
    assert "cannot reach the Kubernetes API server at http://127.0.0.1:9" in r.stderr
    r = tau_cli("run", "status", "Bad_Name", *NS)
    assert r.exit_code == 1 and "not a valid run name" in r.stderr


def test_expired_credential_and_missing_crds_are_explained(taugrid_cluster: TauGridScenario, tau_cli,
                                                          repo: Path, tmp_path: Path) -> None:
    config = taugrid_cluster.cluster.kubeconfig("researcher")
    for user in config["users"]:
        user["user"]["token"] = "expired"
    (tmp_path / "expired").write_text(json.dumps(config))
    r = tau_cli("run", "list", *NS, env={"KUBECONFIG": str(tmp_path / "expired")})
    assert r.exit_code == 1
    assert "rejected the credential for context \"tau-sim-researcher\" (401 Unauthorized)" in r.stderr
    assert "sign in again" in r.stderr
    taugrid_cluster.cluster.store.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", None,
                                         "workspaces.tau.azure.com")
    r = tau_cli("run", "list")  # no -n: the workspace lookup needs the TauGrid CRDs
    assert r.exit_code == 1
    assert "does not serve workspaces.tau.azure.com: it is not a TauGrid cluster" in r.stderr
    assert "tau cluster install" in r.stderr


@pytest.mark.realclock
def test_interrupting_the_waiting_cli_loses_nothing(taugrid_factory, tau_env, tau_cli, repo: Path) -> None:
    """Ctrl-C while `tau run` waits for a retried run: it exits 130, the run and its attempt count stay."""
    import os
    import signal
    import sys
    import time

    scenario = taugrid_factory(clock="real", time_scale=5)
    book = scripts_of(scenario.cluster)
    book.add(lambda p: (p["metadata"].get("labels") or {}).get("job-name") == "intr" and not is_retry(p),
             PodScript(run_seconds=2, oom=True))
    book.add({"job-name": "intr"}, PodScript(run_seconds=3600))
    write_target(repo, "intr", extra=RETRY.format(on="OOMKilled"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAU_")}
    env.update({k: v for k, v in tau_env.items() if v is not None})
    proc = subprocess.Popen([sys.executable, "-c", "from tau_core.cli import main; main()", "run", "intr", *NS],
                            env=env, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def retried() -> bool:
            job = scenario.cluster.store.get("batch/v1", "Job", NAMESPACE, "intr")
            return bool(job and (job["metadata"].get("annotations") or {}).get(keys.RETRY_ATTEMPT) == "1")

        # Once the second attempt exists the CLI is either replacing the workload (Ctrl-C is held until the
        # replacement is submitted) or waiting on it: both must end in exit 130 with nothing lost.
        deadline = time.monotonic() + 120
        while not retried():
            assert proc.poll() is None, proc.communicate()
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"the run was never retried: {proc.communicate()}")
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted while waiting for aurora/intr; it keeps running and its retry count is kept" in err
    assert "Traceback" not in err
    job = scenario.cluster.store.get("batch/v1", "Job", NAMESPACE, "intr")
    assert job is not None and job["metadata"]["annotations"][keys.RETRY_ATTEMPT] == "1"
    r = tau_cli("run", "status", "intr", *NS)
    assert r.exit_code == 0 and "attempt 1/2" in r.stdout, r


def test_tau_logs_root_finds_the_run_through_the_current_kubeconfig(taugrid_cluster: TauGridScenario, tau_cli,
                                                                    repo: Path) -> None:
    scripts_of(taugrid_cluster.cluster).add({"job-name": "lg"}, PodScript(run_seconds=2, logs=["hello from lg"]))
    write_target(repo, "lg")
    assert tau_cli("run", "lg", *NS).exit_code == 0
    taugrid_cluster.cluster.advance(5)
    r = tau_cli("logs", "lg")
    assert r.exit_code == 0, r
    assert r.stdout.splitlines() == ["hello from lg"]
    r = tau_cli("logs", "missing-run")
    assert r.exit_code == 1 and 'run "missing-run" was not found' in r.stderr


DESCRIPTOR = ("schema: tau.workspace.connection.v1\nworkspace: aurora\ncluster:\n  contextName: tau-sim-researcher\n"
              "access:\n  method: kubeconfig\nauthorization:\n  mode: workspace-rbac\n"
              "  requiredRole: tau-researcher-v1\nrequirements:\n  minTauVersion: 0.1.0\n")


def test_lifecycle_verbs_use_the_repository_connection(taugrid_cluster: TauGridScenario, tau_cli,
                                                       repo: Path) -> None:
    scripts_of(taugrid_cluster.cluster).add({"job-name": "conn"}, PodScript(run_seconds=2, logs=["via connection"]))
    write_target(repo, "conn")
    (repo / "tau" / "workspace.connection.yaml").write_text(DESCRIPTOR)
    r = tau_cli("run", "conn", input="y\n")  # first use: review and approve the connection
    assert r.exit_code == 0, r
    assert "Approve and connect?" in r.stderr
    taugrid_cluster.cluster.advance(5)
    r = tau_cli("run", "status", "conn")  # no -n: the pinned namespace of the cached connection
    assert r.exit_code == 0, r
    assert "Run: aurora/conn (Job)" in r.stdout and "Workspace: aurora" in r.stdout
    r = tau_cli("logs", "conn")
    assert r.exit_code == 0 and r.stdout.splitlines() == ["via connection"], r
    r = tau_cli("run", "list", "-o", "json")
    assert [d["name"] for d in json.loads(r.stdout)] == ["conn"]
    r = tau_cli("run", "status", "conn", "--diagnostic-hints")
    hints = [line for line in r.stdout.splitlines() if "kubectl logs conn-" in line]
    assert hints and "--context tau-sim-researcher --kubeconfig " in hints[0]
    assert "/kubeconfigs/" in hints[0]  # the connection's isolated kubeconfig, not the ambient one


@pytest.mark.realclock
def test_watch_survives_dropped_watches_and_503s(taugrid_factory, tau_cli, repo: Path) -> None:
    scenario = taugrid_factory(clock="real", time_scale=10)
    scripts_of(scenario.cluster).add({"job-name": "dw"}, PodScript(pull_seconds=20, run_seconds=600))
    write_target(repo, "dw")
    assert tau_cli("run", "dw", *NS).exit_code == 0
    drops = scenario.cluster.faults.drop_watches(after_events=0, count=4)
    flaky = scenario.cluster.faults.add(method="GET", status=503, rate=0.2)
    try:
        r = tau_cli("run", "status", "dw", *NS, "--watch", "--interval", "0.05s")
    finally:
        drops.remove()
        flaky.remove()
    assert r.exit_code == 0, r
    assert "[x] Ready" in r.stdout.strip().split("\n\n")[-1]


@pytest.mark.realclock
def test_tau_logs_follows_the_ray_driver_until_it_finishes(taugrid_factory, tau_cli, repo: Path) -> None:
    scenario = taugrid_factory(clock="real", time_scale=10)
    lines = [f"driver step {i}" for i in range(1, 6)]
    scripts_of(scenario.cluster).add({}, PodScript(pull_seconds=2, run_seconds=10, logs=lines, log_every=2),
                                     kind="RayJob")
    write_target(repo, "rf", engine="rayjob")
    assert tau_cli("run", "rf", *NS).exit_code == 0
    r = tau_cli("logs", "rf", *NS, "-f")
    assert r.exit_code == 0, r
    assert r.stdout.splitlines() == lines


def test_status_and_logs_of_a_job_submitted_outside_taugrid(taugrid_cluster: TauGridScenario, tau_cli,
                                                           repo: Path) -> None:
    cluster = taugrid_cluster.cluster
    scripts_of(cluster).add({"job-name": "plain"}, PodScript(run_seconds=3, logs=["external output"]))
    cluster.store.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "plain", "namespace": NAMESPACE},
                          "spec": {"backoffLimit": 0, "template": {"spec": {
                              "restartPolicy": "Never",
                              "containers": [{"name": "work", "image": "busybox:1",
                                              "resources": {"requests": {"cpu": "100m"}}}]}}}})
    cluster.advance(10)
    r = tau_cli("run", "status", "plain", *NS)
    assert r.exit_code == 0, r
    assert "[-] Kueue admission  not queued through Kueue" in r.stdout
    assert "Result: succeeded" in r.stdout
    assert tau_cli("run", "logs", "plain", *NS, "-c", "work").stdout.splitlines() == ["external output"]
    assert "plain" not in tau_cli("run", "list", *NS).stdout
    assert "plain" in tau_cli("run", "list", *NS, "--include-external").stdout


@pytest.mark.realclock
def test_watch_redraws_in_place_on_a_terminal(taugrid_factory, tau_env, tau_cli, repo: Path) -> None:
    import os
    import pty
    import select
    import sys
    import time

    scenario = taugrid_factory(clock="real", time_scale=10)
    pull_until_watched(scenario.cluster, "tty")
    write_target(repo, "tty")
    assert tau_cli("run", "tty", *NS).exit_code == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAU_")}
    env.update({k: v for k, v in tau_env.items() if v is not None})
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", "from tau_core.cli import main; main()", "run", "status", "tty",
                             *NS, "--watch", "--interval", "0.1s"], env=env, cwd=repo, stdin=secondary,
                            stdout=secondary, stderr=secondary, close_fds=True)
    os.close(secondary)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.5)
            if ready:
                try:
                    data = os.read(primary, 65536)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(primary)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert code == 0, text
    assert text.count("\x1b[H\x1b[2J") >= 2  # every frame redraws the screen
    assert "watching aurora/tty every 0.1s" in text and "[x] Ready" in text
