"""Stellar snapshot, page and terminal output built from a real experiment store."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from tau_core.errors import NotFoundError, UsageError


def _history(path: Path, steps: int, seed: int) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for s in range(steps):
            fh.write(json.dumps({"_step": s, "_timestamp": 1760000000.0 + s,
                                 "loss": 1.0 / (1 + s * (seed + 1) / 50) + 0.1, "eval/accuracy": s / steps * 0.9})
                     + "\n")
    return path


def build_store(root: Path, *, runs: int = 3, steps: int = 300) -> Path:
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import import_jsonl, init_experiment, load_config, parse_artifact, record_run

    store, _ = ExperimentStore.init(root, project="demo")
    work = root.parent / "inputs"
    work.mkdir(exist_ok=True)
    (work / "tau.yaml").write_text("lr: 0.01\nnote: \"</script><script>alert(1)</script>\"\n", encoding="utf-8")
    (work / "model.pt").write_bytes(b"w")
    with store:
        init_experiment(store, "sweep", project="demo", group="arm-a")
        for i in range(runs):
            run, group = f"run-{i}", ("arm-a" if i % 2 == 0 else "arm-b")
            record_run(store, run, experiment="sweep", group=group, owner="alice",
                       command=f"tau run train --set lr=0.0{i + 1}",
                       result_uri=("javascript:alert(1)" if i == 2 else f"/data/runs/{run}"),
                       configs=[load_config(work / "tau.yaml")],
                       artifacts=[parse_artifact(str(work / "model.pt"), run)])
            import_jsonl(store, run=run, history=[str(_history(work / f"{run}.jsonl", steps, i))],
                         experiment="sweep", group=group, owner="alice")
    return root


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("stellar") / "store")


@pytest.fixture
def store(store_path: Path) -> Any:
    from taugrid_portal.store import ExperimentStore

    with ExperimentStore.open(store_path) as s:
        yield s


def test_snapshot_for_an_experiment(store: Any) -> None:
    from taugrid_portal.stellar.snapshot import SCHEMA_VERSION, build_snapshot, to_json

    snap = build_snapshot(store, "sweep", max_points=50)
    assert snap["schema_version"] == SCHEMA_VERSION
    assert snap["target_type"] == "experiment"
    assert {r["run_id"] for r in snap["runs"]} == {"run-0", "run-1", "run-2"}
    # The primary outcome metric comes first (eval/accuracy is on the reference priority list).
    assert [c["metric_name"] for c in snap["charts"]] == ["eval/accuracy", "loss"]
    assert snap["summary"]["primary_metric"] == "eval/accuracy"
    assert snap["summary"]["direction"] == "max"
    chart = snap["charts"][1]
    assert chart["direction"] == "min"
    assert chart["source_points"] == 3 * 300 and chart["finite_points"] == 900
    for s in chart["series"]:
        assert s["rendered_points"] == len(s["steps"]) == len(s["values"]) <= 50
        assert s["steps"][0] == 0 and s["steps"][-1] == 299
        assert s["decimated"] is True
    assert chart["rendered_points"] == sum(s["rendered_points"] for s in chart["series"])
    run = next(r for r in snap["runs"] if r["run_id"] == "run-0")
    assert run["tau_command"] == "tau run train --set lr=0.01"
    assert run["output_dir"] == "/data/runs/run-0"
    assert run["configs"][0]["config"]["lr"] == 0.01
    assert run["artifacts"][0]["name"] == "model.pt" and run["artifacts"][0]["digest"].startswith("sha256:")
    assert {m["metric_name"] for m in run["summaries"]} == {"eval/accuracy", "loss"}
    loss = next(m for m in run["summaries"] if m["metric_name"] == "loss")
    assert loss["count"] == 300 and loss["latest_step"] == 299
    assert snap["status"]["runs"] == 3 and snap["status"]["groups"] == 2
    assert {g["run_group_id"] for g in snap["cards"][0]["groups"]} == {"arm-a", "arm-b"}
    # Strict JSON round trip (no NaN), stable for the same store.
    assert json.loads(to_json(snap)) == snap
    again = build_snapshot(store, "sweep", max_points=50, now=None)
    assert again["charts"] == snap["charts"]


def test_snapshot_targets_and_errors(store: Any) -> None:
    from taugrid_portal.stellar.snapshot import build_series, build_snapshot

    assert build_snapshot(store, "arm-b")["target_type"] == "run_group"
    one = build_snapshot(store, "run-1")
    assert one["target_type"] == "run" and [r["run_id"] for r in one["runs"]] == ["run-1"]
    with pytest.raises(NotFoundError) as err:
        build_snapshot(store, "sweeep")
    assert "sweep" in (err.value.hint or "")
    with pytest.raises(UsageError, match="metric 'nope' was not recorded"):
        build_snapshot(store, "sweep", metric="nope")
    with pytest.raises(UsageError, match="--max-points"):
        build_snapshot(store, "sweep", max_points=0)
    detail = build_series(store, "sweep", "loss", run_id="run-0", start_step=100, end_step=199, max_points=1000)
    (series,) = detail["chart"]["series"]
    assert series["steps"] == list(range(100, 200)) and not series["decimated"]
    with pytest.raises(UsageError, match="start_step"):
        build_series(store, "sweep", "loss", start_step=5, end_step=1)
    with pytest.raises(NotFoundError):
        build_series(store, "sweep", "loss", run_id="run-9")


def test_default_budget_shrinks_with_many_series() -> None:
    from taugrid_portal.stellar.snapshot import PAGE_POINT_BUDGET, series_budget

    assert series_budget(None, 4) == 1200
    assert series_budget(None, 1000) == PAGE_POINT_BUDGET // 1000
    assert series_budget(None, 10**6) == 64
    assert series_budget(300, 10**6) == 300


def _hashes(html: str) -> set[str]:
    scripts = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    return {"'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'" for s in scripts}


def test_html_is_self_contained_escaped_and_embeds_the_snapshot(store: Any) -> None:
    from taugrid_portal.stellar.html import render_html
    from taugrid_portal.stellar.snapshot import build_snapshot

    snap = build_snapshot(store, "sweep")
    snap["runs"][0]["run_id"] = "<script>alert('run')</script>"
    html = render_html(snap)
    assert "uPlot" in html and "stellar-first-chart" in html
    # No external resource of any kind.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<link" not in html
    # Autoescaped text, and the embedded JSON cannot end its script element.
    assert "<script>alert('run')</script>" not in html
    assert "&lt;script&gt;alert(&#39;run&#39;)&lt;/script&gt;" in html
    assert html.count("<script") == 3 and html.count("</script>") == 3
    embedded = re.search(r'<script type="application/json" id="stellar-snapshot">(.*?)</script>', html, re.S)
    assert embedded is not None and json.loads(embedded.group(1)) == json.loads(json.dumps(snap))
    # The CSP allows exactly the page's own inline scripts.
    csp = unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1))
    for h in _hashes(html):
        assert h in csp
    assert "connect-src 'none'" in csp
    # Output links: absolute paths become file:// links; javascript: stays text.
    assert 'href="file:///data/runs/run-0"' in html
    assert 'href="javascript:' not in html and "javascript:alert(1)" in html
    assert "900 of 900 points shown" in html


def test_tui_is_readable(store: Any) -> None:
    from taugrid_portal.stellar.snapshot import build_snapshot
    from taugrid_portal.stellar.tui import render_tui, sparkline

    snap = build_snapshot(store, "sweep")
    snap["runs"][0]["run_id"] = "evil\x1b[2Jrun"
    text = render_tui(snap)
    for section in ("Stellar dashboard: sweep (experiment)", "SUMMARY", "STATUS", "METRICS", "CHART eval/accuracy",
                    "RUNS", "ACTIONS"):
        assert section in text
    assert "\x1b" not in text and "evil?[2Jrun" in text
    assert "points shown" in text and "tau run train --set lr=0.01" in text
    assert sparkline([0, 1, 2, 3], width=4) == "_-*@"
    assert sparkline([]) == "" and sparkline([5.0, 5.0]) == "__"
    assert all(math.isfinite(float(x)) for x in [snap["charts"][0]["y_min"], snap["charts"][0]["y_max"]])


def test_missing_chart_bundle_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from taugrid_portal.stellar import html

    monkeypatch.setattr(html, "VENDOR", tmp_path / "vendor")
    html.vendor_assets.cache_clear()
    try:
        with pytest.raises(html.MissingAssetsError) as err:
            html.vendor_assets()
        assert "uPlot.iife.min.js" in err.value.message and "reinstall" in (err.value.hint or "")
    finally:
        html.vendor_assets.cache_clear()


def test_chart_bundle_is_built_from_the_pinned_npm_package_and_not_committed() -> None:
    import subprocess

    from taugrid_portal.stellar import html

    portal = Path(html.__file__).resolve().parents[3]
    pinned = json.loads((portal / "frontend" / "package.json").read_text())["dependencies"]["uplot"]
    html.vendor_assets.cache_clear()
    assets = html.vendor_assets()
    assert assets["version"] == pinned
    assert "uPlot" in assets["js"] and ".uplot" in assets["css"]
    tracked = subprocess.run(["git", "ls-files", "--", str(html.VENDOR)], cwd=portal, capture_output=True, text=True)
    if tracked.returncode == 0:  # inside a git checkout: the bundle must never be committed
        assert tracked.stdout.strip() == ""
        ignored = subprocess.run(["git", "check-ignore", "-q", str(html.VENDOR / "uPlot.iife.min.js")], cwd=portal)
        assert ignored.returncode == 0


def test_stellar_html_without_the_bundle_fails_clearly(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tau_core.cli import run
    from taugrid_portal.cli import cli
    from taugrid_portal.stellar import html

    monkeypatch.setattr(html, "VENDOR", tmp_path / "vendor")
    html.vendor_assets.cache_clear()
    out = tmp_path / "page.html"
    try:
        code = run(cli, ["experiment", "stellar", "sweep", "--store", str(store_path), "--out", str(out)],
                   prog_name="taugrid-portal")
        err = capsys.readouterr().err
        assert code == 1
        assert err.startswith("error: the Stellar chart library is missing") and "hint: reinstall" in err
        assert not out.exists()  # never a broken page
        # JSON and TUI output do not need the bundle.
        assert run(cli, ["experiment", "stellar", "sweep", "--store", str(store_path), "-o", "json"],
                   prog_name="taugrid-portal") == 0
    finally:
        html.vendor_assets.cache_clear()


def test_a_series_spread_over_several_metric_files_is_one_series(tmp_path: Path) -> None:
    from taugrid_portal.stellar.snapshot import build_series, build_snapshot
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import import_jsonl, record_run

    store, _ = ExperimentStore.init(tmp_path / "store", project="demo")
    with store:
        import_jsonl(store, run="run-a", history=[str(_history(tmp_path / "a.jsonl", 300, 0))], group="g",
                     owner="bob")
        # A later write of the same run and metric lands in a second immutable file.
        record_run(store, "run-a", group="g", owner="bob", metrics={"loss": 7.5}, step=5000)
        record_run(store, "run-a", group="g", owner="bob", metrics={"loss": -1.0}, step=299,
                   idempotency_key="fix-299")
        snap = build_snapshot(store, "g", max_points=10)
        loss = next(c for c in snap["charts"] if c["metric_name"] == "loss")
        (series,) = loss["series"]
        assert series["steps"][-1] == 5000 and series["values"][-1] == 7.5
        assert -1.0 in series["values"]  # the later write of step 299 wins and is the minimum
        assert series["finite_points"] == 301 and series["source_points"] == 302
        assert len(series["steps"]) <= 10
        detail = build_series(store, "g", "loss", start_step=290, end_step=6000, max_points=100)
        (s,) = detail["chart"]["series"]
        assert s["steps"] == [*range(290, 300), 5000]
        assert s["values"][s["steps"].index(299)] == -1.0


def test_output_dir_links(store: Any) -> None:
    from taugrid_portal.stellar.snapshot import _output_dir

    assert _output_dir(store, "/data/runs/x") == "/data/runs/x"
    assert _output_dir(store, "azblob://acct/c/runs/x") == "azblob://acct/c/runs/x"
    assert _output_dir(store, "metrics/project=demo") == str(Path(store.root).resolve() / "metrics/project=demo")
    assert _output_dir(store, "../../etc") is None  # never a link outside the store
    assert _output_dir(store, None) is None
