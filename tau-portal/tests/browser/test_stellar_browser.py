"""The Stellar page in a real headless Chromium (Debian package) driven by Playwright."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"
HOSTILE_RUN = "<script>alert(1)</script>"


def hostile(snapshot: dict[str, Any], run_id: str, name: str = HOSTILE_RUN) -> dict[str, Any]:
    """The snapshot as read from a store (written by another tool) whose run is named ``name``."""
    text = json.dumps(snapshot)
    return json.loads(text.replace(json.dumps(run_id), json.dumps(name)))


def _page_file(tmp_path: Path, snapshot: dict[str, Any], name: str = "stellar.html") -> str:
    from taugrid_portal.stellar.html import render_html

    path = tmp_path / name
    path.write_text(render_html(snapshot), encoding="utf-8")
    return path.as_uri()


@pytest.fixture
def snapshot(demo_store: Path) -> dict[str, Any]:
    from taugrid_portal.stellar.snapshot import build_snapshot
    from taugrid_portal.store import ExperimentStore

    with ExperimentStore.open(demo_store) as store:
        return build_snapshot(store, "sweep", max_points=120)


def _chart(page: Any, index: int, expr: str) -> Any:
    return page.evaluate(f"(() => {{ const c = window.stellar.charts[{index}]; const u = c.u; return {expr}; }})()")


def _legend_values(page: Any, index: int = 0) -> list[str]:
    return page.locator("figure.chart").nth(index).locator("[data-value]").all_inner_texts()


def test_charts_drawn_without_console_errors_and_screenshot(probe: Any, tmp_path: Path, snapshot: dict) -> None:
    page = probe.open(_page_file(tmp_path, snapshot))
    charts = page.locator("figure.chart")
    assert charts.count() == 2
    runs = len(snapshot["runs"])
    for i in range(2):
        assert _chart(page, i, "u.series.length") == runs + 1
        assert _chart(page, i, "u.series.slice(1).filter(s => s.show).length") == runs
    # The canvas has drawn pixels (not a blank plot).
    painted = page.evaluate(
        """(() => { const cv = document.querySelector('figure.chart canvas');
        const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; })()"""
    )
    assert painted > 2000
    assert page.evaluate("window.stellar.firstChartAt") is not None
    assert page.evaluate("performance.getEntriesByName('stellar-first-chart').length") == 1
    # "N of M points shown" matches the snapshot.
    first = snapshot["charts"][0]
    density = charts.first.locator("[data-density]").inner_text()
    assert density.startswith(f"{first['rendered_points']} of {first['source_points']} points shown")
    assert first["rendered_points"] < first["source_points"]
    # Self-contained: the page made no request besides itself.
    assert [u for u in probe.requests if not u.startswith("file://")] == []
    assert probe.console_errors() == []
    assert probe.dialogs == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "stellar.png"), full_page=True)
    assert (ARTIFACTS / "stellar.png").stat().st_size > 10_000


def test_hover_updates_legend_values(probe: Any, tmp_path: Path, snapshot: dict) -> None:
    page = probe.open(_page_file(tmp_path, snapshot))
    fig = page.locator("figure.chart").first
    header = fig.locator("[data-legend-step]")
    assert header.inner_text() == "latest"
    before = _legend_values(page)
    over = fig.locator(".u-over")
    box = over.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.1, box["y"] + box["height"] / 2)
    page.wait_for_function("() => document.querySelector('figure.chart [data-legend-step]').textContent.startsWith('step')")
    step_text = header.inner_text()
    hovered = _legend_values(page)
    assert hovered != before
    # The legend shows the real point of each run at the hovered step.
    step = int(step_text.split()[1])
    series = snapshot["charts"][0]["series"][0]
    idx = max(i for i, s in enumerate(series["steps"]) if s <= step)
    assert float(hovered[0]) == pytest.approx(series["values"][idx], rel=1e-5)
    page.mouse.move(box["x"] + box["width"] * 0.8, box["y"] + box["height"] / 2)
    page.wait_for_function(f"() => document.querySelector('figure.chart [data-legend-step]').textContent !== {step_text!r}")
    assert _legend_values(page) != hovered
    assert probe.console_errors() == []


def test_drag_zoom_and_double_click_reset(probe: Any, tmp_path: Path, snapshot: dict) -> None:
    page = probe.open(_page_file(tmp_path, snapshot))
    full = _chart(page, 0, "[u.scales.x.min, u.scales.x.max]")
    over = page.locator("figure.chart").first.locator(".u-over")
    box = over.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=8)
    page.mouse.up()
    zoomed = _chart(page, 0, "[u.scales.x.min, u.scales.x.max]")
    assert zoomed[0] > full[0] and zoomed[1] < full[1]
    assert zoomed[1] - zoomed[0] < (full[1] - full[0]) * 0.5
    over.dblclick(position={"x": box["width"] * 0.5, "y": box["height"] / 2})
    page.wait_for_function(f"() => window.stellar.charts[0].u.scales.x.max >= {full[1]}")
    assert _chart(page, 0, "[u.scales.x.min, u.scales.x.max]") == full
    # The reset button restores every chart too.
    page.mouse.move(box["x"] + box["width"] * 0.2, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.4, y, steps=8)
    page.mouse.up()
    assert _chart(page, 0, "u.scales.x.max") < full[1]
    page.click("#reset-zoom")
    assert _chart(page, 0, "[u.scales.x.min, u.scales.x.max]") == full
    # Escape resets as well.
    page.mouse.move(box["x"] + box["width"] * 0.2, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.4, y, steps=8)
    page.mouse.up()
    assert _chart(page, 0, "u.scales.x.max") < full[1]
    page.keyboard.press("Escape")
    assert _chart(page, 0, "[u.scales.x.min, u.scales.x.max]") == full
    assert probe.console_errors() == []


def test_log_scale_and_smoothing(probe: Any, tmp_path: Path, snapshot: dict) -> None:
    page = probe.open(_page_file(tmp_path, snapshot))
    assert _chart(page, 0, "u.scales.y.distr") == 1
    page.check("#log-scale")
    page.wait_for_function("() => window.stellar.charts[0].u && window.stellar.charts[0].u.scales.y.distr === 3")
    assert _chart(page, 1, "u.scales.y.distr") == 3
    page.uncheck("#log-scale")
    page.wait_for_function("() => window.stellar.charts[0].u.scales.y.distr === 1")
    raw = _chart(page, 0, "u.data[1].slice(0, 20)")
    page.locator("#smoothing").fill("0.9")
    page.wait_for_function("() => document.getElementById('smoothing-value').textContent === '0.90'")
    smoothed = _chart(page, 0, "u.data[1].slice(0, 20)")
    assert smoothed[0] == pytest.approx(raw[0])  # the debiased EMA starts at the first value
    assert smoothed[1:] != raw[1:]
    assert probe.console_errors() == []


def test_run_filter_and_toggle_hide_runs(probe: Any, tmp_path: Path, snapshot: dict) -> None:
    page = probe.open(_page_file(tmp_path, snapshot))
    run_ids = [s["run_id"] for s in snapshot["charts"][0]["series"]]
    page.fill("#run-filter", "run-1")
    shown = _chart(page, 0, "u.series.slice(1).map(s => s.show)")
    assert shown == [rid == "run-1" for rid in run_ids]
    assert page.locator("#run-table tbody tr.hidden").count() == len(run_ids) - 1
    assert page.locator("figure.chart").first.locator("tbody tr:not(.hidden)").all_inner_texts()[0].find("run-1") >= 0
    density = page.locator("figure.chart").first.locator("[data-density]").inner_text()
    one = next(s for s in snapshot["charts"][0]["series"] if s["run_id"] == "run-1")
    assert density.startswith(f"{one['rendered_points']} of {one['source_points']} points shown")
    page.fill("#run-filter", "")
    assert all(_chart(page, 0, "u.series.slice(1).map(s => s.show)"))
    # The metric filter hides charts by name.
    page.fill("#metric-filter", "acc")
    assert page.locator("figure.chart:visible").count() == 1
    assert page.locator("figure.chart:visible .metric-name").inner_text() == "accuracy"
    page.fill("#metric-filter", "")
    assert page.locator("figure.chart:visible").count() == 2
    page.uncheck('#run-table input.run-toggle[data-run="run-0"]')
    shown = _chart(page, 1, "u.series.slice(1).map(s => s.show)")
    assert shown == [rid != "run-0" for rid in [s["run_id"] for s in snapshot["charts"][1]["series"]]]
    # Clicking a legend row toggles the run back on, and its checkbox follows.
    page.locator("figure.chart").first.locator('tbody tr[data-run="run-0"]').click()
    assert all(_chart(page, 1, "u.series.slice(1).map(s => s.show)"))
    assert page.is_checked('#run-table input.run-toggle[data-run="run-0"]')
    assert probe.console_errors() == []


def test_script_named_run_renders_as_text(probe: Any, tmp_path: Path, snapshot: dict) -> None:
    evil = hostile(hostile(snapshot, "run-2"), "loss", "<img src=x onerror=alert(3)>")
    page = probe.open(_page_file(tmp_path, evil, "hostile.html"))
    assert "<img src=x onerror=alert(3)>" in page.locator("figure.chart .metric-name").all_inner_texts()
    assert page.locator("img").count() == 0
    assert probe.dialogs == []
    assert page.evaluate("document.querySelectorAll('script').length") == 3
    names = page.locator("#run-table .run-name").all_inner_texts()
    assert HOSTILE_RUN in names
    legend = page.locator("figure.chart").first.locator(".run-name").all_inner_texts()
    assert HOSTILE_RUN in legend
    # The config and command hold "</script>" from the real store and render as text as well.
    assert "</script><b>x</b>" in page.locator("#run-table code.command").first.inner_text()
    assert page.locator("#run-table b").count() == 0
    page.fill("#run-filter", "<script>")
    assert _chart(page, 0, "u.series.slice(1).filter(s => s.show).length") == 1
    assert probe.dialogs == []
    assert probe.console_errors() == []


def test_page_without_metrics_has_no_errors(probe: Any, tmp_path: Path, snapshot: dict) -> None:
    empty = {**snapshot, "charts": [], "chart": {"has_data": False}, "metric_options": []}
    page = probe.open(_page_file(tmp_path, empty, "empty.html"))
    assert page.locator("figure.chart").count() == 0
    assert "No scalar metrics were recorded" in page.inner_text("#charts")
    assert probe.console_errors() == []


def test_served_page_zoom_fetches_detail(probe: Any, served: str) -> None:
    page = probe.open(served + "/stellar?target=sweep&max_points=60")
    assert page.locator("figure.chart").count() == 2
    over = page.locator("figure.chart").first.locator(".u-over")
    box = over.bounding_box()
    y = box["y"] + box["height"] / 2
    with page.expect_response(lambda r: "/api/stellar/series" in r.url) as resp:
        page.mouse.move(box["x"] + box["width"] * 0.1, y)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.3, y, steps=8)
        page.mouse.up()
    assert resp.value.status == 200
    assert resp.value.headers["x-content-type-options"] == "nosniff"
    page.wait_for_function("() => document.querySelector('figure.chart [data-density]').textContent.includes('zoomed')")
    page.click("#reset-zoom")
    page.wait_for_function("() => !document.querySelector('figure.chart [data-density]').textContent.includes('zoomed')")
    assert probe.console_errors() == []
