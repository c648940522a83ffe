"""Release values (tests/tools/release_values.py): every image of deploy/docker/images.toml pinned by digest in
a values file the real Helm accepts, the charts' default repositories naming these images, and a digests file
that is incomplete or wrong refused before anything is built. No Docker engine here: the digests are a fixture
file in the format `nox -s images -- --push` records."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tau_testing.charts import build_test_umbrella, helm_env

REPO = Path(__file__).resolve().parents[2]
CHARTS = REPO / "deploy" / "charts"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"tau_{name}_tool", REPO / "tests" / "tools" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


release = _load("release")
values = release.release_values  # the module release.py itself uses (one ValuesError class)
IMAGES = values.images()
DIGESTS = {image.name: f"sha256:{n:064x}" for n, image in enumerate(IMAGES, 1)}


def _digests_file(tmp_path: Path, pairs: dict[str, str] | None = None) -> Path:
    path = tmp_path / "digests.json"
    values.record(path, [f"{k}={v}" for k, v in (pairs or DIGESTS).items()], "0.0.0")
    return path


def _default(path: str) -> dict[str, Any]:
    """The image mapping at ``path`` in the umbrella's values, else in the subchart's own values."""
    first, *rest = path.split(".")
    for doc, keys in ((CHARTS / "taugrid" / "values.yaml", [first, *rest]), (CHARTS / first / "values.yaml", rest)):
        node: Any = yaml.safe_load(doc.read_text())
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and "repository" in node:
            return node
    raise AssertionError(f"no default image at {path}")


def test_the_table_names_every_dockerfile_and_the_charts_default_to_its_images() -> None:
    assert {i.dockerfile for i in IMAGES} == {p.name for p in (REPO / "deploy" / "docker").glob("*.Dockerfile")}
    for image in IMAGES:
        for path in image.values:
            assert _default(path)["repository"] == image.repository, path


def test_the_offload_image_variable_is_in_the_table_of_environment_variables() -> None:
    from tau_core.envvars import ENV_VARS

    names = {v.name for v in ENV_VARS}
    assert {var for i in IMAGES for var in i.env} <= names


def test_a_digests_file_must_pin_every_image(tmp_path: Path) -> None:
    missing = dict(DIGESTS)
    missing.pop("tau-cli")
    with pytest.raises(values.ValuesError, match="tau-cli: missing"):
        values.write(tmp_path, _digests_file(tmp_path, missing), "0.0.0")
    (tmp_path / "bad.json").write_text('{"images": {"tau-cli": "sha256:abc"}}')
    with pytest.raises(values.ValuesError, match=r"tau-cli: 'sha256:abc' is not sha256"):
        values.read_digests(tmp_path / "bad.json", IMAGES)
    with pytest.raises(values.ValuesError, match="expected NAME=sha256"):
        values.record(tmp_path / "x.json", ["nope=sha256:" + "0" * 64], "0.0.0")


def test_release_build_refuses_a_bad_digests_file_before_building(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(values.ValuesError, match="not a digests file"):
        release.build(tmp_path / "out", ["tau-version"], tmp_path / "bad.json")
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def helm(helm_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    env = helm_env(tmp_path_factory.mktemp("helm-home"))
    umbrella = build_test_umbrella(tmp_path_factory.mktemp("umbrella"), helm_bin)

    def template(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(helm_bin), "template", "taugrid", str(umbrella), "-n", "tau-system", *args],
                              capture_output=True, text=True, env=env, timeout=120)
    return template


def test_release_values_pin_every_rendered_tau_image_by_digest(helm: Any, tmp_path: Path) -> None:
    written = values.write(tmp_path, _digests_file(tmp_path), "0.0.0")
    assert written.name == "values-release.yaml"
    env = (tmp_path / "images.env").read_text()
    assert env == f"TAU_METRICS_OFFLOAD_IMAGE={REPO_OF['taugrid-portal']}@{DIGESTS['taugrid-portal']}\n"
    result = helm("-f", str(written), "--set", "taugrid-core.stellar.enabled=true")
    assert result.returncode == 0, result.stderr[-2000:]
    images = {c["image"] for doc in yaml.safe_load_all(result.stdout) if doc and doc["kind"] == "Deployment"
              for c in doc["spec"]["template"]["spec"]["containers"]}
    ours = {image for image in images if image.startswith("mcr.microsoft.com/aks/ai-runtime/")}
    assert ours == {f"{REPO_OF['tau-controller']}@{DIGESTS['tau-controller']}",
                    f"{REPO_OF['taugrid-portal']}@{DIGESTS['taugrid-portal']}"}


def test_without_digests_the_template_keeps_placeholders_that_helm_refuses(helm: Any, tmp_path: Path) -> None:
    written = values.write(tmp_path, None, "0.0.0")
    assert written.name == "values-release.template.yaml" and not (tmp_path / "values-release.yaml").exists()
    assert not (tmp_path / "images.env").exists()
    assert "@${digest:taugrid-portal}" in (tmp_path / "images.template.env").read_text()
    assert "${digest:tau-controller}" in written.read_text()
    result = helm("-f", str(written))
    assert result.returncode != 0 and "digest" in result.stderr


REPO_OF = {image.name: image.repository for image in IMAGES}
