"""Resolution is pluggable: connected resolvers registered through the resolver hook supply workspace
defaults and workload profiles, and every value they supply is labelled with its source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tau_core.config.profiles import ProfileCatalog, profile_set_hash
from tau_core.config.resolve import ResolveRequest, RunOptions, resolve_offline, resolve_run
from tau_core.errors import ConfigError
from tau_core.hookspecs import hookimpl
from tau_core.plugins import Host

CFG = "name: conn\nengine: job\nimage: bash:5.2\npolicy:\n  team: research\n  lane: training\n"
PROFILE = {"name": "research.training.1x", "applicability": {"teams": ["research"], "lanes": ["training"]},
           "gpusPerWorker": 1, "workerCount": 1, "mode": "fixed", "placement": "single-node-nvlink",
           "defaultLocalQueue": "research-queue",
           "priorities": {"workloadPriorityClassName": "taugrid-default", "podPriorityClassName": "taugrid-default"}}


class Connected:
    """A stand-in for a connected cluster plugin: answers from fixed data, records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def connection(self, request: ResolveRequest) -> dict[str, Any]:
        self.asked.append("workspace-connection")
        return {"workspace": "vision", "context": "aks-prod"}

    def defaults(self, request: ResolveRequest) -> dict[str, Any]:
        self.asked.append(f"workspace-defaults:{request.workspace}")
        return {"namespace": "vision-ns", "queue": "research-queue", "service_account": "vision-runner",
                "output_root": "/data/projects/vision/runs", "workspace_uid": "uid-123"}

    def profiles(self, request: ResolveRequest) -> ProfileCatalog:
        self.asked.append(f"workload-profile:{request.selection.namespace}")
        return ProfileCatalog(12, profile_set_hash([PROFILE]), [PROFILE], "cluster", "aks-prod")

    @hookimpl
    def tau_register_resolvers(self, register):  # type: ignore[no-untyped-def]
        register("test-connection", self.connection, kind="workspace-connection", priority=100)
        register("test-defaults", self.defaults, kind="workspace-defaults", priority=100)
        register("test-profiles", self.profiles, kind="workload-profile", priority=100)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "tau").mkdir()
    (tmp_path / "tau" / "train.yaml").write_text(CFG)
    return tmp_path


def host_with(plugin: object) -> Host:
    return Host.create(entry_points=False, extra_plugins=[("connected", plugin)], env={})


def test_connected_resolvers_supply_values_with_sources(repo: Path) -> None:
    plugin = Connected()
    res = resolve_run(RunOptions(target="train", cwd=repo, env={}), host=host_with(plugin))
    req = res.request
    assert plugin.asked == ["workspace-connection", "workspace-defaults:vision", "workload-profile:vision-ns"]
    assert req.context["namespace"] == "vision-ns" and req.sources["context.namespace"] == "workspace default"
    assert req.context["workspace"] == "vision" and req.sources["context.workspace"] == "workspace connection"
    assert req.context["queue"] == "research-queue" and req.sources["context.queue"] == "workload profile"
    assert req.context["service_account"] == "vision-runner"
    assert req.context["output_root"] == "/data/projects/vision/runs"
    assert req.context["tau_cluster_generation"] == 12
    assert req.config.compute.gpus == 1 and req.sources["compute.gpus"] == "workload profile"
    assert req.config.policy.topology == "single-node-nvlink"
    assert len(req.submission_id) == 24


def test_flag_beats_workspace_but_conflicts_are_errors(repo: Path) -> None:
    with pytest.raises(ConfigError, match="conflicts with TauWorkspace"):
        resolve_run(RunOptions(target="train", cwd=repo, env={}, namespace="elsewhere"), host=host_with(Connected()))


def test_output_outside_workspace_root_is_reported(repo: Path) -> None:
    from tau_core.config import ConfigValidationError

    (repo / "tau" / "train.yaml").write_text(CFG + "storage:\n  data_pvc: d\n  output: /data/other/x\n")
    with pytest.raises(ConfigValidationError) as exc:
        resolve_run(RunOptions(target="train", cwd=repo, env={}), host=host_with(Connected()))
    assert exc.value.issues[0].path == "storage.output" and exc.value.issues[0].line == 9


def test_snapshot_never_asks_the_cluster(repo: Path) -> None:
    import json

    snap = {"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauWorkloadProfileSnapshot", "tauClusterGeneration": 4,
            "profileSetHash": profile_set_hash([PROFILE]), "profiles": [PROFILE]}
    (repo / "tau" / "snap.yaml").write_text(json.dumps(snap))
    (repo / "tau" / "train.yaml").write_text(CFG + "  namespace: ns\n  workload_profile_snapshot: snap.yaml\n")
    plugin = Connected()
    res = resolve_offline(RunOptions(target="train", cwd=repo, env={}), host=host_with(plugin))
    assert plugin.asked == []
    assert res.request.context["workload_profile_source"] == "snapshot"


def test_local_workspace_descriptor_selects_local_execution(repo: Path) -> None:
    (repo / "tau" / "workspace.connection.yaml").write_text(
        "schema: tau.workspace.connection.v1\nworkspace: local\naccess:\n  method: local\n"
        "requirements:\n  minTauVersion: 0.5.0\n")
    plugin = Connected()
    res = resolve_run(RunOptions(target="train", cwd=repo, env={}), host=host_with(plugin))
    assert res.local and plugin.asked == []
    assert res.request.context["namespace"] == "local"
    assert res.request.context["config_dir"] == str((repo / "tau").resolve())


def test_resolver_failure_is_a_clean_error(repo: Path) -> None:
    class Broken:
        @hookimpl
        def tau_register_resolvers(self, register):  # type: ignore[no-untyped-def]
            register("broken", lambda request: 1 / 0, kind="workspace-connection", priority=100)

    with pytest.raises(ConfigError, match="workspace-connection resolver failed: ZeroDivisionError"):
        resolve_run(RunOptions(target="train", cwd=repo, env={}), host=host_with(Broken()))


def test_the_connection_answer_reaches_later_resolvers_typed(repo: Path) -> None:
    """A mapping answered by a workspace-connection resolver is converted once, at the edge; the defaults and
    profile resolvers read attributes of a ``WorkspaceConnection``, and its pins are one typed value."""
    from tau_core.config.workspace import WorkspaceConnection, WorkspacePins
    from tau_core.workspace.resolvers import resolve_workspace_defaults

    seen: list[Any] = []

    class Typed(Connected):
        def connection(self, request: ResolveRequest) -> dict[str, Any]:
            return {"workspace": "vision", "context": "aks-prod", "verified": True, "namespace": "vision-ns",
                    "queue": "research-queue", "workspace_uid": "uid-123", "output_root": "/data/projects/vision",
                    "defaults": {"ignored": "unknown keys are dropped at the edge"}}

        def defaults(self, request: ResolveRequest) -> Any:
            seen.append(request.connection)
            return resolve_workspace_defaults(request)  # the built-in reader: no cluster read for a verified one

    res = resolve_run(RunOptions(target="train", cwd=repo, env={}), host=host_with(Typed()))
    [connection] = seen
    assert isinstance(connection, WorkspaceConnection) and connection.context == "aks-prod"
    assert connection.pins == WorkspacePins(workspace_uid="uid-123", namespace="vision-ns", queue="research-queue")
    assert res.request.context["namespace"] == "vision-ns"
    assert res.request.context["output_root"] == "/data/projects/vision"
