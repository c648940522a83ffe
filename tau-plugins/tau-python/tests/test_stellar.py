"""tau.stellar: the local packet, in-job history chunks, artifacts with lineage, in-process recording."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tau import stellar


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_local_packet_and_in_process_recording(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("subprocess.run", None)  # finish records in-process: no taugrid-portal subprocess
    run = stellar.init(project="Demo Project", run="r1", config={"lr": 0.1})
    for step in range(5):
        stellar.log({"loss": 1.0 / (step + 1), "acc": step / 10, "note": "x", "bad": float("nan")}, step=step)
    stellar.log({"loss": 0.1})  # step defaults to one past the last
    stellar.log({"sample": stellar.Image(b"\x89PNG...", caption="c"), "page": stellar.Html("<b>hi</b>"),
                 "tbl": stellar.Table(["a"], [[1], [2]])}, step=7)
    result = stellar.finish()
    packet = Path(result["packet"])
    assert json.loads((packet / "config.json").read_text()) == {"lr": 0.1}
    rows = _rows(packet / "history.jsonl")
    assert [r["_step"] for r in rows] == [0, 1, 2, 3, 4, 5, 7]
    assert rows[0]["loss"] == 1.0 and "note" not in rows[0] and "bad" not in rows[0]
    names = sorted(p.name for p in (packet / "artifacts").iterdir())
    assert names == ["page-step000007.html", "sample-step000007.png", "tbl-step000007.json"]
    lineage = _rows(packet / "artifacts.jsonl")
    assert {e["direction"] for e in lineage} == {"output"} and lineage[0]["artifact_id"].startswith("r1/")
    assert result["recorded"] == 5 * 2 + 1 + 1  # loss+acc for 5 steps, loss at step 5, the status marker
    assert run.finished and result["run"] == "r1"


def test_any_real_number_is_logged_and_other_values_are_not(repo: Path) -> None:
    import numpy as np

    stellar.init(project="Demo", run="r-real")
    stellar.log({"f32": np.float32(0.5), "i64": np.int64(3), "frac": Fraction(1, 4), "flag": np.bool_(True),
                 "yes": True, "inf32": np.float32("inf"), "text": "x"}, step=0)
    result = stellar.finish()
    [row] = _rows(Path(result["packet"]) / "history.jsonl")
    assert {k: v for k, v in row.items() if not k.startswith("_")} == {"f32": 0.5, "i64": 3.0, "frac": 0.25}


def test_metrics_are_readable_in_stellar(repo: Path) -> None:
    import os

    stellar.init(project="p", run="seen-run")
    for step in range(3):
        stellar.log({"loss": 3.0 - step}, step=step)
    stellar.finish()
    store = Path(os.environ["TAU_DATA_DIR"]) / "expstore"
    portal = Path(sys.executable).parent / "taugrid-portal"
    proc = subprocess.run([str(portal), "experiment", "stellar", "seen-run", "--store", str(store), "-o", "json"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(proc.stdout)
    assert "loss" in [c["metric_name"] for c in snap["charts"]]
    assert snap["runs"][0]["state"] == "succeeded"


def test_inside_a_cluster_job_history_chunks_are_written(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    out = tmp_path / "output"
    monkeypatch.setenv("TAU_CLUSTER_JOB", "1")
    monkeypatch.setenv("TAU_OUTPUT_DIR", str(out))
    monkeypatch.setattr(stellar, "FLUSH_ROWS", 4)
    run = stellar.init(project="p", run="job-run")
    for step in range(10):
        run.log({"loss": float(step)}, step=step)
    run.flush()
    result = run.finish()
    assert result["recorded"] == 0  # the offload sidecar ships the chunks; nothing is recorded in the pod
    chunks = sorted((out / "stellar").glob(stellar.HISTORY_GLOB.split("/", 1)[1]))
    assert chunks and not list((out / "stellar").glob(".*"))  # closed files only
    steps = [r["_step"] for c in chunks for r in _rows(c)]
    assert steps == list(range(10))
    assert all(isinstance(r["_timestamp"], float) for c in chunks for r in _rows(c))


def test_use_artifact_records_lineage(repo: Path) -> None:
    run = stellar.init(project="p", run="consumer")
    entry = stellar.use_artifact("producer/model-step000003.pt")
    assert entry == {"artifact_id": "producer/model-step000003.pt", "direction": "input",
                     "source_artifact_id": "producer/model-step000003.pt", "source_run_id": "producer"}
    run.finish(sync=False)
    assert _rows(run.packet / "artifacts.jsonl") == [entry]


def test_log_before_init_is_an_error(repo: Path) -> None:
    stellar._current = None
    with pytest.raises(RuntimeError, match=r"tau\.stellar\.init\(\) must be called before log\(\)"):
        stellar.log({"x": 1})


def test_every_buffered_row_lands_after_finish(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer drains the queue while the loop keeps logging: no row is lost or reordered."""
    monkeypatch.setattr(stellar, "FLUSH_ROWS", 500)  # wake the writer often, racing the hot path
    run = stellar.init(project="p", run="many", dir=repo / "packet")
    metrics = {"loss": 0.0}
    for step in range(20000):
        metrics["loss"] = step / 7  # the caller reuses its dict: log keeps a copy
        stellar.log(metrics)
    run.finish(sync=False)
    rows = _rows(run.packet / "history.jsonl")
    assert [r["_step"] for r in rows] == list(range(20000))
    assert rows[-1]["loss"] == 19999 / 7


