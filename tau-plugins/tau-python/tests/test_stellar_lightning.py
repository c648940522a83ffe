"""``tau.stellar.StellarLogger``, the Lightning logger, without torch.

Lightning imports torch from every module (even ``lightning.pytorch.loggers.logger``), and torch from PyPI
is too heavy for CI, so these tests drive :class:`tau._lightning.LoggerCore` (the whole Lightning ``Logger``
API the class implements) against the real packet and the real experiment store, and check the class
composition against a base shaped like Lightning's abstract ``Logger``.
"""

from __future__ import annotations

import abc
import json
import os
import pickle
import subprocess
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest

from tau import TauSDKError, stellar
from tau import _lightning as lt


class Scalar:
    """A 0-d tensor's duck type: ``.item()`` gives the Python number."""

    def __init__(self, value: float) -> None:
        self.value = value

    def item(self) -> float:
        return self.value


class Vector:
    """A tensor of several elements: ``.item()`` refuses (as torch does)."""

    def item(self) -> float:
        raise ValueError("only one element tensors can be converted to Python scalars")


def _rows(packet: Path) -> list[dict[str, Any]]:
    path = packet / "history.jsonl"
    return [{k: v for k, v in json.loads(line).items() if k != "_timestamp"}
            for line in path.read_text().splitlines()] if path.exists() else []


def _stellar(run: str) -> dict[str, Any]:
    store = Path(os.environ["TAU_DATA_DIR"]) / "expstore"
    portal = Path(sys.executable).parent / "taugrid-portal"
    proc = subprocess.run([str(portal), "experiment", "stellar", run, "--store", str(store), "-o", "json"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_metrics_map_to_packet_rows_one_value_per_metric_and_step(repo: Path) -> None:
    logger = lt.LoggerCore(project="Lit Project", run="lt-metrics")
    assert (logger.name, logger.version) == ("lit-project", "lt-metrics")
    logger.log_metrics({"loss": 0.5, "acc": Scalar(0.25), "note": "x", "flag": True, "vec": Vector()}, step=3)
    logger.log_metrics({"epoch": 0, "val_loss": 0.4}, step=3)  # same step: a second row, new metrics only
    logger.log_metrics({"epoch": 0, "loss": 9.0}, step=3)  # already logged at step 3: dropped
    logger.log_metrics({"epoch": 1, "loss": 0.3}, step=10)
    logger.log_metrics({"lr": 0.01})  # no step: one past the last
    run = logger.experiment
    run.flush()
    assert _rows(run.packet) == [{"_step": 3, "loss": 0.5, "acc": 0.25}, {"_step": 3, "epoch": 0.0, "val_loss": 0.4},
                                 {"_step": 10, "epoch": 1.0, "loss": 0.3}, {"_step": 11, "lr": 0.01}]
    assert logger.log_dir == str(run.packet) and logger.save_dir is None


def test_hyperparameters_merge_into_the_packet_config(repo: Path) -> None:
    def schedule() -> None:
        return None

    logger = lt.LoggerCore(project="p", run="lt-hparams", config={"seed": 7})
    logger.log_hyperparams(Namespace(lr=Scalar(0.1), layers=(64, 32), opt={"name": "adam", "betas": [0.9, 0.99]},
                                     fn=schedule, path=Path("/data/x"), none=None))
    logger.log_hyperparams({"batch": 32, "seed": 8})
    config = json.loads((logger.experiment.packet / "config.json").read_text())
    assert config == {"seed": 8, "batch": 32, "lr": 0.1, "layers": [64, 32],
                      "opt": {"name": "adam", "betas": [0.9, 0.99]}, "fn": "schedule", "path": "/data/x", "none": None}


@pytest.mark.parametrize(("status", "state"), [("success", "succeeded"), ("failed", "failed")])
def test_finalize_finishes_the_run_in_stellar(repo: Path, status: str, state: str) -> None:
    logger = lt.LoggerCore(project="p", run=f"lt-{status}")
    for step in range(3):
        logger.log_metrics({"loss": 1.0 - step / 10}, step=step)
    logger.save()
    logger.finalize(status)
    assert logger.experiment.finished
    snap = _stellar(f"lt-{status}")
    assert "loss" in [c["metric_name"] for c in snap["charts"]]
    assert snap["runs"][0]["state"] == state
    logger.finalize(status)  # Lightning may call it again (teardown): nothing happens


def test_a_requeue_finalize_writes_the_buffer_and_leaves_the_run_open(repo: Path) -> None:
    logger = lt.LoggerCore(project="p", run="lt-requeue")
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.finalize("finished")  # Lightning's SIGUSR1/requeue path
    run = logger.experiment
    assert not run.finished and _rows(run.packet) == [{"_step": 0, "loss": 1.0}]
    logger.log_metrics({"loss": 0.5}, step=1)
    logger.finalize("success")
    assert run.finished and [r["_step"] for r in _rows(run.packet)] == [0, 1]


def test_only_rank_zero_writes(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    logger = lt.LoggerCore(project="p", run="lt-rank1", dir=repo / "packet")
    logger.log_hyperparams({"lr": 0.1})
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.experiment.log({"anything": 1})  # the do-nothing experiment of other ranks
    logger.finalize("success")
    assert not (repo / "packet").exists()


def test_the_logger_pickles_without_its_open_run(repo: Path) -> None:
    logger = lt.LoggerCore(project="p", run="lt-pickle")
    logger.log_metrics({"loss": 1.0}, step=0)
    copy = pickle.loads(pickle.dumps(logger))
    assert copy._run is None and copy.version == "lt-pickle" and logger._run is not None
    logger.finalize("success")


def test_without_lightning_building_a_logger_is_an_sdk_error(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("lightning", "pytorch_lightning"):
        monkeypatch.setitem(sys.modules, name, None)  # importing it raises ImportError, installed or not
    monkeypatch.setattr(lt, "_built", {})
    with pytest.raises(TauSDKError, match=r"StellarLogger needs Lightning .*which needs torch"):
        stellar.StellarLogger(project="p", run="lt")


class LoggerShape(abc.ABC):
    """The abstract surface of Lightning's ``Logger`` (``lightning.fabric.loggers.logger.Logger`` 2.x)."""

    @property
    @abc.abstractmethod
    def name(self) -> str | None: ...

    @property
    @abc.abstractmethod
    def version(self) -> int | str | None: ...

    @abc.abstractmethod
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None: ...

    @abc.abstractmethod
    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None: ...

    @property
    def group_separator(self) -> str:
        return "/"

    def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
        return None


def test_the_lightning_class_is_built_on_first_use(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lt, "_built", {})
    monkeypatch.setattr(lt, "_lightning_base", lambda: LoggerShape)
    logger = stellar.StellarLogger(project="p", run="lt-shape")
    assert isinstance(logger, LoggerShape) and isinstance(logger, stellar.StellarLogger)
    assert type(logger).__name__ == "LightningStellarLogger" and logger.group_separator == "/"
    assert type(pickle.loads(pickle.dumps(logger))) is type(logger)  # found again by name in a spawned worker
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.finalize("success")
    assert _rows(logger.experiment.packet) == [{"_step": 0, "loss": 1.0}]
