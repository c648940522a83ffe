"""`tau workspace init-repo` for cluster repositories: the documented file set, descriptors, --force, bytes."""

from __future__ import annotations

import hashlib
import stat
import subprocess
from pathlib import Path

import pytest

from tau_core.workspace import load_descriptor

IMAGE = "ghcr.io/acme/train:1.0"
SUB, TENANT = "11111111-2222-3333-4444-555555555555", "66666666-7777-8888-9999-000000000000"
AZURE = ("--azure-subscription-id", SUB, "--azure-tenant-id", TENANT, "--aks-resource-group", "rg-research",
         "--aks-cluster", "aks-research")
FILES = {".env.example", ".gitignore", ".python-version", "AGENTS.md", "README.md", "images/train.Dockerfile",
         "pyproject.toml", "scripts/configure.sh", "scripts/doctor.sh", "scripts/setup-azure.sh", "scripts/setup.sh",
         "scripts/smoke.sh", "scripts/train.sh", "src/my_research/__init__.py", "src/my_research/smoke.py",
         "src/my_research/train.py", "tau/smoke.yaml", "tau/train.yaml", "tau/train-gpu.yaml"}


def _tree(root: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), stat.S_IMODE(p.stat().st_mode))
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_provider_neutral_scaffold(tau_cli, tmp_path):
    out = tmp_path / "my-research"
    result = tau_cli("workspace", "init-repo", "my-research", "--image", IMAGE, "--workspace", "aurora",
                     "--kube-context", "research-cluster", "--output", str(out))
    assert result.exit_code == 0, result.stderr
    tree = _tree(out)
    assert set(tree) == FILES | {"tau/workspace.connection.yaml"}
    for rel, (_, mode) in tree.items():
        assert mode == (0o755 if rel.startswith("scripts/") else 0o644), rel
    descriptor = load_descriptor(out / "tau" / "workspace.connection.yaml")
    assert (descriptor.workspace, descriptor.access_method, descriptor.context_name) == \
        ("aurora", "kubeconfig", "research-cluster")
    from tau_core.config import load_config

    for target in ("smoke", "train", "train-gpu"):
        config = load_config(out / "tau" / f"{target}.yaml")
        assert config.normalized["name"] == target
    assert f"image: {IMAGE}" in (out / "tau" / "train.yaml").read_text()
    assert "FROM python:3.12-slim" in (out / "images" / "train.Dockerfile").read_text()
    assert "tau workspace connection" in result.stdout


def test_aks_scaffold_defaults_the_context_to_the_cluster(tau_cli, tmp_path):
    out = tmp_path / "r"
    result = tau_cli("workspace", "init-repo", "my-research", "--image", IMAGE, "--workspace", "aurora", *AZURE,
                     "--output", str(out))
    assert result.exit_code == 0, result.stderr
    descriptor = load_descriptor(out / "tau" / "workspace.connection.yaml")
    assert descriptor.access_method == "aks" and descriptor.context_name == "aks-research"
    assert descriptor.aks_resource_id == (f"/subscriptions/{SUB}/resourceGroups/rg-research/providers/"
                                          "Microsoft.ContainerService/managedClusters/aks-research")
    assert descriptor.aks_tenant_id == TENANT


def test_no_descriptor_without_enough_facts(tau_cli, tmp_path):
    out = tmp_path / "r"
    result = tau_cli("workspace", "init-repo", "my-research", "--image", IMAGE, "--output", str(out))
    assert result.exit_code == 0, result.stderr
    assert set(_tree(out)) == FILES
    assert "no descriptor yet" in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (("--workspace", "aurora", "--azure-tenant-id", TENANT), "needs all four Azure flags; missing"),
    (("--kube-context", "ctx"), "--workspace is required"),
    (("--workspace", "aurora", *AZURE[:2], "--azure-tenant-id", "nope", *AZURE[4:]), "must be a UUID"),
    (("--workspace", "Aurora!", "--kube-context", "c"), "--workspace"),
    (("--workspace", "aurora", "--kube-context", "a: b"), "YAML-special"),
    (("--template", "gpu"), "is not one of python, external-github, dpr"),
    (("--image", "bad image"), "not an image reference"),
])
def test_bad_flags_write_nothing(tau_cli, tmp_path, args, message):
    out = tmp_path / "r"
    base = () if "--image" in args else ("--image", IMAGE)
    result = tau_cli("workspace", "init-repo", "my-research", *base, *args, "--output", str(out))
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr
    assert not out.exists()


def test_byte_for_byte_reproducible_and_force(tau_cli, tmp_path):
    args = ("workspace", "init-repo", "my-research", "--image", IMAGE, "--workspace", "aurora", *AZURE)
    a, b = tmp_path / "a", tmp_path / "b"
    assert tau_cli(*args, "--output", str(a)).exit_code == 0
    assert tau_cli(*args, "--output", str(b)).exit_code == 0
    assert _tree(a) == _tree(b)
    (a / "tau" / "train.yaml").write_text("# mine\n")
    (a / "notes.md").write_text("keep me\n")
    refused = tau_cli(*args, "--output", str(a))
    assert refused.exit_code == 1 and "--force to overwrite generator-managed files" in refused.stderr
    assert (a / "tau" / "train.yaml").read_text() == "# mine\n"
    assert tau_cli(*args, "--output", str(a), "--force").exit_code == 0
    assert (a / "notes.md").read_text() == "keep me\n"
    (a / "notes.md").unlink()
    assert _tree(a) == _tree(b)


def test_configure_script_writes_the_image(tau_cli, tmp_path):
    out = tmp_path / "r"
    assert tau_cli("workspace", "init-repo", "my-research", "--image", IMAGE, "--output", str(out)).exit_code == 0
    done = subprocess.run([str(out / "scripts" / "configure.sh"), "--image", "acr.io/team/train@sha256:abc"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for target in ("smoke", "train", "train-gpu"):
        assert "  image: acr.io/team/train@sha256:abc\n" in (out / "tau" / f"{target}.yaml").read_text()
    bad = subprocess.run([str(out / "scripts" / "configure.sh"), "--image", "x; rm -rf /"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0
