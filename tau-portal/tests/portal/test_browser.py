"""A walkthrough of every Portal page in the Debian headless Chromium (Playwright, never a downloaded browser).

Screenshots of each page go to ``test-artifacts/portal/`` (gitignored) for humans to look at.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tau_testing.sim.scripts import PodScript

pytestmark = pytest.mark.browser
CHROMIUM = os.environ.get("TAU_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "portal"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


@pytest.fixture
def page():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"headless Chromium is required but {CHROMIUM} is missing; run tests/tools/ensure-chromium.sh",
                    pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme="dark")
        p = context.new_page()
        p.errors = []
        p.on("console", lambda m: p.errors.append(m.text) if m.type == "error" else None)
        p.on("pageerror", lambda e: p.errors.append(str(e)))
        p.on("response", lambda r: p.errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        p.on("dialog", lambda d: (p.errors.append("dialog: " + d.message), d.dismiss()))
        try:
            yield p
        finally:
            browser.close()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import init_experiment, record_run

    root = tmp_path / "store"
    s, _ = ExperimentStore.init(root, project="demo")
    with s:
        init_experiment(s, "exp", project="demo")
        record_run(s, "run-1", experiment="exp", metrics={"loss": 0.5}, step=1)
    return root


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _overview_page(page, base: str) -> None:
    page.goto(base + "/portal")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#card-nodes").inner_text() == "3/3"
    shot(page, "overview")


def _runs_page_refreshes_filters_and_opens_a_run(page, base: str, cluster, api: dict) -> None:
    page.goto(base + "/portal/runs?refresh=0.5")
    page.wait_for_selector("body[data-ready=true]")
    names = page.locator("#runs-table tbody td[data-key=name] a").all_inner_texts()
    assert sorted(names) == sorted(r["name"] for r in api["runs"])
    assert page.locator("#runs-table tbody tr[data-status=Running] td[data-key=name] a",
                        has_text="late-1").count() == 1
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    shot(page, "runs")
    cluster.advance(60)  # late-1 finishes in the simulator; auto-refresh must show it
    cluster.settle()
    page.wait_for_selector("#runs-table tbody tr[data-status=Complete] >> text=late-1", timeout=15000)
    page.fill("[data-filter-for=runs-table]", "fails")
    assert "runs-table.q=fails" in page.evaluate("location.search")
    assert page.locator("#runs-table tbody tr:visible").count() == 1
    page.click("#runs-table th[data-key=name]")
    assert "runs-table.sort=name" in page.evaluate("location.search")
    page.goto(page.evaluate("location.href"))  # the URL holds the state: a shared link shows the same view
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("[data-filter-for=runs-table]").input_value() == "fails"
    assert page.locator("#runs-table tbody tr:visible").count() == 1
    page.click("#runs-table tbody tr:visible a")
    page.wait_for_selector("#phases li")
    assert page.locator("#run-name").inner_text() == "fails-1"
    assert page.locator("#run-status").inner_text() == "Failed"
    assert "<img src=x onerror=alert(1)>" in page.locator("#logs").inner_text()  # shown as text, never run
    shot(page, "run-detail")


def _table_pages_match_the_api(page, base: str, portal) -> None:
    for name, path, selector in (("jobs", "/portal/jobs", "#jobs-table tbody tr"),
                                 ("nodes", "/portal/nodes", "#nodes-table tbody tr"),
                                 ("ray", "/portal/ray", "#ray-table tbody tr"),
                                 ("experiments", "/portal/experiments", "#exp-table tbody tr")):
        page.goto(base + path)
        page.wait_for_selector("body[data-ready=true]")
        assert page.locator(selector).count() >= 1, name
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth"), name
        shot(page, name)
    nodes = portal.get("/api/portal/nodes").json()["nodes"]
    page.goto(base + "/portal/nodes")
    assert sorted(page.locator("#nodes-table td[data-key=name]").all_inner_texts()) == sorted(n["name"] for n in nodes)
    jobs = portal.get("/api/portal/jobs").json()["workloads"]
    page.goto(base + "/portal/jobs")
    shown = dict(zip(page.locator("#jobs-table td[data-key=name]").all_inner_texts(),
                     page.locator("#jobs-table td[data-key=cqposition]").all_inner_texts(), strict=True))
    assert shown == {w["name"]: "" if w["positionInClusterQueue"] is None else str(w["positionInClusterQueue"])
                     for w in jobs}
    ray = portal.get("/api/portal/ray").json()["clusters"]
    page.goto(base + "/portal/ray")
    assert page.locator("#ray-table td[data-key=cluster]").all_inner_texts() == [c["cluster"] for c in ray]
    page.goto(base + "/portal/experiments")
    page.click("#exp-table a")
    page.wait_for_load_state()
    assert "/stellar?target=exp" in page.url
    shot(page, "stellar")


CONTRAST = """() => {
  const rgb = s => s.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = c => { const [r, g, b] = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
                     return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const style = getComputedStyle(document.body);
  const bg = lum(rgb(style.backgroundColor)), fg = lum(rgb(style.color));
  return {background: bg, ratio: (Math.max(bg, fg) + 0.05) / (Math.min(bg, fg) + 0.05)};
}"""


def _pages_fit_a_laptop_screen_in_dark_mode(page, base: str) -> None:
    """At 1280x720 (a laptop) no page scrolls sideways or clips a table, and the dark scheme is dark and
    readable (WCAG AA contrast between the text and its background)."""
    page.set_viewport_size({"width": 1280, "height": 720})
    for path in ("/portal", "/portal/runs", "/portal/runs/aurora/fails-1", "/portal/jobs", "/portal/nodes",
                 "/portal/ray", "/portal/experiments"):
        page.goto(base + path)
        page.wait_for_selector("body[data-ready=true]")
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth"), path
        assert page.evaluate("(() => { const m = document.querySelector('main'); "
                             "return m.scrollWidth <= m.clientWidth; })()"), f"{path}: content clipped sideways"
        colours = page.evaluate(CONTRAST)
        assert colours["background"] < 0.05 and colours["ratio"] >= 4.5, (path, colours)
    page.set_viewport_size({"width": 1400, "height": 1000})


def _runs_page_survives_the_api_server_going_away(page, base: str, cluster) -> None:
    """The API server goes away: the open Runs page says so and shows no rows as current; then it recovers."""
    from tau_testing.sim.server import ServerThread

    page.goto(base + "/portal/runs?refresh=0.5")
    page.wait_for_selector("body[data-ready=true]")
    cluster._server.stop()
    page.wait_for_selector("#banner:not([hidden])", timeout=30000)
    assert "cannot be reached" in page.locator("#banner").inner_text()
    assert page.locator("#runs-table tbody tr").count() == 0
    assert page.locator("#freshness").inner_text() == "not current"
    assert page.locator("#runs-count").inner_text() == ""
    shot(page, "runs-api-server-away")
    cluster._server = ServerThread(cluster)
    cluster._server.start()
    page.wait_for_selector("#runs-table tbody tr >> text=fails-1", timeout=30000)
    assert page.locator("#banner").is_hidden()


def test_walkthrough_of_every_page(populated, portal_factory, store: Path, page, make_job) -> None:
    from taugrid_portal.portal.config import OperatorScope

    cluster = populated.cluster
    cluster.scripts.add("^late-", PodScript(run_seconds=30))
    cluster.store.create(make_job("late-1"))
    cluster.settle()
    portal = portal_factory(cluster, store=store, jobs_scope_mode="operator",
                            operator_scopes=(OperatorScope("aurora", "aurora", "jobqueue"),))
    api = portal.wait("/api/portal/runs", lambda r: r.status_code == 200 and r.json()["total"] >= 7).json()
    base = portal.url

    _overview_page(page, base)
    _runs_page_refreshes_filters_and_opens_a_run(page, base, cluster, api)
    _table_pages_match_the_api(page, base, portal)
    _pages_fit_a_laptop_screen_in_dark_mode(page, base)
    assert page.errors == [], page.errors
    _runs_page_survives_the_api_server_going_away(page, base, cluster)
