"""`tau workspace init-repo NAME --local`: a scaffold that validates and names its next steps."""

from __future__ import annotations

from pathlib import Path

from tau_core.workspace import load_descriptor


def test_local_scaffold_writes_a_valid_repository(tau_cli, tmp_path):
    out = tmp_path / "demo"
    result = tau_cli("workspace", "init-repo", "demo", "--local", "--output", str(out))
    assert result.exit_code == 0, result
    for rel in ("README.md", "train.py", "tau/train.yaml", "tau/smoke.yaml", "tau/workspace.connection.yaml"):
        assert (out / rel).is_file(), rel
        assert f"created {out / rel}" in result.stdout
    assert load_descriptor(out / "tau" / "workspace.connection.yaml").is_local
    from tau_core.config import load_config

    for target in ("train", "smoke"):
        validated = load_config(out / "tau" / f"{target}.yaml")  # raises on any problem
        assert validated.normalized["name"] == target
    assert "tau run train" in result.stdout


def test_existing_files_are_not_overwritten(tau_cli, tmp_path):
    out = tmp_path / "demo"
    assert tau_cli("workspace", "init-repo", "demo", "--local", "--output", str(out)).exit_code == 0
    (out / "train.py").write_text("# mine\n")
    result = tau_cli("workspace", "init-repo", "demo", "--local", "--output", str(out))
    assert result.exit_code == 1
    assert "refusing to overwrite existing files" in result.stderr and "--force" in result.stderr
    assert (out / "train.py").read_text() == "# mine\n"
    assert tau_cli("workspace", "init-repo", "demo", "--local", "--output", str(out), "--force").exit_code == 0
    assert (out / "train.py").read_text() != "# mine\n"


def test_bad_name_and_missing_image_are_usage_errors(tau_cli, tmp_path):
    result = tau_cli("workspace", "init-repo", "Bad_Name", "--local", "--output", str(tmp_path / "x"))
    assert result.exit_code == 2 and "lowercase DNS label" in result.stderr
    result = tau_cli("workspace", "init-repo", "demo", "--output", str(tmp_path / "y"))
    assert result.exit_code == 2 and "--image is required" in result.stderr and "--local" in result.stderr
    assert not Path(tmp_path / "y").exists()
