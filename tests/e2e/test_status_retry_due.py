"""`tau run status` of a failed run whose retry the Tau controller owns: "attempt k/N, retrying in …" comes from
the due time the controller stamps on the workload (``tau.azure.com/retry-due``), not from the CLI's own sums."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tau_core import keys
from tau_core.retry import RetryPolicy, policy_annotation
from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario
from tau_testing.sim.scripts import PodScript, scripts_of

NS = ["-n", NAMESPACE]
POLICY = RetryPolicy(2, ("OOMKilled",), 30.0, 300.0, "/data/checkpoints/finetunes/due")


@pytest.fixture
def failed_run(taugrid_cluster: TauGridScenario, tau_cli, tmp_path: Path,  # type: ignore[no-untyped-def]
               monkeypatch: pytest.MonkeyPatch) -> TauGridScenario:
    """A Job submitted by `tau run` whose first attempt was OOMKilled, stamped as controller-owned."""
    repo = tmp_path / "repo"
    (repo / "tau").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "train.py").write_text("print('training')\n")
    (repo / "tau" / "due.yaml").write_text(
        "name: due\nengine: job\nentrypoint: ../train.py\ncompute:\n  gpus: 0\n  cpu_request: \"1\"\n"
        "  memory_limit: 1Gi\nruntime:\n  image: ghcr.io/acme/train:1.0\npolicy:\n  queue: jobqueue\n")
    monkeypatch.chdir(repo)
    scripts_of(taugrid_cluster.cluster).add({"job-name": "due"}, PodScript(run_seconds=2, oom=True))
    assert tau_cli("run", "due", *NS).exit_code == 0
    taugrid_cluster.cluster.advance(10)
    annotations = {keys.RETRY_OWNER: "controller", keys.RETRY_POLICY: policy_annotation(POLICY)}
    taugrid_cluster.cluster.store.patch("batch/v1", "Job", NAMESPACE, "due", {"metadata": {"annotations": annotations}})
    return taugrid_cluster


def _stamp_due(scenario: TauGridScenario, due: datetime) -> None:
    scenario.cluster.store.patch("batch/v1", "Job", NAMESPACE, "due", {"metadata": {"annotations": {
        keys.RETRY_DUE: due.isoformat(timespec="milliseconds")}}})


def test_status_shows_the_controllers_due_time(failed_run: TauGridScenario, tau_cli) -> None:  # type: ignore[no-untyped-def]
    _stamp_due(failed_run, datetime.now(UTC) + timedelta(minutes=10))
    r = tau_cli("run", "status", "due", *NS)
    assert r.exit_code == 0, r
    assert "Result: failed (OOMKilled)" in r.stdout
    found = re.search(r"Retry: attempt 1/2, retrying in ([0-9.]+)s \(owned by the Tau controller\)", r.stdout)
    assert found, r.stdout
    # the backoff alone would say at most 30 s; the stamped due time is ten minutes out
    assert 300 < float(found.group(1)) <= 600
    doc = json.loads(tau_cli("run", "status", "due", *NS, "-o", "json").stdout)
    assert doc["retry"]["owner"] == "controller" and doc["retry"]["attempt"] == 1 and doc["retry"]["max"] == 2
    assert 300 < doc["retry"]["inSeconds"] <= 600


def test_a_due_time_in_the_past_means_the_retry_is_imminent(failed_run: TauGridScenario, tau_cli) -> None:  # type: ignore[no-untyped-def]
    _stamp_due(failed_run, datetime.now(UTC) - timedelta(minutes=1))
    doc = json.loads(tau_cli("run", "status", "due", *NS, "-o", "json").stdout)
    assert doc["retry"]["inSeconds"] == 0


def test_without_a_due_time_the_policy_backoff_is_shown(failed_run: TauGridScenario, tau_cli) -> None:  # type: ignore[no-untyped-def]
    """Before the controller has stamped the due time, the status counts the policy's backoff from the failure."""
    doc = json.loads(tau_cli("run", "status", "due", *NS, "-o", "json").stdout)
    assert doc["retry"]["owner"] == "controller" and 0 <= doc["retry"]["inSeconds"] <= 30
