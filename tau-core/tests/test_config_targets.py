"""Target discovery, monorepo catalogs and resolution with visible sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from tau_core.config.profiles import profile_set_hash
from tau_core.config.resolve import RunOptions, resolve_offline, resolve_run
from tau_core.config.targets import resolve_target
from tau_core.errors import ConfigError, NotFoundError, TauError, UsageError

JOB = "name: {name}\nengine: job\ncompute:\n  gpus: 0\npolicy:\n  namespace: research\n  queue: jobqueue\n"


def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_target_resolves_tau_dir_up_to_git_root(tmp_path: Path) -> None:
    root = repo(tmp_path)
    cfg = write(root / "tau" / "train.yaml", JOB.format(name="train"))
    sub = root / "src" / "deep"
    sub.mkdir(parents=True)
    target = resolve_target("train", cwd=sub)
    assert target.config_path == cfg and target.name_override is None


def test_both_extensions_is_an_error(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root / "tau" / "train.yaml", JOB.format(name="a"))
    write(root / "tau" / "train.yml", JOB.format(name="a"))
    with pytest.raises(ConfigError, match=r"keep exactly one extension|both"):
        resolve_target("train", cwd=root)


def test_missing_target_lists_available(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root / "tau" / "train.yaml", JOB.format(name="a"))
    with pytest.raises(NotFoundError) as exc:
        resolve_target("trian", cwd=root)
    assert "train" in (exc.value.hint or "")


@pytest.mark.parametrize("hostile", ["../etc/passwd", "..", ".", "a/b", "/etc/passwd", "a\\b", "", "-rf", "x\x00y"])
def test_target_must_be_a_name(tmp_path: Path, hostile: str) -> None:
    with pytest.raises(UsageError, match="must be a name"):
        resolve_target(hostile, cwd=repo(tmp_path))


def test_default_files_and_ambiguity(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root / "tau.yaml", JOB.format(name="a"))
    assert resolve_target(None, cwd=root).config_path.name == "tau.yaml"
    write(root / ".tau.yaml", JOB.format(name="a"))
    with pytest.raises(ConfigError, match="several default"):
        resolve_target(None, cwd=root)


def test_config_makes_positional_the_run_name(tmp_path: Path) -> None:
    root = repo(tmp_path)
    cfg = write(root / "exp" / "tau.yaml", JOB.format(name="from-file"))
    target = resolve_target("override-name", config="exp/tau.yaml", cwd=root)
    assert target.config_path == cfg and target.name_override == "override-name"
    res = resolve_offline(RunOptions(target="override-name", config=cfg, cwd=root))
    assert res.request.name == "override-name"
    assert res.request.sources["name"] == "flag"


def test_config_relative_paths_resolve_against_the_config_file(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root / "exp" / "train.py", "print('hi')\n")
    cfg = write(root / "exp" / "tau.yaml", JOB.format(name="rel") + "entrypoint: train.py\n")
    res = resolve_offline(RunOptions(config=cfg, cwd=root))
    assert res.request.config_dir == cfg.parent.resolve()


def catalog(root: Path) -> None:
    write(root / "tau.projects.yaml", "schema: tau.projects.v1\nprojects:\n  vision:\n    path: vision\n"
          "    connection: vision/tau/workspace.connection.yaml\n  nlp:\n    path: nlp\n"
          "    connection: nlp/tau/workspace.connection.yaml\n")
    write(root / "vision" / "tau" / "train.yaml", JOB.format(name="vision-train"))
    write(root / "nlp" / "tau" / "train.yaml", JOB.format(name="nlp-train"))
    write(root / "nlp" / "tau" / "eval.yaml", JOB.format(name="nlp-eval"))


def test_monorepo_ambiguity_lists_projects(tmp_path: Path) -> None:
    root = repo(tmp_path)
    catalog(root)
    with pytest.raises(UsageError, match="nlp, vision"):
        resolve_target("train", cwd=root)
    assert resolve_target("train", project="vision", cwd=root).config_path.parent.parent.name == "vision"
    assert resolve_target("eval", cwd=root).project.name == "nlp"  # type: ignore[union-attr]
    assert resolve_target("train", cwd=root / "nlp").project.name == "nlp"  # type: ignore[union-attr]
    with pytest.raises(UsageError, match="unknown Tau project"):
        resolve_target("train", project="audio", cwd=root)
    with pytest.raises(UsageError, match="does not own"):
        resolve_target(None, config="nlp/tau/train.yaml", project="vision", cwd=root)


def test_project_without_catalog(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"requires tau\.projects\.yaml"):
        resolve_target("train", project="x", cwd=repo(tmp_path))


def test_bad_catalog_is_reported(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root / "tau.projects.yaml", "schema: tau.projects.v1\nprojects:\n  a:\n    path: ../escape\n")
    with pytest.raises(TauError, match="repository-relative"):
        resolve_target(None, cwd=root)


def test_offline_placeholders_and_sources(tmp_path: Path) -> None:
    root = repo(tmp_path)
    cfg = write(root / "tau.yaml", "name: ph\nengine: job\ncompute:\n  gpus: 0\n")
    res = resolve_offline(RunOptions(config=cfg, cwd=root, env={}))
    ctx = res.request.context
    assert ctx["namespace"] == "<unresolved-namespace>" and ctx["queue"] == "<unresolved-queue>"
    assert res.request.sources["context.namespace"] == "cluster (unresolved)"
    assert any("does not contact the cluster" in w for w in res.warnings)
    res = resolve_offline(RunOptions(config=cfg, cwd=root, namespace="flagged", env={}))
    assert res.request.context["namespace"] == "flagged"
    assert res.request.sources["context.namespace"] == "flag"
    assert res.request.sources["run.ttl_seconds_after_finished"] == "default"


def test_submit_without_namespace_is_an_error(tmp_path: Path) -> None:
    root = repo(tmp_path)
    cfg = write(root / "tau.yaml", "name: ph\nengine: job\ncompute:\n  gpus: 0\n")
    with pytest.raises(ConfigError, match="no namespace resolved"):
        resolve_run(RunOptions(config=cfg, cwd=root, env={}))


PROFILES = [
    {"name": "research.training.1x", "applicability": {"teams": ["research"], "lanes": ["training"],
                                                       "namespaces": ["research-workloads"]},
     "gpusPerWorker": 1, "workerCount": 1, "mode": "fixed", "placement": "independent",
     "defaultLocalQueue": "jobqueue", "executionTarget": "singleCluster",
     "priorities": {"workloadPriorityClassName": "taugrid-default", "podPriorityClassName": "taugrid-default"}},
    {"name": "research.nvlink.8x", "applicability": {"teams": ["research"], "lanes": ["large-memory"]},
     "gpusPerWorker": 8, "workerCount": 1, "mode": "fixed", "placement": "single-node-nvlink",
     "defaultLocalQueue": "gpuqueue"},
]


def snapshot_text(profiles: list[dict], generation: int = 7, set_hash: str | None = None, observed: int | None = None) -> str:
    import json

    doc = {"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauWorkloadProfileSnapshot",
           "tauClusterGeneration": generation, "profileSetHash": set_hash if set_hash is not None else profile_set_hash(profiles),
           "profiles": profiles}
    if observed is not None:
        doc["observedGeneration"] = observed
    return json.dumps(doc, indent=2)


SNAP_CFG = ("name: snap\nengine: job\npolicy:\n  namespace: research-workloads\n  team: research\n  lane: training\n"
            "  workload_profile_snapshot: profiles.snapshot.yaml\n")


def test_snapshot_selects_and_stamps(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root / "profiles.snapshot.yaml", snapshot_text(PROFILES))
    cfg = write(root / "tau.yaml", SNAP_CFG)
    res = resolve_offline(RunOptions(config=cfg, cwd=root, env={}))
    ctx = res.request.context
    assert ctx["workload_profile"]["name"] == "research.training.1x"
    assert ctx["workload_profile"]["stamps"]["tau.azure.com/workload-profile-set-hash"] == profile_set_hash(PROFILES)
    assert ctx["tau_cluster_generation"] == 7 and ctx["queue"] == "jobqueue"
    assert res.request.config.compute.gpus == 1
    assert res.request.sources["compute.gpus"] == "workload profile"
    assert res.request.sources["context.queue"] == "workload profile"


def test_snapshot_requires_client_dry_run(tmp_path: Path) -> None:
    root = repo(tmp_path)
    write(root / "profiles.snapshot.yaml", snapshot_text(PROFILES))
    cfg = write(root / "tau.yaml", SNAP_CFG)
    with pytest.raises(ConfigError, match="requires --dry-run=client"):
        resolve_run(RunOptions(config=cfg, cwd=root, dry_run="server", env={}))


def test_a_local_run_may_keep_the_snapshot(tmp_path: Path) -> None:
    """--local places nothing through the workload profile, so examples with a snapshot run as written."""
    root = repo(tmp_path)
    write(root / "profiles.snapshot.yaml", snapshot_text(PROFILES))
    cfg = write(root / "tau.yaml", SNAP_CFG)
    res = resolve_run(RunOptions(config=cfg, cwd=root, local=True, env={}))
    assert res.request.context["local"] is True


@pytest.mark.parametrize("text, message", [
    (snapshot_text(PROFILES, set_hash="0" * 64), "does not match"),
    (snapshot_text(PROFILES, observed=6), "stale snapshot"),
    (snapshot_text(PROFILES, set_hash=""), "profileSetHash is empty"),
    (snapshot_text([{**PROFILES[0], "placement": "same-planet"}]), "placement"),
])
def test_snapshot_fails_closed(tmp_path: Path, text: str, message: str) -> None:
    root = repo(tmp_path)
    write(root / "profiles.snapshot.yaml", text)
    cfg = write(root / "tau.yaml", SNAP_CFG)
    with pytest.raises(TauError, match=message):
        resolve_offline(RunOptions(config=cfg, cwd=root, env={}))


def test_snapshot_ambiguity_and_authorization(tmp_path: Path) -> None:
    root = repo(tmp_path)
    twin = {**PROFILES[0], "name": "research.training.twin"}
    write(root / "profiles.snapshot.yaml", snapshot_text([PROFILES[0], twin]))
    cfg = write(root / "tau.yaml", SNAP_CFG)
    with pytest.raises(ConfigError, match=r"ambiguous.*research\.training\.1x, research\.training\.twin"):
        resolve_offline(RunOptions(config=cfg, cwd=root, env={}))
    cfg.write_text(SNAP_CFG.replace("team: research", "team: other") + "  profile: research.training.1x\n")
    with pytest.raises(ConfigError, match="does not authorize"):
        resolve_offline(RunOptions(config=cfg, cwd=root, env={}))


def test_snapshot_conflicts_with_explicit_values(tmp_path: Path) -> None:
    from tau_core.config import ConfigValidationError

    root = repo(tmp_path)
    write(root / "profiles.snapshot.yaml", snapshot_text(PROFILES))
    cfg = write(root / "tau.yaml", SNAP_CFG + "  queue: other\ncompute:\n  gpus: 4\n")
    with pytest.raises(ConfigValidationError) as exc:
        resolve_offline(RunOptions(config=cfg, cwd=root, env={}))
    paths = {i.path for i in exc.value.issues}
    assert {"policy.queue", "compute.gpus"} <= paths
    assert all(i.line > 0 for i in exc.value.issues)


def test_config_hash_is_stable_and_sensitive(tmp_path: Path) -> None:
    from tau_core.config import load_config

    root = repo(tmp_path)
    a = write(root / "a.yaml", JOB.format(name="h"))
    b = write(root / "b.yaml", "# same config, other spelling\nengine: JOB\nname: h\npolicy: {queue: jobqueue, "
              "namespace: research}\ncompute: {gpus: 0}\n")
    c = write(root / "c.yaml", JOB.format(name="h") + "  cpu_request: '2'\n".replace("  cpu", "  cpu"))
    ha, hb = load_config(a).config_hash, load_config(b).config_hash
    assert ha == hb and len(ha) == 64
    c.write_text(JOB.format(name="h").replace("gpus: 0", "gpus: 0\n  cpu_request: '2'"))
    assert load_config(c).config_hash != ha
