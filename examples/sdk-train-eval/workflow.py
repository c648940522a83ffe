"""A train and an eval written with the Tau Python SDK.

Locally (no cluster):       tau python submit workflow.py --local
Render for a cluster:       tau python submit workflow.py --dry-run client
The managed manifests in tau/ are what `tau python build` writes; `tau run train --dry-run=client`
renders the same RayJob.
"""

from __future__ import annotations

import json
from pathlib import Path

import tau

PIP = ["tau-python==0.5.0", "numpy>=1.26"]
MODEL_CACHE = [{"name": "model-cache", "mountPath": "/models", "pvc": "model-cache", "readOnly": True}]


@tau.train(name="sdk-train", gpus=1, workers=2, runtime_pip=PIP, data_pvc="blob-training", queue="jobqueue",
           gpu_class="any", mounts=MODEL_CACHE, checkpoint_artifact="best/model.json",
           primary_metric="loss", metric_direction="lower", env={"HF_HUB_OFFLINE": "1"})
def train(ctx: tau.Ctx, steps: int = 20, lr: float = 0.3) -> dict[str, float]:
    """Fit y = 3x with gradient descent and log the loss to Stellar."""
    run = tau.stellar.init(project="sdk-train-eval", run=ctx.name, config={"steps": steps, "lr": lr})
    w = 0.0
    loss = 0.0
    for step in range(steps):
        grad = 0.0
        loss = 0.0
        for x in (0.5, 1.0, 1.5, 2.0):
            err = w * x - 3.0 * x
            grad += 2 * err * x / 4
            loss += err * err / 4
        w -= lr * grad
        tau.stellar.log({"loss": loss, "w": w}, step=step)
    out = Path(ctx.durable_checkpoints_dir) / "artifacts" / "best"
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.json").write_text(json.dumps({"w": w}))
    run.finish()
    return {"loss": loss, "w": w}


@tau.eval(name="sdk-eval", after="sdk-train", gpus=1, cpu_workers=2, runtime_pip=PIP, data_pvc="blob-training",
          queue="jobqueue")
def evaluate(ctx: tau.Ctx) -> dict[str, float]:
    """Score the upstream checkpoint on held-out points."""
    model = json.loads(Path(ctx.upstream_checkpoint or "").read_text())
    run = tau.stellar.init(project="sdk-train-eval", run=ctx.name)
    run.use_artifact(f"sdk-train/{Path(ctx.upstream_checkpoint or '').name}", source_run_id="sdk-train")
    err = sum((model["w"] * x - 3.0 * x) ** 2 for x in (3.0, 4.0)) / 2
    tau.stellar.log({"eval_mse": err}, step=0)
    run.finish()
    return {"eval_mse": err}
