"""The Ray Tune driver of a local ``execution.launcher: ray-tune`` run: ``python -m tau_core.backends.local.ray_tune``.

It reads the same ``TAU_TUNE_*`` variables as the driver the cluster RayJob ships, and sweeps
``execution.configs`` over the researcher's ``train_loop_per_worker(config)``: each trial is a Tune
function that runs a Ray Train trainer (``TorchTrainer`` with gloo when torch is installed, else
``DataParallelTrainer``) with ``compute.workers`` CPU workers, reporting to Tune through
``TuneReportCallback`` (the Ray Train v2 way).  With a single CPU worker the loop runs inside the trial
itself, ``ray.train.report`` going straight to ``ray.tune.report``: the same metrics without a
controller and a worker actor per trial, which on a small machine is most of the sweep's time.
Each trial function holds one CPU besides its workers; the local head is sized for
``max_concurrent_trials`` such trials.

At the end it writes the best trial to ``$TAU_OUTPUT_DIR/tune/best_trial.json`` and, as metric chunks
the evidence bridge imports into the experiment store, one row per trial to
``$TAU_OUTPUT_DIR/tune/trials.jsonl`` and the best one to ``$TAU_OUTPUT_DIR/tune/best.jsonl``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any


def _load_module() -> Any:
    module = os.environ.get("TAU_TUNE_TRAIN_MODULE")
    if module:
        return importlib.import_module(module)
    path = os.environ["TAU_TUNE_TRAIN_PATH"]
    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location("tau_user_train", path)
    if spec is None or spec.loader is None:
        sys.exit(f"tau tune driver: cannot load {path}")
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def _train_function(user: Any) -> Any:
    for attr in ("train_loop_per_worker", "train_func", "train"):
        fn = getattr(user, attr, None)
        if callable(fn):
            return fn
    sys.exit("tau tune driver: the entrypoint defines no train_loop_per_worker(config) function")


def _trainer_class() -> Any:
    if importlib.util.find_spec("torch") is not None:
        from ray.train.torch import TorchTrainer

        return TorchTrainer
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer  # Ray Train v2 (the default)

    return DataParallelTrainer


def _write_chunk(path: Path, rows: list[dict[str, Any]]) -> None:
    """A closed JSONL chunk: written as a dotfile, then renamed (what the evidence bridge expects)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("." + path.name)
    tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    os.replace(tmp, path)


def _numeric(values: dict[str, Any], prefix: str) -> dict[str, float]:
    out = {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            continue
        out[prefix + key] = float(value)
    return out


def _record(results: Any, metric: str) -> None:
    output = os.environ.get("TAU_OUTPUT_DIR")
    if not output:
        return
    root = Path(output) / "tune"
    now = time.time()
    rows = []
    for i, result in enumerate(results):
        config = (result.config or {}).get("train_loop_config", {})
        rows.append({"_step": i, "_timestamp": now, **_numeric(result.metrics or {}, "trial/"),
                     **_numeric(config, "trial/config/")})
    _write_chunk(root / "trials.jsonl", rows)
    best = results.get_best_result()
    config = (best.config or {}).get("train_loop_config", {})
    summary = {"metric": metric, "mode": os.environ.get("TAU_TUNE_MODE", "min"), "value": best.metrics.get(metric),
               "config": config, "trials": len(results), "errors": len(results.errors)}
    (root / "best_trial.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    _write_chunk(root / "best.jsonl", [{"_step": 0, "_timestamp": now, **_numeric({metric: summary["value"]}, "best/"),
                                        **_numeric(config, "best/config/")}])


def main() -> None:
    # Ray's own annotations are partial: its objects are Any here
    ray: Any = importlib.import_module("ray")
    tune: Any = importlib.import_module("ray.tune")
    ray_train: Any = importlib.import_module("ray.train")
    report_callback: Any = importlib.import_module("ray.tune.integration.ray_train").TuneReportCallback

    ray.init(address="auto")
    train = _train_function(_load_module())
    trainer_class = _trainer_class()
    workers = int(os.environ.get("TAU_WORLD_SIZE") or os.environ.get("TAU_NUM_WORKERS") or 1)
    metric = os.environ["TAU_TUNE_METRIC"]
    storage = os.environ.get("TAU_OUTPUT_DIR") or None

    def trial(config: dict[str, Any]) -> None:
        if workers == 1 and os.environ.get("TAU_DIST_BACKEND") != "nccl":
            # one CPU worker: run the loop in the trial itself, its ray.train.report going to Tune
            ray_train.report = tune.report
            train(config.get("train_loop_config", {}))
            return
        trainer = trainer_class(
            train, train_loop_config=config.get("train_loop_config", {}),
            scaling_config=ray_train.ScalingConfig(num_workers=workers,
                                                   use_gpu=os.environ.get("TAU_DIST_BACKEND") == "nccl"),
            run_config=ray_train.RunConfig(name=f"trial-{tune.get_context().get_trial_id()}",
                                           callbacks=[report_callback()],
                                           storage_path=f"{storage}/tune/train" if storage else None),
        )
        trainer.fit()

    space = {k: tune.grid_search(v) if isinstance(v, list) else v
             for k, v in json.loads(os.environ["TAU_TUNE_PARAM_SPACE"]).items()}
    tuner = tune.Tuner(
        trial,
        param_space={"train_loop_config": space},
        tune_config=tune.TuneConfig(
            metric=metric, mode=os.environ.get("TAU_TUNE_MODE", "min"),
            num_samples=int(os.environ.get("TAU_TUNE_NUM_SAMPLES", "1")),
            max_concurrent_trials=int(os.environ.get("TAU_TUNE_MAX_CONCURRENT_TRIALS", "1")),
        ),
        run_config=tune.RunConfig(storage_path=f"{storage}/tune/runs" if storage else None),
    )
    results: Any = tuner.fit()
    print("Number of trials", len(results))
    best = results.get_best_result()
    print("Best config", best.config.get("train_loop_config"))
    print("Best " + metric, best.metrics.get(metric))
    _record(results, metric)
    if results.errors:
        sys.exit(f"tau tune driver: {len(results.errors)} trial(s) failed")


if __name__ == "__main__":
    main()
