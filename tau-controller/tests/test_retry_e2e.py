"""Server-side retry: preemption, then the controller's retry, then success — with no CLI running, and with a
CLI following (exactly one resubmission)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ctrl_platform import install_platform, workspace

from tau_core import keys
from tau_testing.sim.scripts import PodScript, scripts_of

pytestmark = pytest.mark.realclock  # the controller and a sped-up real-clock simulator
TAU = keys.API_VERSION
RETRY = "resilience:\n  max_retries: 2\n  retry_on: [Preempted]\n  backoff_initial: 0s\n"


def _is_retry(pod: dict[str, Any]) -> bool:
    return any(e.get("name") == "TAU_RETRY_ATTEMPT" for c in pod["spec"]["containers"] for e in c.get("env") or [])


@pytest.fixture
def live(sim_cluster_factory, controller_factory, tau_env, tmp_path, monkeypatch, tau_commands):
    cluster = sim_cluster_factory(clock="real", time_scale=40)
    install_platform(cluster)
    controller = controller_factory(cluster)
    cluster.store.create(workspace())
    cluster.wait_for(lambda: ((cluster.store.get(TAU, "TauWorkspace", "tau-system", "aurora") or {}).get("status")
                              or {}).get("phase") == "Ready", timeout=30)
    cluster.wait_for(lambda: any(c["type"] == "ServerSideRetry" and c["status"] == "True" for c in
                                 ((cluster.store.get(TAU, "TauCluster", None, "cluster") or {}).get("status") or {})
                                 .get("conditions") or []), timeout=30)
    repo = tmp_path / "repo"
    (repo / "tau").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "train.py").write_text("print('training')\n")
    monkeypatch.chdir(repo)
    tau_env["KUBECONFIG"] = str(cluster.write_kubeconfig(tmp_path / "kube" / "config", user="researcher"))
    book = scripts_of(cluster)
    book.add(lambda p: (p["metadata"].get("labels") or {}).get("job-name") == "pre" and not _is_retry(p),
             PodScript(run_seconds=60, preempt_after=3))
    book.add({"job-name": "pre"}, PodScript(run_seconds=4))
    (repo / "tau" / "pre.yaml").write_text(
        "name: pre\nengine: job\nentrypoint: ../train.py\ncompute:\n  gpus: 0\n  cpu_request: \"1\"\n"
        "  memory_limit: 1Gi\nruntime:\n  image: ghcr.io/acme/train:1.0\npolicy:\n  queue: jobqueue\n" + RETRY)
    return cluster, controller


def _job(cluster: Any) -> dict[str, Any] | None:
    return cluster.store.get("batch/v1", "Job", "aurora", "pre")


def _complete(cluster: Any) -> bool:
    job = _job(cluster) or {}
    return any(c["type"] == "Complete" and c["status"] == "True" for c in (job.get("status") or {}).get("conditions")
               or [])


def _env(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in job["spec"]["template"]["spec"]["containers"][0].get("env") or []}


def test_controller_retries_after_preemption_with_no_cli_running(live, tau_env):
    cluster, _ = live
    env = {k: v for k, v in {**os.environ, **tau_env}.items() if v is not None}
    proc = subprocess.Popen([shutil.which("tau") or "tau", "run", "pre", "-n", "aurora"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        cluster.wait_for(lambda: _job(cluster) is not None or proc.poll() is not None, timeout=60)
    finally:
        proc.send_signal(signal.SIGKILL)  # the laptop closes right after submitting
        output, _ = proc.communicate(timeout=30)
    first = _job(cluster)
    assert first is not None, output
    assert first["metadata"]["annotations"][keys.RETRY_OWNER] == "controller", output
    cluster.wait_for(lambda: _complete(cluster), timeout=60)
    job = _job(cluster)
    annotations = job["metadata"]["annotations"]
    assert annotations[keys.RETRY_ATTEMPT] == "1" and annotations[keys.RETRY_REASON] == "Preempted"
    assert annotations[keys.SUBMISSION_ID] != first["metadata"]["annotations"][keys.SUBMISSION_ID]
    env_vars = _env(job)
    assert (env_vars["TAU_RETRY_ATTEMPT"], env_vars["TAU_RETRY_MAX"], env_vars["TAU_RETRY_REASON"]) == \
        ("1", "2", "Preempted")
    assert env_vars["TAU_RESUME_FROM"]
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "ghcr.io/acme/train:1.0"
    event = cluster.store.get("v1", "Event", "aurora", "pre-retry-1")
    assert event["reportingComponent"] == "tau-core-controller" and "attempt=1/2 failure=Preempted" in event["message"]
    cluster.wait_for(lambda: cluster.store.get("v1", "Event", "aurora", "pre-retry-succeeded-1"), timeout=30)


def test_cli_follows_and_only_the_controller_resubmits(live, tau_cli):
    cluster, _ = live
    result = tau_cli("run", "pre", "-n", "aurora")
    assert result.exit_code == 0, result
    assert "is owned by the Tau controller" in result.stderr
    # The CLI only follows: it never says it retries.  It reports the failed attempt either as it sees it fail, or,
    # when the controller (backoff 0 s) replaced the Job before this command saw it Failed, after the fact.
    assert "— retrying in" not in result.stderr
    assert ("attempt 1/2 failed (Preempted) — the Tau controller retries in 0s" in result.stderr
            or "attempt 1/2 failed — the Tau controller has already resubmitted it" in result.stderr), result.stderr
    assert result.stderr.count("attempt 1/2 failed") == 1
    assert "workload aurora/pre completed successfully" in result.stderr
    # the controller has seen the retried run through (a second resubmission would come before this)
    cluster.wait_for(lambda: cluster.store.get("v1", "Event", "aurora", "pre-retry-succeeded-1"), timeout=60)
    cluster.wait_for(lambda: _record_state(cluster) == "submitted", timeout=60)
    creates = [r for r in cluster.requests.entries if r.method == "POST" and r.resource == "jobs.batch"
               and r.status == 201]
    assert len(creates) == 2  # the submission and exactly one resubmission
    assert [r.user for r in creates] == ["researcher", "admin"]  # the CLI submitted, the controller retried
    assert _job(cluster)["metadata"]["annotations"][keys.RETRY_ATTEMPT] == "1"


def test_without_the_controller_the_cli_owns_the_retry_and_says_so(taugrid_factory, tau_cli, tmp_path, monkeypatch,
                                                                   tau_commands):
    scenario = taugrid_factory(clock="real", time_scale=40)
    scripts_of(scenario.cluster).add({"job-name": "solo"}, PodScript(run_seconds=2))
    repo = tmp_path / "repo"
    (repo / "tau").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "train.py").write_text("print('training')\n")
    (repo / "tau" / "solo.yaml").write_text(
        "name: solo\nengine: job\nentrypoint: ../train.py\ncompute:\n  gpus: 0\n  cpu_request: \"1\"\n"
        "runtime:\n  image: ghcr.io/acme/train:1.0\npolicy:\n  queue: jobqueue\n" + RETRY)
    monkeypatch.chdir(repo)
    result = tau_cli("run", "solo", "-n", "aurora")
    assert result.exit_code == 0, result
    assert "waiting for it to finish (automatic retry: up to 2 on Preempted)" in result.stderr
    job = scenario.cluster.store.get("batch/v1", "Job", "aurora", "solo")
    assert job["metadata"]["annotations"][keys.RETRY_OWNER] == "cli"


@pytest.mark.slow
def test_status_shows_the_coming_attempt_and_its_owner(live, tau_env, tau_cli):
    cluster, _ = live
    config = Path("tau/pre.yaml")
    config.write_text(config.read_text().replace("backoff_initial: 0s", "backoff_initial: 10m"))
    env = {k: v for k, v in {**os.environ, **tau_env}.items() if v is not None}
    proc = subprocess.Popen([shutil.which("tau") or "tau", "run", "pre", "-n", "aurora"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        cluster.wait_for(lambda: any(c["type"] == "Failed" and c["status"] == "True" for c in
                                     ((_job(cluster) or {}).get("status") or {}).get("conditions") or []), timeout=60)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    result = tau_cli("run", "status", "pre", "-n", "aurora")
    assert result.exit_code == 0, result
    assert "Result: failed (Preempted)" in result.stdout
    line = next(x for x in result.stdout.splitlines() if x.startswith("Retry: "))
    assert line.startswith("Retry: attempt 1/2, retrying in ") and line.endswith("(owned by the Tau controller)")


def _failed(cluster: Any) -> bool:
    return any(c["type"] == "Failed" and c["status"] == "True" for c in
               ((_job(cluster) or {}).get("status") or {}).get("conditions") or [])


@pytest.mark.slow
def test_a_restarted_controller_keeps_the_stamped_backoff(live, tau_env, controller_factory):
    """The retry due time lives on the failed workload: a new controller honours it instead of starting the
    backoff again (here a 10 minute backoff whose due time has passed while no controller ran)."""
    from datetime import UTC, datetime, timedelta

    from tau_core.status_tree import parse_time

    cluster, controller = live
    config = Path("tau/pre.yaml")
    config.write_text(config.read_text().replace("backoff_initial: 0s", "backoff_initial: 10m"))
    env = {k: v for k, v in {**os.environ, **tau_env}.items() if v is not None}
    proc = subprocess.Popen([shutil.which("tau") or "tau", "run", "pre", "-n", "aurora"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        cluster.wait_for(lambda: _failed(cluster), timeout=60)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    observed = datetime.now(UTC)
    cluster.wait_for(lambda: keys.RETRY_DUE in _job(cluster)["metadata"]["annotations"], timeout=30)
    due = parse_time(_job(cluster)["metadata"]["annotations"][keys.RETRY_DUE])
    assert due is not None and due > observed + timedelta(minutes=9)  # counted from the failure, 10m backoff
    controller.stop()
    assert cluster.store.get("v1", "Event", "aurora", "pre-retry-1") is None  # not resubmitted early
    assert _job(cluster)["metadata"]["annotations"].get(keys.RETRY_ATTEMPT) is None
    # the due time passes while no controller runs: the new one resubmits at once, not 10 minutes later
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat(timespec="milliseconds")
    cluster.store.patch("batch/v1", "Job", "aurora", "pre", {"metadata": {"annotations": {keys.RETRY_DUE: past}}})
    controller_factory(cluster)
    cluster.wait_for(lambda: cluster.store.get("v1", "Event", "aurora", "pre-retry-1"), timeout=30)
    cluster.wait_for(lambda: (_job(cluster) or {}).get("metadata", {}).get("annotations", {})
                     .get(keys.RETRY_ATTEMPT) == "1", timeout=30)
    assert keys.RETRY_DUE not in _job(cluster)["metadata"]["annotations"]  # the new attempt starts clean


@pytest.mark.slow
def test_a_resubmission_cut_short_after_its_event_is_finished_by_the_next_controller(live, tau_env,
                                                                                      controller_factory):
    """The controller records the next attempt on the retry Event before deleting the failed workload: when it
    stops after the Event (here: the delete keeps failing), a new controller finishes that very attempt, once."""
    cluster, controller = live
    fault = cluster.faults.add(method="DELETE", path_regex="/namespaces/aurora/jobs/pre", status=500)
    env = {k: v for k, v in {**os.environ, **tau_env}.items() if v is not None}
    proc = subprocess.Popen([shutil.which("tau") or "tau", "run", "pre", "-n", "aurora"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        cluster.wait_for(lambda: cluster.store.get("v1", "Event", "aurora", "pre-retry-1") and fault.fired, timeout=60)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    controller.stop()
    fault.remove()
    recorded = cluster.store.get("v1", "Event", "aurora", "pre-retry-1")["metadata"]["annotations"][keys.RETRY_NEXT]
    assert _job(cluster)["metadata"]["annotations"].get(keys.RETRY_ATTEMPT) is None  # still the failed attempt
    controller_factory(cluster)
    cluster.wait_for(lambda: _complete(cluster), timeout=60)
    job = _job(cluster)
    assert job["metadata"]["annotations"][keys.RETRY_ATTEMPT] == "1"
    assert job["metadata"]["annotations"][keys.SUBMISSION_ID] in recorded  # the recorded attempt, not a new one
    creates = [r for r in cluster.requests.entries if r.method == "POST" and r.resource == "jobs.batch"
               and r.status == 201]
    assert len(creates) == 2  # the submission and exactly one resubmission


def _record_state(cluster: Any) -> str | None:
    event = cluster.store.get("v1", "Event", "aurora", "pre-retry-1") or {}
    return ((event.get("metadata") or {}).get("annotations") or {}).get(keys.RETRY_STATE)


def _submit_and_close_laptop(cluster: Any, tau_env: dict[str, Any], until: Any) -> None:
    env = {k: v for k, v in {**os.environ, **tau_env}.items() if v is not None}
    proc = subprocess.Popen([shutil.which("tau") or "tau", "run", "pre", "-n", "aurora"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        cluster.wait_for(until, timeout=90)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)


def _controller_process(cluster: Any, tmp_path: Path) -> subprocess.Popen[str]:
    import sys

    kubeconfig = cluster.write_kubeconfig(tmp_path / "controller-kubeconfig")
    exe = shutil.which("tau-controller")
    args = [exe] if exe else [sys.executable, "-m", "tau_controller"]
    return subprocess.Popen([*args, "run", "--kubeconfig", str(kubeconfig), "--health-probe-bind-address", "0",
                             "--metrics-bind-address", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_a_controller_killed_between_deleting_the_failed_run_and_creating_the_next_attempt(live, tau_env,
                                                                                          tmp_path):
    """The real `tau-controller run` process is SIGKILLed while its create of the next attempt hangs in the API
    server (the simulator's fault API: latency, then an error, so it never lands): the failed Job is deleted, the
    next attempt does not exist.  The next controller creates the recorded attempt, exactly once."""
    cluster, in_thread = live
    in_thread.stop()  # the process below is the only controller
    hang = cluster.faults.add(method="POST", path_regex="/namespaces/aurora/jobs$", user="admin", status=503,
                              latency=5.0, count=1)
    first = _controller_process(cluster, tmp_path)
    try:
        _submit_and_close_laptop(cluster, tau_env, lambda: _job(cluster) is not None)
        submitted = _job(cluster)["metadata"]["annotations"][keys.SUBMISSION_ID]
        cluster.wait_for(lambda: hang.fired and _job(cluster) is None and _record_state(cluster), timeout=90)
    finally:
        first.send_signal(signal.SIGKILL)  # between its DELETE of the failed Job and its CREATE of attempt 1
        first.communicate(timeout=30)
    assert _job(cluster) is None and _record_state(cluster) == "pending"
    recorded = cluster.store.get("v1", "Event", "aurora", "pre-retry-1")["metadata"]["annotations"][keys.RETRY_NEXT]
    second = _controller_process(cluster, tmp_path)
    try:
        cluster.wait_for(lambda: _complete(cluster), timeout=90)
        cluster.wait_for(lambda: _record_state(cluster) == "submitted", timeout=60)
    finally:
        second.send_signal(signal.SIGTERM)
        output, _ = second.communicate(timeout=60)
    annotations = _job(cluster)["metadata"]["annotations"]
    assert annotations[keys.RETRY_ATTEMPT] == "1" and annotations[keys.SUBMISSION_ID] != submitted
    assert annotations[keys.SUBMISSION_ID] in recorded  # the recorded attempt, not a second new one
    creates = [r for r in cluster.requests.entries if r.method == "POST" and r.resource == "jobs.batch"
               and r.status == 201]
    assert [r.user for r in creates] == ["researcher", "admin"], output  # the submission, one resubmission
    assert "Traceback" not in output


@pytest.mark.slow
def test_a_run_the_user_cancels_while_its_retry_is_halfway_is_not_revived(live, tau_env, tau_cli,
                                                                          controller_factory):
    """The controller recorded attempt 1 but its DELETE of the failed Job keeps failing; meanwhile the user runs
    `tau run cancel`.  The controller records the run as cancelled, and neither it nor a restarted controller
    (another process instance, sweeping on start-up) resubmits it."""
    cluster, controller = live
    refused = cluster.faults.add(method="DELETE", path_regex="/namespaces/aurora/jobs/pre", user="admin", status=500)
    _submit_and_close_laptop(cluster, tau_env, lambda: _record_state(cluster) == "pending" and refused.fired)
    result = tau_cli("run", "cancel", "pre", "-n", "aurora")
    assert result.exit_code == 0, result
    refused.remove()
    cluster.wait_for(lambda: _record_state(cluster) == "cancelled", timeout=60)
    controller.stop()
    restarted = controller_factory(cluster)
    cluster.wait_for(lambda: restarted.ctx is not None and restarted.ctx.memo.get("retry-sweeps"), timeout=60)
    assert _job(cluster) is None and _record_state(cluster) == "cancelled"
    creates = [r for r in cluster.requests.entries if r.method == "POST" and r.resource == "jobs.batch"
               and r.status == 201]
    assert [r.user for r in creates] == ["researcher"]
