"""The ``taugrid-portal`` command line: output shapes, errors, aliases and lazy imports."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import textwrap

import pytest

HEAVY = ("polars", "pyarrow", "starlette", "uvicorn", "jinja2", "kubernetes_asyncio")


@pytest.fixture
def loaded(portal, tmp_path, write_history):
    store = tmp_path / "store"
    r = portal("experiment", "init", "vision", "--store", store)
    assert r.exit_code == 0, r
    for i, group in enumerate(["lr-high", "lr-high", "lr-low"]):
        hist = write_history(tmp_path / f"run{i}" / "chunk-000000.jsonl", steps=20 + 10 * i,
                             metrics=("loss", "eval/accuracy"))
        r = portal("experiment", "import", "jsonl", "--run", f"run-{i}", "--history", hist.parent / "*.jsonl",
                   "--experiment", "vision", "--group", group, "--store", store, "--tag", f"seed={i}")
        assert r.exit_code == 0, r
    return store


def test_init_table_and_json(portal, tmp_path):
    store = tmp_path / "s"
    r = portal("experiment", "init", "demo", "--store", store)
    assert r.exit_code == 0, r
    assert r.stdout.splitlines() == [
        f"initialized experiment store {store}", "experiment: demo", "group: default",
        f"status: taugrid-portal experiment status demo --store {store} -o json",
    ]
    again = portal("experiment", "init", "demo", "--store", store, "-o", "json").json()
    assert again["created_store"] is False and again["reused"] is True


def test_import_output_reuse_and_dry_run(portal, tmp_path, write_history):
    store = tmp_path / "s"
    portal("exp", "init", "demo", "--store", store)
    hist = write_history(tmp_path / "h.jsonl", steps=5)
    planned = portal("experiment", "import", "jsonl", "--run", "r1", "--history", hist, "--store", store,
                     "--dry-run", "-o", "json").json()
    assert planned["action"] == "planned" and planned["rows"] == 10
    r = portal("experiment", "import", "jsonl", "--run", "r1", "--history", hist, "--store", store)
    assert r.exit_code == 0, r
    header, row = r.stdout.splitlines()
    assert header.split() == ["ACTION", "RUN", "ROWS", "HISTORY_FILES", "METRIC_FILE", "IDEMPOTENCY_KEY"]
    assert row.split()[:4] == ["imported", "r1", "10", "1"]
    again = portal("experiment", "import", "jsonl", "--run", "r1", "--history", hist, "--store", store, "--json")
    assert again.json()["action"] == "reused"


def test_list_kinds(portal, loaded):
    runs = portal("experiment", "list", "--store", loaded, "-o", "json").json()
    assert sorted(r["run_id"] for r in runs) == ["run-0", "run-1", "run-2"]
    table = portal("experiment", "list", "--store", loaded).stdout.splitlines()[0].split()
    assert table == ["RUN_ID", "PROJECT", "RUN_GROUP_ID", "STATE", "OWNER", "CREATED_AT", "COMPLETED_AT",
                     "RESULT_URI"]
    groups = portal("experiment", "list", "--kind", "groups", "--store", loaded, "--json").json()
    assert [g["run_group_id"] for g in groups] == ["default", "lr-high", "lr-low"]
    exps = portal("experiment", "list", "--kind", "experiments", "--store", loaded, "-o", "json").json()
    assert exps[0]["experiment_id"] == "vision" and exps[0]["runs"] == 3


def test_search_formats_and_alias(portal, loaded):
    doc = portal("experiment", "search", "--metric-filter", "loss@min<0.04", "--store", loaded, "-o", "json").json()
    assert doc["schema_version"] == "tau.exp.run_search.v0"
    assert sorted(r["run_id"] for r in doc["runs"]) == ["run-1", "run-2"]  # min loss 1/30, 1/40
    lines = portal("experiment", "runs", "--tag", "seed=2", "--store", loaded, "-o", "jsonl").stdout.splitlines()
    assert [json.loads(x)["run_id"] for x in lines] == ["run-2"]
    out = portal("experiment", "search", "-q", "run-0", "--store", loaded, "-o", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["run_id"] for r in rows] == ["run-0"] and rows[0]["lifecycle_state"] == "succeeded"
    assert rows[0]["metric_names"] == "eval/accuracy,loss"
    r = portal("experiment", "search", "--metric-filter", "loss", "--store", loaded)
    assert r.exit_code == 2 and r.stderr.startswith("error: metric filter 'loss' must contain one of")


def test_status_compare_plot(portal, loaded, tmp_path):
    r = portal("experiment", "status", "vision", "--store", loaded)
    assert r.exit_code == 0, r
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["TARGET", "TYPE", "RUNS", "GROUPS", "CONFIGS", "METRIC_FILES", "ARTIFACTS",
                                "OBSERVATIONS", "LATEST_EVENT"]
    assert lines[1].split()[:8] == ["vision", "experiment", "3", "2", "0", "3", "3", "0"]
    assert lines[2] == "states:  succeeded=3"
    st = portal("experiment", "status", "lr-high", "--store", loaded, "-o", "json").json()
    assert (st["target_type"], st["runs"]) == ("run_group", 2)

    cmp = portal("experiment", "compare", "vision", "--store", loaded, "-o", "json").json()
    assert cmp["metric_name"] == "eval/accuracy"  # the primary outcome metric
    # every run ends at accuracy 1.0: ties go to the lower group and run id
    assert cmp["best_group_id"] == "lr-high" and cmp["best_run_id"] == "run-0"
    assert [g["run_count"] for g in cmp["groups"]] == [2, 1]
    table = portal("experiment", "compare", "vision", "--metric", "loss", "--direction", "min", "--store", loaded)
    head, high, low = table.stdout.splitlines()
    assert head.split()[:3] == ["METRIC_NAME", "DIRECTION", "RUN_GROUP_ID"]
    assert high.split()[-2:] == ["run-1", "false"] and low.split()[-2:] == ["run-2", "true"]
    missing = portal("experiment", "compare", "vision", "--metric", "nope", "--store", loaded)
    assert missing.exit_code == 1 and "metric 'nope' was not found for target 'vision'" in missing.stderr

    out1, out2 = tmp_path / "a.svg", tmp_path / "b.svg"
    p = portal("experiment", "plot", "vision", "--metric", "loss", "--out", out1, "--store", loaded, "-o", "json")
    assert p.exit_code == 0, p
    doc = p.json()
    assert doc["schema_version"] == "tau.exp.plot.v0" and len(doc["series"]) == 3
    portal("experiment", "plot", "vision", "--metric", "loss", "--out", out2, "--store", loaded)
    svg = out1.read_text()
    assert out1.read_bytes() == out2.read_bytes()  # deterministic
    assert svg.startswith("<svg") and 'height="340"' in svg and svg.count("<polyline") == 3
    assert "Tau experiment plot: loss" in svg and "run-2 group=lr-low" in svg
    need_out = portal("experiment", "plot", "vision", "--store", loaded)
    assert need_out.exit_code == 2 and "--out is required" in need_out.stderr


def test_track(portal, tmp_path):
    store = tmp_path / "s"
    portal("experiment", "init", "demo", "--store", store)
    cfg = tmp_path / "tau.yaml"
    cfg.write_text("name: train\noptimizer:\n  lr: {value: 0.001}\nlayers: [1, 2, 3]\n")
    plot_file = tmp_path / "loss.png"
    plot_file.write_bytes(b"\x89PNG fake")
    args = ["experiment", "track", "t1", "--store", store, "--config", cfg, "--artifact", str(plot_file),
            "--metric", "eval/accuracy=0.91", "--step", "100", "--tag", "lr=1e-3", "--command", "tau run train"]
    r = portal(*args, "-o", "json")
    assert r.exit_code == 0, r
    doc = r.json()
    assert doc["created_run"] and doc["metric_rows"] == 1 and len(doc["configs"]) == 1
    assert portal(*args, "-o", "json").json()["reused"] is True
    from taugrid_portal.store import ExperimentStore

    s = ExperimentStore.open(store)
    [cfg_row] = s.configs("t1")
    assert json.loads(cfg_row["indexed_fields"]) == {"name": "train", "optimizer.lr": 0.001, "layers": [1, 2, 3]}
    [art] = s.artifacts("t1")
    assert art["type"] == "plot" and art["digest"].startswith("sha256:")
    assert s.run("t1").tau_command == "tau run train"
    bad = portal("experiment", "track", "t2", "--store", store, "--metric", "acc")
    assert bad.exit_code == 2 and "--metric: expected name=value" in bad.stderr


def test_errors_are_one_line_with_hints(portal, tmp_path):
    r = portal("experiment", "list")
    assert r.exit_code == 2
    assert r.stderr.splitlines()[0].startswith("error: --store is required (or set TAU_EXP_STORE")
    r = portal("experiment", "status", "x", "--store", tmp_path / "nowhere")
    assert r.exit_code == 1 and "does not exist" in r.stderr and "hint: create it with" in r.stderr
    store = tmp_path / "s"
    portal("experiment", "init", "demo", "--store", store)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_step": 0, "loss": 1}\n{"_step": 1, "loss": NaN}\n')
    r = portal("experiment", "import", "jsonl", "--run", "r", "--history", bad, "--store", store)
    assert r.exit_code == 1
    assert r.stderr.splitlines()[0] == (f"error: {bad}: line 2: metric 'loss' must be a finite number, got NaN")
    assert "Traceback" not in r.stderr
    env = {"TAU_EXP_STORE_ROOT": str(tmp_path / "root"), "TAU_CONTEXT": "c", "TAU_TEAM": "t"}
    r = portal("experiment", "list", env=env)
    assert "TAU_EXP_STORE_ROOT requires TAU_CONTEXT, TAU_TEAM, TAU_PROJECT (missing TAU_PROJECT)" in r.stderr
    r = portal("experiment", "init", "demo", env={**env, "TAU_PROJECT": "p"})
    assert r.exit_code == 0 and (tmp_path / "root" / "c" / "t" / "p" / "manifest.json").exists()


def test_version_and_hidden_alias(portal):
    assert portal("version").stdout.strip() == "taugrid-portal version 0.5.0"
    assert portal("version", "-o", "json").json()["store_schema"] == "expstore.v7"
    root_help = portal("--help").stdout
    assert "experiment" in root_help and "exp " not in root_help
    assert portal("exp", "--help").exit_code == 0
    help_text = portal("experiment", "--help").stdout
    for verb in ("init", "track", "import", "list", "search", "status", "compare", "plot"):
        assert f"  {verb}" in help_text


def test_help_and_version_stay_import_light():
    script = textwrap.dedent(f"""
        import sys
        from tau_core.cli import run
        from taugrid_portal.cli import cli
        for args in (["--help"], ["experiment", "--help"], ["experiment", "search", "--help"],
                     ["experiment", "import", "jsonl", "--help"], ["version"]):
            run(cli, args, prog_name="taugrid-portal")
        print(sorted(m for m in {HEAVY!r} if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_stellar_verbs_are_lazy_and_optional(portal, monkeypatch):
    import importlib.util

    help_text = portal("experiment", "--help").stdout
    for verb in ("stellar", "serve"):
        assert f"  {verb}" in help_text
    assert "  dashboard" not in help_text  # an alias, resolved but not listed
    assert portal("experiment", "dashboard", "--help").exit_code == 0

    real = importlib.util.find_spec

    def without_stellar(name, *args, **kwargs):
        if name.startswith("taugrid_portal.stellar"):
            return None
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", without_stellar)
    bare = portal("experiment", "--help")
    assert bare.exit_code == 0 and "  stellar" not in bare.stdout and "  search" in bare.stdout
    missing = portal("experiment", "stellar", "x")
    assert missing.exit_code == 2 and "No such command 'stellar'" in missing.stderr


def test_import_defaults_come_from_tau_yaml(portal, tmp_path, write_history, monkeypatch):
    store = tmp_path / "s"
    portal("experiment", "init", "demo", "--store", store)
    hist = write_history(tmp_path / "h.jsonl", steps=3)
    r = portal("experiment", "import", "jsonl", "--history", hist, "--store", store)
    assert r.exit_code == 2 and "--run is required" in r.stderr
    (tmp_path / "tau.yaml").write_text(
        "name: portal-ray-stellar\nexperiment:\n  project: demo\n  name: ray-plus-stellar\n  group: arm-1\n")
    monkeypatch.chdir(tmp_path)
    doc = portal("experiment", "import", "jsonl", "--history", hist, "--store", store, "-o", "json").json()
    assert (doc["run_id"], doc["experiment_id"], doc["run_group_id"]) == ("portal-ray-stellar",
                                                                           "ray-plus-stellar", "arm-1")
