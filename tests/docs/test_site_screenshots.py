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
        return Path(given).resolve()
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


def test_the_mermaid_diagrams_render_offline(site: Path) -> None:
    """The four architecture diagrams are drawn by the site's own copy of Mermaid (no CDN is reachable).

    mkdocs-material swaps each ``pre.mermaid`` (the text source) for a ``div.mermaid`` whose drawing sits in a
    closed shadow root: drawn means a div, no text of its own left, and the height of a diagram."""
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"headless Chromium is required but {CHROMIUM} is missing; run tests/tools/ensure-chromium.sh")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            # anything not on the local file system is refused, so a CDN fallback could not pass this test
            tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                      else route.abort())
            tab.goto((site / "getting-started" / "architecture" / "index.html").as_uri())
            tab.wait_for_function("document.querySelectorAll('div.mermaid').length == 4", timeout=60_000)
            drawn = tab.evaluate("Array.from(document.querySelectorAll('.mermaid')).map("
                                 "e => [e.tagName, e.textContent.trim().length, e.getBoundingClientRect().height])")
            assert [d[0] for d in drawn] == ["DIV"] * 4
            assert all(d[1] == 0 and d[2] > 100 for d in drawn), drawn
            tab.screenshot(path=str(ARTIFACTS / "architecture.png"), full_page=False)
        finally:
            browser.close()
