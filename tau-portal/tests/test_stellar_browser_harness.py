"""The browser tests fail (never skip) with an install hint when chromium is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_missing_chromium_fails_with_an_install_hint(tmp_path: Path) -> None:
    browser_tests = Path(__file__).resolve().parent / "browser"
    env = {**os.environ, "TAU_CHROMIUM": str(tmp_path / "no-chromium")}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", str(browser_tests), "-q", "-x", "-p", "no:cacheprovider",
         "-k", "charts_drawn", "--rootdir", str(browser_tests.parents[2])],
        capture_output=True, text=True, env=env, timeout=300,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "apt-get install -y chromium" in out
    assert "skipped" not in out and ("1 error" in out or "1 failed" in out)
