"""`tau run` following a run whose retry the Tau controller owns, when this command cannot classify the failure.

The controller watches the run's pods and Events, so it can hold evidence that had already vanished when the
command read the run: with a 0 s backoff it deletes the failed attempt itself.  Its decision is visible on the
cluster (the next attempt, or the due time it stamps on the failed one) and outranks the command's ``Unknown``.
Here the controller's side is played by the test with the very function the controller resubmits with
(``tau_core.retry.next_attempt``); `tau-controller/tests/test_retry_e2e.py` runs the real controller.
"""

from __future__ import annotations

import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tau_core import keys
from tau_core.backends import retry_owner
from tau_core.lifecycle.base import FailureReason
from tau_core.retry import RETRY_CAPABILITY, RetryPolicy, next_attempt
from tau_testing.sim.scenarios.taugrid import NAMESPACE
from tau_testing.sim.scripts import PodScript, scripts_of

pytestmark = pytest.mark.realclock  # the command follows a real-time simulator while the "controller" acts
NS = ["-n", NAMESPACE]
POLICY = RetryPolicy(2, ("Preempted",), 0.0, 300.0, "/data/checkpoints/finetunes/flw")


def _is_retry(pod: dict[str, Any]) -> bool:
    return any(e.get("name") == "TAU_RETRY_ATTEMPT" for c in pod["spec"]["containers"] for e in c.get("env") or [])


@pytest.fixture
def owned(taugrid_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:  # type: ignore[no-untyped-def]
    """A real-time cluster whose TauCluster advertises server-side retry; attempt 0 of `flw` exits 1 (nothing
    this command can classify), a retried attempt succeeds."""
    scenario = taugrid_factory(clock="real", time_scale=20)
    cluster = scenario.cluster
    tau_cluster = cluster.store.get(keys.API_VERSION, "TauCluster", None, "cluster")
    conditions = [c for c in tau_cluster["status"].get("conditions") or [] if c.get("type") != RETRY_CAPABILITY]
    tau_cluster["status"]["conditions"] = [*conditions, {
        "type": RETRY_CAPABILITY, "status": "True", "reason": "ControllerRetries", "message": "",
        "observedGeneration": tau_cluster["metadata"]["generation"],
        "lastTransitionTime": datetime.now(UTC).isoformat(timespec="seconds")}]
    cluster.store.update_status(tau_cluster)
    book = scripts_of(cluster)
    book.add(lambda p: (p["metadata"].get("labels") or {}).get("job-name") == "flw" and not _is_retry(p),
             PodScript(run_seconds=2, exit_code=1))
    book.add({"job-name": "flw"}, PodScript(run_seconds=2))
    repo = tmp_path / "repo"
    (repo / "tau").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "train.py").write_text("print('training')\n")
    (repo / "tau" / "flw.yaml").write_text(
        "name: flw\nengine: job\nentrypoint: ../train.py\ncompute:\n  gpus: 0\n  cpu_request: \"1\"\n"
        "  memory_limit: 1Gi\nruntime:\n  image: ghcr.io/acme/train:1.0\npolicy:\n  queue: jobqueue\n"
        "resilience:\n  max_retries: 2\n  retry_on: [Preempted]\n  backoff_initial: 0s\n")
    monkeypatch.chdir(repo)
    return cluster


def _failed(cluster: Any) -> dict[str, Any] | None:
    job = cluster.store.get("batch/v1", "Job", NAMESPACE, "flw")
    conditions = ((job or {}).get("status") or {}).get("conditions") or []
    return job if any(c["type"] == "Failed" and c["status"] == "True" for c in conditions) else None


def _controller(cluster: Any, *, stamp_due: bool) -> threading.Thread:
    """What the controller does once it has classified attempt 0 as Preempted: optionally stamp the due time,
    then delete the failed attempt and create the next one."""
    def act() -> None:
        cluster.wait_for(lambda: _failed(cluster) is not None, timeout=60)
        job = _failed(cluster)
        assert job is not None
        if stamp_due:
            due = (datetime.now(UTC) + timedelta(seconds=1)).isoformat(timespec="milliseconds")
            cluster.store.patch("batch/v1", "Job", NAMESPACE, "flw",
                                {"metadata": {"annotations": {keys.RETRY_DUE: due}}})
            time.sleep(1.5)  # the backoff the stamp announces
        new = next_attempt(job, attempt=1, reason=FailureReason.PREEMPTED, policy=POLICY, submission_id="s1")
        new["metadata"]["annotations"].pop(keys.RETRY_DUE, None)
        cluster.store.delete("batch/v1", "Job", NAMESPACE, "flw")
        cluster.store.create(new)

    thread = threading.Thread(target=act, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("stamp_due", [False, True], ids=["resubmitted at once", "due time stamped first"])
def test_the_controllers_retry_outranks_an_unknown_this_command_read(owned, tau_cli, stamp_due: bool) -> None:  # type: ignore[no-untyped-def]
    controller = _controller(owned, stamp_due=stamp_due)
    result = tau_cli("run", "flw", *NS)
    controller.join(timeout=30)
    assert result.exit_code == 0, result
    assert "is owned by the Tau controller" in result.stderr
    assert "not in retry_on list" not in result.stderr
    assert result.stderr.count("attempt 1/2 failed") == 1, result.stderr
    assert "workload aurora/flw completed successfully" in result.stderr


def test_without_the_controllers_decision_an_unknown_failure_ends_the_command(owned, tau_cli,  # type: ignore[no-untyped-def]
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry_owner, "DECISION_GRACE", 1.0)  # the real 10 s only delays this refusal
    result = tau_cli("run", "flw", *NS)
    assert result.exit_code == 1, result
    assert "workload aurora/flw failed (Unknown) — not in retry_on list [Preempted]" in result.stderr