CRASH = """
import os, signal, sys
from tau import stellar
run = stellar.init(project="p", run="crash", dir=sys.argv[1])
for step in range(3000):
    stellar.log({"loss": float(step)})
if sys.argv[2] == "raise":
    raise RuntimeError("the training loop crashed")
os.kill(os.getpid(), signal.SIGTERM)
"""


@pytest.mark.parametrize("how", ["raise", "sigterm"])
@pytest.mark.parametrize("in_job", [False, True])
def test_buffered_rows_land_when_the_process_dies_without_finish(repo: Path, tmp_path: Path, how: str,
                                                                 in_job: bool) -> None:
    import os
    import signal

    env = {**os.environ}
    env.pop("TAU_CLUSTER_JOB", None)
    if in_job:
        env.update({"TAU_CLUSTER_JOB": "1", "TAU_OUTPUT_DIR": str(tmp_path / "output")})
    packet = tmp_path / "packet"
    done = subprocess.run([sys.executable, "-c", CRASH, str(packet), how], env=env, capture_output=True, text=True,
                          timeout=120)
    if how == "raise":
        assert done.returncode == 1 and "the training loop crashed" in done.stderr
    else:
        assert done.returncode == -signal.SIGTERM, done.stderr  # still dies of SIGTERM, after flushing
    assert [r["_step"] for r in _rows(packet / "history.jsonl")] == list(range(3000))
    if in_job:  # the closed chunks the offload sidecar ships hold every row too
        chunks = sorted((tmp_path / "output" / "stellar").glob(stellar.HISTORY_GLOB.split("/", 1)[1]))
        assert [r["_step"] for c in chunks for r in _rows(c)] == list(range(3000))


JOB_WITHOUT_PORTAL = """\
import importlib.abc, sys

class NotInTheImage(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("polars", "pyarrow", "taugrid_portal"):
            raise ImportError(f"{name} is not installed in this training image")
        return None

sys.meta_path.insert(0, NotInTheImage())
from tau import stellar

run = stellar.init(project="p", run="slim")
for step in range(5):
    stellar.log({"loss": 1.0 / (step + 1)}, step=step)
print(run.finish()["recorded"])
"""


def test_a_training_image_needs_neither_polars_nor_the_portal(repo: Path, tmp_path: Path) -> None:
    """Inside a cluster job the SDK writes history chunks with the standard library only."""
    out = tmp_path / "output"
    env = {**os.environ, "TAU_CLUSTER_JOB": "1", "TAU_OUTPUT_DIR": str(out)}
    proc = subprocess.run([sys.executable, "-c", JOB_WITHOUT_PORTAL], capture_output=True, text=True, env=env,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0"
    chunks = sorted((out / "stellar").glob(stellar.HISTORY_GLOB.split("/", 1)[1]))
    assert [r["_step"] for c in chunks for r in _rows(c)] == list(range(5))
