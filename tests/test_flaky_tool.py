"""`nox -s flaky` (tests/tools/flaky.py): how a real pytest JUnit report is folded into per-test figures."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parent / "tools" / "flaky.py"
spec = importlib.util.spec_from_file_location("flaky_tool", TOOL)
assert spec is not None and spec.loader is not None
flaky = importlib.util.module_from_spec(spec)
spec.loader.exec_module(flaky)

# pytest-repeat names round i of n ``test_x[i-n]`` (or ``test_x[param-i-n]``): the same ids, made by parametrize
ROUNDS = """
import pytest

@pytest.mark.parametrize("r", ["1-3", "2-3", "3-3"])
def test_steady(r):
    pass

@pytest.mark.parametrize("r", ["1-3", "2-3", "3-3"])
def test_wobbly(r):
    assert r != "2-3", "lost the race"

@pytest.mark.parametrize("r", ["case-1-2", "case-2-2"])
def test_param(r):
    pass
"""


def test_repetition_suffixes_are_removed() -> None:
    assert flaky._without_repetition("test_x[3-20]") == "test_x"
    assert flaky._without_repetition("test_x[case-3-20]") == "test_x[case]"
    assert flaky._without_repetition("test_x[case]") == "test_x[case]"


def test_a_real_report_folds_into_passes_failures_and_seconds(tmp_path: Path) -> None:
    (tmp_path / "test_rounds.py").write_text(ROUNDS)
    junit = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    str(tmp_path / "test_rounds.py"), f"--junitxml={junit}", "-o", "junit_family=xunit1",
                    "--rootdir", str(tmp_path)], cwd=tmp_path, capture_output=True, check=False)
    passed, failed, first, seconds = flaky.results(junit)
    assert passed["test_rounds::test_steady"] == 3 and failed["test_rounds::test_steady"] == 0
    assert passed["test_rounds::test_wobbly"] == 2 and failed["test_rounds::test_wobbly"] == 1
    assert "lost the race" in first["test_rounds::test_wobbly"]
    assert passed["test_rounds::test_param[case]"] == 2
    assert set(seconds) == {"test_rounds::test_steady", "test_rounds::test_wobbly", "test_rounds::test_param[case]"}
    assert all(t >= 0 for t in seconds.values())
