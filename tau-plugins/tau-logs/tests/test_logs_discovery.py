"""`tau logs RUN` finds the run across configured workspace connections (two simulated clusters)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tau_core import keys
from tau_core.backends.kubernetes import KubernetesBackend
from tau_core.lifecycle.base import SubmitRequest
from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario
from tau_testing.sim.scripts import PodScript, scripts_of


def submit(scenario: TauGridScenario, name: str, lines: list[str]) -> None:
    scripts_of(scenario.cluster).add({"job-name": name}, PodScript(run_seconds=2, logs=lines))
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": NAMESPACE,
                        "labels": {keys.KUEUE_QUEUE_NAME: "jobqueue", keys.MANAGED_BY: keys.MANAGED_BY_VALUE}},
           "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": {
               "restartPolicy": "Never",
               "containers": [{"name": "main", "image": "ghcr.io/acme/t:1",
                               "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}
    backend = KubernetesBackend(kubeconfig=str(scenario.kubeconfig))  # type: ignore[attr-defined]
    backend.submit(SubmitRequest(name=name, config={}, objects=[job], context={}, submission_id=name * 2))
    scenario.cluster.advance(5)


def rename_workspace(scenario: TauGridScenario, name: str) -> None:
    """Give the second cluster's workspace its own name (same namespace)."""
    ws = scenario.cluster.store.get("tau.azure.com/v1alpha1", "TauWorkspace", "tau-system", "aurora")
    copy = {"apiVersion": ws["apiVersion"], "kind": ws["kind"],
            "metadata": {"name": name, "namespace": "tau-system"}, "spec": ws["spec"], "status": ws["status"]}
    scenario.cluster.apply(copy)


def connect_state(config_dir: Path, label: str, scenario: TauGridScenario, workspace: str = "aurora",
                  **override: Any) -> None:
    ws = scenario.cluster.store.get("tau.azure.com/v1alpha1", "TauWorkspace", "tau-system", workspace)
    state = {"schema": "tau.workspace.connection-state.v1", "workspace": workspace,
             "context_name": scenario.cluster.context_for("researcher"), "system_namespace": "tau-system",
             "kubeconfig_path": str(scenario.kubeconfig), "namespace": NAMESPACE,  # type: ignore[attr-defined]
             "queue": "jobqueue", "workspace_uid": ws["metadata"]["uid"], **override}
    path = config_dir / "connections" / f"{label}.json"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(json.dumps(state))


@pytest.fixture
def two(taugrid_factory, tau_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    a, b = taugrid_factory(), taugrid_factory()
    config_dir = Path(str(tau_env["TAU_CONFIG_DIR"]))
    connect_state(config_dir, "a", a)
    rename_workspace(b, "aurora-b")
    connect_state(config_dir, "b", b, workspace="aurora-b")
    submit(a, "only-a", ["from cluster a"])
    submit(b, "only-b", ["from cluster b"])
    submit(a, "both", ["a copy"])
    submit(b, "both", ["b copy"])
    return a, b, config_dir


def test_run_is_found_in_the_workspace_that_has_it(two, tau_cli) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("logs", "only-b")
    assert r.exit_code == 0, r
    assert r.stdout.splitlines() == ["from cluster b"]
    assert "found Job aurora/only-b in workspace aurora-b" in r.stderr
    r = tau_cli("logs", "only-a", "--tail", "-1")
    assert r.stdout.splitlines() == ["from cluster a"]


def test_ambiguous_run_names_every_workspace(two, tau_cli) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("logs", "both")
    assert r.exit_code == 1
    assert 'run "both" exists in multiple configured Tau workspaces' in r.stderr
    assert "aurora (context" in r.stderr and "aurora-b (context" in r.stderr
    assert "pass --workspace" in r.stderr
    r = tau_cli("logs", "both", "--workspace", "aurora-b")
    assert r.exit_code == 0, r
    assert r.stdout.splitlines() == ["b copy"]


def test_absent_run_lists_what_was_searched(two, tau_cli) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("logs", "nowhere")
    assert r.exit_code == 1
    assert 'run "nowhere" was not found in the connected workspace or configured Tau workspace connections' \
        in r.stderr
    assert "searched aurora" in r.stderr and "--context and --namespace" in r.stderr


def test_stale_route_is_not_trusted(two, tau_cli) -> None:  # type: ignore[no-untyped-def]
    a, _, config_dir = two
    connect_state(config_dir, "a", a, workspace_uid="00000000-stale")
    r = tau_cli("logs", "only-a")
    assert r.exit_code == 1
    assert "was replaced; reconnect the workspace" in r.stderr


def test_explicit_namespace_skips_the_search(two, tau_cli) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("logs", "both", "-n", NAMESPACE, "--prefix")  # KUBECONFIG points at the last cluster built (b)
    assert r.exit_code == 0, r
    assert r.stdout.strip().endswith("/main] b copy")


def test_unknown_workspace_and_flag_conflicts(two, tau_cli) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("logs", "only-a", "--workspace", "zeta")
    assert r.exit_code == 1 and 'no configured Tau workspace connection for workspace "zeta"' in r.stderr
    r = tau_cli("logs", "only-a", "-c", "main", "--all-containers")
    assert r.exit_code == 2
    r = tau_cli("logs", "--help")
    assert r.exit_code == 0 and "tau logs train-7f2c -f" in r.stdout
