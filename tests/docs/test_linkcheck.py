"""The docs session's link check (linkchecker over the built site's file:// URLs) fails on a broken internal
link and does not reach outside the site."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _linkchecker() -> str:
    found = shutil.which("linkchecker")
    assert found, "linkchecker is missing: the tests and docs sessions install it (noxfile DOCS_TOOLS)"
    return found


@pytest.fixture
def site_dir() -> Iterator[Path]:
    """A world-readable directory: linkchecker run as root drops to `nobody` (pytest's own tmp is 0700)."""
    path = Path(tempfile.mkdtemp(prefix="taugrid-linkcheck-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize(("target", "ok"), [("page.html", True), ("missing.html", False)])
def test_a_broken_internal_link_fails_the_check(site_dir: Path, target: str, ok: bool) -> None:
    tmp_path = site_dir
    (tmp_path / "page.html").write_text("<html><body><p>page</p></body></html>")
    (tmp_path / "index.html").write_text(
        f'<html><body><a href="{target}">internal</a> <a href="https://example.invalid/x">external</a></body></html>')
    result = subprocess.run([_linkchecker(), "--no-status", "--no-warnings", "--threads", "2",
                             str(tmp_path / "index.html")], capture_output=True, text=True, timeout=120)
    assert (result.returncode == 0) is ok, result.stdout + result.stderr
    # only internal (file://) URLs are checked: the external link is never fetched or reported
    assert "example.invalid" not in result.stdout
