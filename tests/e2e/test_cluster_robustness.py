"""End to end through the `tau` entry point against the simulated TauGrid cluster: robustness (API faults,
dropped connections, missing permissions and credentials, interrupted CLIs, foreign jobs, connections).

Same set-up as test_cluster_lifecycle.py (a small repository with a checked-in target; fake-clock tests
move simulated time by hand, `--watch` and `logs -f` use the real clock sped up)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from lifecycle_support import NS, RETRY, is_retry, pull_until_watched, write_target

from tau_core import keys
from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario
from tau_testing.sim.scripts import PodScript, scripts_of

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
@pytest.mark.slow
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
