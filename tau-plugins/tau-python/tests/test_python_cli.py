"""`tau python` through the real `tau` entry point (in-process): inspect, build, submit, submit-build."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sdk-train-eval" / "workflow.py"


@pytest.fixture
def module(repo: Path, tau_env: dict[str, str | None]) -> Path:
    tau_env["TAU_DATA_DIR"] = os.environ["TAU_DATA_DIR"]
    path = repo / "workflow.py"
    shutil.copy(EXAMPLE, path)
    return path


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_inspect_prints_each_handle(tau_cli, module: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("python", "inspect", str(module))
    assert r.exit_code == 0, r
    assert f"# sdk-train (kind=train, source: {module})" in r.stdout
    assert f"# sdk-eval (kind=eval, source: {module})" in r.stdout
    assert "upstream_checkpoint: /data/checkpoints/finetunes/sdk-train/artifacts/best/model.json" in r.stdout


def test_discovery_errors_exit_2(tau_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    (repo / "empty.py").write_text("X = 1\n")
    r = tau_cli("python", "inspect", "empty.py")
    assert r.exit_code == 2 and "no @tau.train or @tau.eval handles found" in r.stderr, r
    r = tau_cli("python", "build", "missing.py", "-o", "out")
    assert r.exit_code == 2 and "no such Python file" in r.stderr, r
    (repo / "two.py").write_text("import tau\n\n@tau.train('a', runtime_pip=['x'])\ndef a(ctx): pass\n\n"
                                 "@tau.train('b', runtime_pip=['x'])\ndef b(ctx): pass\n")
    r = tau_cli("python", "submit", "two.py", "--dry-run", "client")
    assert r.exit_code == 2 and "at most one @tau.train and one @tau.eval" in r.stderr, r
    (repo / "mismatch.py").write_text("import tau\n\n@tau.train('a', runtime_pip=['x'])\ndef a(ctx): pass\n\n"
                                      "@tau.eval('e', after='other', runtime_pip=['x'])\ndef e(ctx): pass\n")
    r = tau_cli("python", "inspect", "mismatch.py")
    assert r.exit_code == 2 and "does not match the train name 'a'" in r.stderr, r


def test_build_is_byte_for_byte_deterministic(tau_cli, module: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    one, two = tmp_path / "b1", tmp_path / "elsewhere" / "b2"
    assert tau_cli("python", "build", str(module), "-o", str(one)).exit_code == 0
    assert tau_cli("python", "build", str(module), "-o", str(two)).exit_code == 0
    assert _tree(one) == _tree(two)
    index = json.loads((one / "tau-build.json").read_text())
    assert index["schema"] == "tau.python.build"
    assert [(w["kind"], w["name"], w["namespace"], w["resource_name"]) for w in index["workloads"]] == [
        ("rayjob", "sdk-train", "ray", "tau-sdk-train"), ("rayjob-eval", "sdk-eval", "ray", "tau-sdk-eval")]
    r = tau_cli("python", "build", str(module), "-o", str(one))
    assert r.exit_code == 2 and "--force" in r.stderr, r
    assert tau_cli("python", "build", str(module), "-o", str(one), "--force", "--queue", "other").exit_code == 0
    assert "queue: other" in (one / "sdk-train" / "sdk-train.yaml").read_text()


def test_build_refuses_inline_secret_values(tau_cli, repo: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (repo / "s.py").write_text("import tau\n\n@tau.train('s', runtime_pip=['x'], "
                               "env={'T': tau.secret_from_env('HOME')})\ndef s(ctx): pass\n")
    r = tau_cli("python", "build", "s.py", "-o", str(tmp_path / "b"))
    assert r.exit_code == 1 and "cannot be built into an artifact" in r.stderr, r


def test_submit_and_submit_build_dry_run(tau_cli, module: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("python", "submit", str(module), "--dry-run", "client", "--namespace", "research")
    assert r.exit_code == 0, r
    assert "name: tau-sdk-train" in r.stdout and "namespace: research" in r.stdout
    assert "tau-sdk-eval" not in r.stdout  # a dry run skips polling and the eval
    assert tau_cli("python", "build", str(module), "-o", str(tmp_path / "b")).exit_code == 0
    r = tau_cli("python", "submit-build", str(tmp_path / "b"), "--dry-run", "client")
    assert r.exit_code == 0, r
    assert "name: tau-sdk-train" in r.stdout and "name: tau-sdk-eval" in r.stdout
    assert "TAU_UPSTREAM_CHECKPOINT" in r.stdout


def test_tau_cli_exit_codes_are_propagated(tau_cli, module: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    failing = tmp_path / "tau-9"
    failing.write_text("#!/bin/sh\nexit 9\n")
    failing.chmod(0o755)
    os.environ["TAU_BINARY"] = str(failing)
    try:
        r = tau_cli("python", "submit", str(module), "--dry-run", "client")
    finally:
        del os.environ["TAU_BINARY"]
    assert r.exit_code == 9 and "tau python submit: tau CLI failed (exit=9)" in r.stderr, r
    r = tau_cli("python", "submit", str(module), "--dry-run", "client", "--node-selector", "novalue")
    assert r.exit_code == 2 and "KEY=VALUE" in r.stderr, r


def test_submit_local_runs_the_module_with_the_local_backend(tau_cli, module: Path) -> None:  # type: ignore[no-untyped-def]
    """Train then eval as local-backend runs; their tau.stellar metrics reach the store and Stellar."""
    import re
    import subprocess
    import sys

    r = tau_cli("python", "submit", str(module), "--local")
    assert r.exit_code == 0, r
    data = Path(os.environ["TAU_DATA_DIR"])
    ckpt = data / "data" / "checkpoints" / "finetunes" / "sdk-train" / "artifacts" / "best" / "model.json"
    assert abs(json.loads(ckpt.read_text())["w"] - 3.0) < 0.05
    assert "upstream checkpoint /data/checkpoints/finetunes/sdk-train/artifacts/best/model.json" in r.stderr
    runs = dict(re.findall(r"^Run: ((sdk-train|sdk-eval)-\S+)$", r.stdout, flags=re.M))
    by_name = {name: run for run, name in runs.items()}
    assert set(by_name) == {"sdk-train", "sdk-eval"}, r.stdout
    exe = str(Path(sys.executable).parent / "taugrid-portal")
    for name, metric in (("sdk-train", "loss"), ("sdk-eval", "eval_mse")):
        assert f"Run {by_name[name]} succeeded" in r.stderr
        proc = subprocess.run([exe, "experiment", "stellar", by_name[name], "--store", str(data / "expstore"),
                               "-o", "json"], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        snap = json.loads(proc.stdout)
        assert metric in [c["metric_name"] for c in snap["charts"]]
        assert snap["runs"][0]["state"] == "succeeded"
    packet = data / "data" / "checkpoints" / "finetunes" / "sdk-eval" / "stellar" / "packet"
    assert '"source_run_id": "sdk-train"' in (packet / "artifacts.jsonl").read_text()


def test_bootstrap_writes_a_starter_that_inspects(tau_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("python", "bootstrap", "starter")
    assert r.exit_code == 0, r
    r = tau_cli("python", "inspect", "starter/workflow.py")
    assert r.exit_code == 0 and "# starter-train (kind=train" in r.stdout, r
    r = tau_cli("python", "bootstrap", "starter")
    assert r.exit_code == 2 and "--force" in r.stderr


def test_doctor_reports_an_unreachable_cluster(tau_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    r = tau_cli("python", "doctor")
    assert "tau CLI v0.5.0: ok" in r.stdout and "experiment store (taugrid-portal): ok" in r.stdout, r
    assert r.exit_code == 1 and "cannot check permissions in namespace ray" in r.stderr, r
