"""The built documentation site in headless Chromium: the home page and a generated reference page render,
and their screenshots are kept in ``test-artifacts/docs/``.

``nox -s tests`` and ``nox -s docs`` build the site once (strictly) and pass it as ``TAUGRID_DOCS_SITE``;
run alone, the test builds it itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "docs"
CHROMIUM = os.environ.get("TAU_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("TAUGRID_DOCS_SITE")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(REPO / "mkdocs.yml"),
                    "-d", str(out)], check=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    return out


@pytest.mark.parametrize(("page", "heading", "expect"), [
    ("index.html", "TauGrid", "Quickstart on a laptop"),
    ("reference/cli/tau/index.html", "tau command line", "tau run validate"),
])
def test_page_renders_in_chromium(site: Path, page: str, heading: str, expect: str) -> None:
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"headless Chromium is required but {CHROMIUM} is missing; run tests/tools/ensure-chromium.sh")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / (page.replace("/index.html", "").replace("/", "-").removesuffix(".html") + ".png")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            tab.goto((site / page).as_uri())
            assert heading in tab.locator("h1").first.inner_text()
            assert expect in tab.locator("article").inner_text()
            tab.screenshot(path=str(shot), full_page=False)
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
