"""tau run: verbs, target dispatch, annotated client dry-run, submission path, lazy imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

KIND = ("name: kind-smoke\nengine: job\nentrypoint: train.sh\nimage: bash:5.2\ncompute:\n  gpus: 0\n"
        "  cpu_request: 100m\npolicy:\n  namespace: ray\n  queue: kind-cpu\n  lane: training\n"
        "  gpu_class: a100_nvlink_80gb\nexperiment:\n  project: kind-smoke\n  name: job\n")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "tau").mkdir()
    (tmp_path / "tau" / "train.sh").write_text("#!/bin/sh\necho hi\n")
    (tmp_path / "tau" / "smoke.yaml").write_text(KIND)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_help_lists_verbs(tau_cli) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", "--help")
    assert r.exit_code == 0, r
    for verb in ("validate", "schema", "explain-config"):
        assert verb in r.stdout
    assert "Examples" in r.stdout


@pytest.mark.parametrize("verb", ["validate", "schema", "explain-config"])
def test_verb_help(tau_cli, verb: str) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", verb, "--help")
    assert r.exit_code == 0 and "Examples" in r.stdout, r


def test_validate_summary_and_warning(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", "validate", "-c", "tau/smoke.yaml")
    assert r.exit_code == 0, r
    assert "tau/smoke.yaml is valid: kind-smoke (job)" in r.stdout
    assert "deprecated" in r.stderr and "a100-80gb" in r.stderr
    r = tau_cli("run", "validate", "smoke", "-o", "json")
    doc = json.loads(r.stdout)
    assert doc["valid"] and doc["engine"] == "job" and doc["warnings"][0]["path"] == "policy.gpu_class"


def test_validate_name_override(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", "validate", "Bad_Name", "-c", "tau/smoke.yaml")
    assert r.exit_code == 1 and "NAME argument" in r.stderr, r


def test_validate_managed_manifest(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    """A schema_version: 1 manifest is validated against its own schema, not refused."""
    (project / "tau" / "wf.yaml").write_text("schema_version: 1\nname: wf\n")
    r = tau_cli("run", "validate", "-c", "tau/wf.yaml")
    assert r.exit_code == 1 and "runtime.pip: required" in r.stderr and "Traceback" not in r.stderr, r
    (project / "tau" / "wf.py").write_text("def main(ctx):\n    return 1\n")
    (project / "tau" / "wf.yaml").write_text("schema_version: 1\nname: wf\nruntime:\n  pip: [numpy]\n"
                                             "entrypoint:\n  script: wf.py\n")
    r = tau_cli("run", "validate", "-c", "tau/wf.yaml")
    assert r.exit_code == 0 and "managed workflow manifest" in r.stdout, r
    (project / "tau" / "wf.yaml").write_text("schema_version: 2\nname: wf\n")
    r = tau_cli("run", "validate", "-c", "tau/wf.yaml")
    assert r.exit_code == 1 and "schema_version: want 1, got 2" in r.stderr, r


def test_schema_and_explain(tau_cli) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", "schema", "-o", "json")
    schema = json.loads(r.stdout)
    assert schema["additionalProperties"] is False and schema["$schema"].endswith("2020-12/schema")
    r = tau_cli("run", "explain-config")
    assert "| `policy.gpu_class` |" in r.stdout


def test_client_dry_run_annotates_sources(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", "smoke", "--dry-run=client", "-n", "research")
    assert r.exit_code == 0, r
    out = r.stdout
    assert "kind: Job" in out
    assert "namespace: research  # from: flag" in out or "namespace: research # from: flag" in out
    assert "# from: config" in out and "# from: default" in out
    assert "ttlSecondsAfterFinished: 28800" in out
    assert "# from: default (set by tau)" in out  # injected environment
    assert "deprecated" in r.stderr
    from ruamel.yaml import YAML

    docs = [d for d in YAML(typ="safe").load_all(out) if d]
    assert docs[0]["metadata"]["namespace"] == "research"


def test_client_dry_run_placeholders(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    (project / "tau" / "bare.yaml").write_text("name: bare\nengine: job\nimage: bash:5.2\ncompute:\n  gpus: 0\n")
    r = tau_cli("run", "bare", "--dry-run=client")
    assert r.exit_code == 0, r
    assert "<unresolved-namespace>" in r.stdout and "cluster (unresolved)" in r.stdout
    assert "does not contact the cluster" in r.stderr


def test_config_positional_is_run_name(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", "renamed", "--config", "tau/smoke.yaml", "--dry-run=client", "-o", "json")
    assert r.exit_code == 0, r
    assert json.loads(r.stdout)["metadata"]["name"] == "renamed"


def test_unknown_target(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", "smok", "--dry-run=client")
    assert r.exit_code == 1 and "smoke" in r.stderr and "Traceback" not in r.stderr, r


def test_invalid_config_on_run_reports_every_problem(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    (project / "tau" / "bad.yaml").write_text("name: bad\nengine: job\ncompute:\n  gpu: 1\npolicy:\n  lane: x\n")
    r = tau_cli("run", "bad", "--dry-run=client")
    assert r.exit_code == 1, r
    assert "tau/bad.yaml:4:3: compute.gpu" in r.stderr and "tau/bad.yaml:6:3: policy.lane" in r.stderr


def test_submit_goes_through_the_backend(tau_cli, tau_plugins, project: Path) -> None:  # type: ignore[no-untyped-def]
    from tau_core.hookspecs import hookimpl
    from tau_core.lifecycle import RunRef, SubmitResult

    received = []

    class Recorder:
        name = "kubernetes"

        def submit(self, request):  # type: ignore[no-untyped-def]
            received.append(request)
            return SubmitResult(RunRef(request.name, "kubernetes", request.context["namespace"]), True, "created")

    class Plugin:
        @hookimpl
        def tau_register_execution_backends(self, register):  # type: ignore[no-untyped-def]
            register("kubernetes", lambda **_: Recorder(), priority=100)

    tau_plugins.register(Plugin(), name="recorder")
    r = tau_cli("run", "smoke")
    assert r.exit_code == 0, r
    assert "Run: kind-smoke" in r.stdout
    request = received[0]
    assert request.objects[0]["kind"] == "Job" and len(request.submission_id) == 24
    assert request.config_hash == request.objects[0]["metadata"]["annotations"]["tau.azure.com/config-hash"]


SNAPSHOT_PROFILES = [{"name": "kind-cpu-job", "applicability": {"teams": ["research"], "lanes": ["training"]},
                      "gpusPerWorker": 0, "workerCount": 1, "mode": "fixed", "placement": "independent",
                      "defaultLocalQueue": "kind-cpu",
                      "priorities": {"workloadPriorityClassName": "taugrid-default"}}]


def test_snapshot_profile_stamps_rendered(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    from tau_core.config.profiles import profile_set_hash

    snap = {"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauWorkloadProfileSnapshot", "tauClusterGeneration": 3,
            "profileSetHash": profile_set_hash(SNAPSHOT_PROFILES), "profiles": SNAPSHOT_PROFILES}
    (project / "tau" / "profiles.snapshot.yaml").write_text(json.dumps(snap))
    (project / "tau" / "prof.yaml").write_text(
        "name: prof\nengine: job\nentrypoint: train.sh\nimage: bash:5.2\npolicy:\n  namespace: ray\n  team: research\n"
        "  lane: training\n  workload_profile_snapshot: profiles.snapshot.yaml\n")
    r = tau_cli("run", "prof", "--dry-run=client")
    assert r.exit_code == 0, r
    assert "tau.azure.com/workload-profile: kind-cpu-job" in r.stdout
    assert "tau.azure.com/tau-cluster-generation: '3'" in r.stdout
    assert "from: workload profile" in r.stdout
    r = tau_cli("run", "prof")
    assert r.exit_code == 1 and "--dry-run=client" in r.stderr


HEAVY = ("kubernetes_asyncio", "polars", "pyarrow", "starlette", "uvicorn", "jinja2", "ray")


@pytest.mark.parametrize("argv", [["run", "--help"], ["run", "validate", "--help"], ["run", "schema", "--help"],
                                  ["run", "validate", "-c", "tau/smoke.yaml"],
                                  ["run", "smoke", "--dry-run=client"]])
def test_offline_paths_stay_light(project: Path, argv: list[str]) -> None:
    code = ("import sys\nfrom tau_core.cli import run, cli\nrc = run(cli, sys.argv[1:])\n"
            f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
            "print('HEAVY=' + ','.join(heavy))\n")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=project,
                         timeout=60)
    assert "HEAVY=\n" in out.stdout or out.stdout.rstrip().endswith("HEAVY="), out.stdout + out.stderr


def test_local_flag_and_local_workspace_use_the_local_backend(tau_cli, tau_plugins, project: Path) -> None:  # type: ignore[no-untyped-def]
    from tau_core.hookspecs import hookimpl
    from tau_core.lifecycle import RunRef, SubmitResult

    received = []

    class Recorder:
        name = "local"

        def submit(self, request):  # type: ignore[no-untyped-def]
            received.append(request)
            return SubmitResult(RunRef(request.name + "-1", "local"), True, "started")

    class Plugin:
        @hookimpl
        def tau_register_execution_backends(self, register):  # type: ignore[no-untyped-def]
            register("local", lambda **_: Recorder(), priority=100)

    tau_plugins.register(Plugin(), name="local-recorder")
    r = tau_cli("run", "smoke", "--local")
    assert r.exit_code == 0, r
    assert "through the local backend" in r.stderr and received[0].context["local"] is True
    (project / "tau" / "workspace.connection.yaml").write_text(
        "schema: tau.workspace.connection.v1\nworkspace: local\naccess:\n  method: local\n"
        "requirements:\n  minTauVersion: 0.5.0\n")
    (project / "tau" / "bare.yaml").write_text("name: bare\nengine: job\nimage: bash:5.2\ncompute:\n  gpus: 0\n")
    r = tau_cli("run", "bare")
    assert r.exit_code == 0, r
    assert received[1].name == "bare" and received[1].context["config_dir"].endswith("tau")


def test_validate_checks_the_snapshot_offline(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    from tau_core.config.profiles import profile_set_hash

    snap = {"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauWorkloadProfileSnapshot", "tauClusterGeneration": 3,
            "profileSetHash": profile_set_hash(SNAPSHOT_PROFILES), "profiles": SNAPSHOT_PROFILES}
    (project / "tau" / "profiles.snapshot.yaml").write_text(json.dumps(snap))
    body = ("name: prof\nengine: job\nimage: bash:5.2\npolicy:\n  namespace: ray\n  team: research\n"
            "  lane: training\n  workload_profile_snapshot: profiles.snapshot.yaml\n")
    (project / "tau" / "prof.yaml").write_text(body)
    r = tau_cli("run", "validate", "-c", "tau/prof.yaml")
    assert r.exit_code == 0 and "workload profile kind-cpu-job" in r.stdout, r
    (project / "tau" / "prof.yaml").write_text(body + "  queue: elsewhere\n")
    r = tau_cli("run", "validate", "-c", "tau/prof.yaml")
    assert r.exit_code == 1, r
    assert "tau/prof.yaml:9:3: policy.queue: policy.queue=elsewhere conflicts with authoritative workload profile" \
        in r.stderr


def test_managed_shapes_are_explained_on_run(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    (project / "tau" / "wf.yaml").write_text("schema_version: 1\nname: wf\n")
    r = tau_cli("run", "wf", "--dry-run=client")
    assert r.exit_code == 1 and "runtime.pip: required" in r.stderr, r
    (project / "tau" / "delegate.yaml").write_text("name: d\nengine: job\nworkflow:\n  file: wf.yaml\n")
    r = tau_cli("run", "delegate", "--dry-run=client")
    assert r.exit_code == 1 and "workflow.file" in r.stderr and "Traceback" not in r.stderr, r


def test_validate_name_is_a_target_or_a_name(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    (project / "tau.yaml").write_text(KIND.replace("entrypoint: train.sh\n", ""))
    sub = project / "sub"
    sub.mkdir()
    import os

    old = os.getcwd()
    os.chdir(sub)
    try:
        r = tau_cli("run", "validate", "smoke")  # tau/smoke.yaml, found up to the Git root
        assert r.exit_code == 0 and "kind-smoke" in r.stdout, r
        r = tau_cli("run", "validate", "other-name")  # not a target: names the default config's run
        assert r.exit_code == 0 and "other-name (job)" in r.stdout, r
    finally:
        os.chdir(old)


def test_usage_errors_read_as_tau_run(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", "smoke", "extra", "--dry-run=client")
    assert r.exit_code == 2, r
    assert "Usage: tau run [OPTIONS] [TARGET]" in r.stderr and "\x00" not in r.stderr
    r = tau_cli("run", "--dry-run=bogus")
    assert r.exit_code == 2 and "'bogus' is not one of" in r.stderr


def test_options_before_the_target_apply(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", "-n", "early", "smoke", "--dry-run=client", "-o", "json")
    assert r.exit_code == 0, r
    assert json.loads(r.stdout)["metadata"]["namespace"] == "early"


def test_group_config_applies_to_validate(tau_cli, project: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("run", "-c", "tau/smoke.yaml", "validate")
    assert r.exit_code == 0 and "tau/smoke.yaml is valid" in r.stdout, r
