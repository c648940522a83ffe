"""Run name resolution between the local registry and the cluster (issue 19, D14)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tau_core import keys
from tau_core.backends.local.backend import LocalBackend
from tau_core.lifecycle import RunRef, SubmitRequest
from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario


def _job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "labels": {keys.KUEUE_QUEUE_NAME: "jobqueue", keys.MANAGED_BY: keys.MANAGED_BY_VALUE}},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "main", "image": "ghcr.io/acme/t:1",
                                                          "resources": {"requests": {"cpu": "100m"}}}]}}}}


@pytest.fixture
def local_train(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tau_env: dict[str, str | None]) -> str:
    """A finished local run of target ``train`` (from another repository), in tau_cli's data dir."""
    monkeypatch.setenv("TAU_DATA_DIR", str(tau_env["TAU_DATA_DIR"]))
    monkeypatch.setenv("TAU_EXP_STORE", str(tmp_path / "expstore"))
    other = tmp_path / "other-repo"
    (other / "tau").mkdir(parents=True)
    (other / "train.py").write_text("print('local train')\n")
    backend = LocalBackend()
    ref = backend.submit(SubmitRequest(name="train", config={"name": "train", "entrypoint": "../train.py"},
                                       objects=[], context={}, config_path=other / "tau" / "train.yaml")).ref
    assert backend.wait(RunRef(name=ref.name, backend="local"), timeout=60).succeeded
    return ref.name


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, taugrid_cluster: TauGridScenario, tau_cli) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "tau").mkdir()
    (root / "tau" / "workspace.connection.yaml").write_text(  # connected to the (simulated) cluster
        "schema: tau.workspace.connection.v1\nworkspace: aurora\ncluster:\n  contextName: tau-sim-researcher\n"
        "access:\n  method: kubeconfig\nauthorization:\n  mode: workspace-rbac\n  requiredRole: tau-researcher-v1\n"
        "requirements:\n  minTauVersion: 0.1.0\n")
    monkeypatch.chdir(root)
    r = tau_cli("workspace", "connection", input="y\n")
    assert r.exit_code == 0, r
    return root


def test_local_and_cluster_names_resolve_predictably(taugrid_cluster: TauGridScenario, tau_cli, local_train: str,
                                                      repo: Path) -> None:
    store = taugrid_cluster.cluster.store
    if not any(o["metadata"]["name"] == "train" for o in store.list("batch/v1", "Job", NAMESPACE)):
        r = tau_cli("run", "status", "train", "-o", "json")  # no cluster run called train: the local one
        assert r.exit_code == 0 and local_train in r.stdout, r
        store.create(_job("train"))

    # a flag naming a cluster never resolves to a local run
    r = tau_cli("run", "status", "train", "-n", NAMESPACE, "-o", "json")
    assert r.exit_code == 0, r
    assert local_train not in r.stdout and '"kind": "Job"' in r.stdout, r.stdout
    for flags in (["-n", NAMESPACE], ["--workspace", "aurora"]):
        r = tau_cli("logs", "train", *flags, "--tail", "0")
        assert local_train not in r.stdout + r.stderr and "local train" not in r.stdout, r

    # a bare name matching both is an ambiguity error listing both
    r = tau_cli("run", "status", "train")
    assert r.exit_code == 2, r
    assert local_train in r.stderr and f"{NAMESPACE}/train" in r.stderr and "ambiguous" in r.stderr
    r = tau_cli("logs", "train")
    assert r.exit_code == 2 and "ambiguous" in r.stderr, r

    # a local run id stays unambiguous
    r = tau_cli("run", "status", local_train, "-o", "json")
    assert r.exit_code == 0 and local_train in r.stdout, r


def test_the_next_hint_resolves_to_the_run_just_submitted(taugrid_cluster: TauGridScenario, tau_cli,
                                                          local_train: str, repo: Path) -> None:
    (repo / "train.py").write_text("print('cluster train')\n")
    (repo / "tau" / "hinted.yaml").write_text("name: hinted\nengine: job\nentrypoint: ../train.py\n"
                                              "runtime:\n  image: python:3.12\ncompute:\n  gpus: 0\n")
    r = tau_cli("run", "hinted")
    assert r.exit_code == 0, r
    [hint] = [line for line in r.stdout.splitlines() if line.startswith("Next: ")]
    assert hint == f"Next: tau run status hinted -n {NAMESPACE} --watch"
    args = hint.removeprefix("Next: tau ").replace(" --watch", "").split()
    r = tau_cli(*args, "-o", "json")
    assert r.exit_code == 0 and '"kind": "Job"' in r.stdout, r
