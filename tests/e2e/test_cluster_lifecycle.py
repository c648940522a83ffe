"""End to end through the `tau` entry point against the simulated TauGrid cluster.

Each test writes a small repository with a checked-in target, submits it with `tau run`, and
follows it with the lifecycle verbs.  Fake-clock tests move simulated time by hand; retry,
`--watch` and `logs -f` use the real clock sped up so the CLI can wait on its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lifecycle_support import NS, RETRY, env_of, is_retry, pods_of, pull_until_watched, write_target

from tau_core import keys
from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario
from tau_testing.sim.scripts import PodScript, scripts_of

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
    assert any("[>] Image pull" in frame for frame in frames[:-1])  # the pull lasts until the watch has seen it
    assert "[x] Ready" in frames[-1]


def test_status_flag_conflicts_are_usage_errors(taugrid_cluster, tau_cli, repo: Path) -> None:
    for args in (["--watch", "--diagnostic-hints"], ["--watch", "-o", "json"], ["--diagnostic-hints", "-o", "json"],
                 ["-o", "yaml"], ["--interval", "0s", "--watch"]):
        r = tau_cli("run", "status", "x", *NS, *args)
        assert r.exit_code == 2, (args, r)


# -- retry and resume --------------------------------------------------------------------------------

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
