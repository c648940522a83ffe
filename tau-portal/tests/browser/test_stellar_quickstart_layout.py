"""Stellar after the quickstart, seen in Chromium at 1400x1000 (the size the issue was reported at).

The quickstart runs for real (``tau run train --local --follow`` in a private home); its Stellar page must
not draw the internal ``tau/run_status`` marker as a chart (the run's state is in the run table) and must
not scroll horizontally. The screenshot is kept in ``test-artifacts/``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
ARTIFACTS = REPO / "test-artifacts"

pytestmark = pytest.mark.browser


def test_quickstart_page_has_no_marker_chart_and_no_horizontal_scroll(probe: Any, tmp_path: Path) -> None:
    from taugrid_portal.stellar.html import render_html
    from taugrid_portal.stellar.snapshot import build_snapshot
    from taugrid_portal.store import ExperimentStore

    work = tmp_path / "quickstart"
    shutil.copytree(REPO / "examples" / "quickstart", work)
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAU_")}
    env.update({"HOME": str(tmp_path), "TAU_DATA_DIR": str(tmp_path / "tau-home"), "NO_COLOR": "1",
                "KUBECONFIG": str(tmp_path / "none")})
    tau = Path(sys.executable).parent / "tau"
    done = subprocess.run([str(tau), "run", "train", "--local", "--follow"], cwd=work, env=env, text=True,
                          capture_output=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    with ExperimentStore.open(tmp_path / "tau-home" / "expstore") as store:
        run_id = store.runs()[0].run_id
        snap = build_snapshot(store, run_id)
    assert [c["metric_name"] for c in snap["charts"]] == ["loss", "accuracy"] or \
        sorted(c["metric_name"] for c in snap["charts"]) == ["accuracy", "loss"]
    page_file = tmp_path / "stellar.html"
    page_file.write_text(render_html(snap), encoding="utf-8")
    page = probe.open(page_file.as_uri())
    titles = page.locator("figure.chart .metric-name").all_inner_texts()
    assert "tau/run_status" not in titles and len(titles) == 2
    state = page.locator("#run-table tbody tr[data-run] td").nth(3).inner_text()
    assert state == "succeeded"
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    assert probe.console_errors() == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "stellar-quickstart-1400x1000.png"), full_page=True)
