"""The README's first command, verbatim, in a fresh virtual environment.

Slow (a real ``pip install`` of the checkout and its dependencies, about a minute with a warm
pip cache). It proves the quickstart needs nothing beyond what the distributions declare and
that the README's promise holds: the run succeeds and a Stellar page is written.
"""

from __future__ import annotations

import os
import re
import subprocess
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    """The two commands the README opens with (its first two ```bash blocks)."""
    blocks = re.findall(r"```bash\n(.*?)\n```", (REPO / "README.md").read_text(), flags=re.S)
    return [b.strip() for b in blocks[:2]]


def test_readme_opens_with_two_single_line_commands() -> None:
    first, second = readme_commands()
    assert "\n" not in first and "\n" not in second
    assert "pip install" in first and "tau run" in first and "--local" in first
    assert second == "python3 -m pip install nox && nox -s tests"
    ci = (REPO / ".ci" / "run").read_text()
    assert second in ci, ".ci/run must run the README's test command"


@pytest.mark.slow
def test_readme_first_command_runs_the_quickstart_in_a_fresh_venv(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAU_", "VIRTUAL_ENV", "PYTHON"))}
    env.update({"TAU_DATA_DIR": str(tmp_path / "home"), "NO_COLOR": "1", "HOME": str(tmp_path),
                "VIRTUAL_ENV": str(env_dir), "PATH": f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"})
    command = readme_commands()[0]
    result = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    output = result.stdout + result.stderr  # the run's log on stdout, the summary on stderr
    assert re.search(r"^Run \S+ succeeded$", output, flags=re.M), output[-2000:]
    page = re.search(r"^Stellar: +(\S+)$", output, flags=re.M)
    assert page, output[-2000:]
    html = Path(page.group(1)).read_text()
    assert "uPlot" in html and "loss" in html
