"""Quickstart trainer: fits y = 3x + 2 with mini-batch SGD, in pure Python (no downloads, no numpy).

It follows TauGrid's run contract, so the same script works locally and on a cluster:

* metrics: one closed JSONL chunk per step in ``$TAU_OUTPUT_DIR/metrics/``, written as a temporary
  dotfile, flushed, then atomically renamed (rows carry ``_step`` and ``_timestamp``);
* checkpoint: ``$TAU_OUTPUT_DIR/checkpoints/checkpoint.json`` every few steps (atomic as well);
* report: ``report.json`` at the end (in ``$TAU_OUTPUT_STAGING_DIR`` when staged publishing is on);
* resume: when ``TAU_RESUME_FROM`` names a directory holding ``checkpoint.json``, training continues
  from that step instead of starting over.

Knobs (``runtime.env`` in tau/train.yaml): ``QUICKSTART_STEPS`` (default 40) and
``QUICKSTART_STEP_SECONDS`` (pause per step, default 0.05).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path


def atomic_write(path: Path, text: str) -> None:
    """Write to a temporary dotfile in the same directory, flush it to disk, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def dataset(n: int = 256, seed: int = 7) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    points = []
    for _ in range(n):
        x = rng.uniform(-2.0, 2.0)
        points.append((x, 3.0 * x + 2.0 + rng.gauss(0.0, 0.1)))
    return points


def evaluate(data: list[tuple[float, float]], w: float, b: float) -> tuple[float, float]:
    loss = sum((w * x + b - y) ** 2 for x, y in data) / len(data)
    accuracy = sum(1 for x, y in data if abs(w * x + b - y) < 0.25) / len(data)
    return loss, accuracy


def main() -> int:
    output = Path(os.environ.get("TAU_OUTPUT_DIR") or "quickstart-output")
    staging = os.environ.get("TAU_OUTPUT_STAGING_DIR")
    steps = int(os.environ.get("QUICKSTART_STEPS", "40"))
    pause = float(os.environ.get("QUICKSTART_STEP_SECONDS", "0.05"))
    metrics_dir = output / "metrics"
    checkpoint_dir = output / "checkpoints"

    data = dataset()
    w, b, start = 0.0, 0.0, 0
    resume_from = os.environ.get("TAU_RESUME_FROM")
    if resume_from and (Path(resume_from) / "checkpoint.json").is_file():
        state = json.loads((Path(resume_from) / "checkpoint.json").read_text())
        w, b, start = float(state["w"]), float(state["b"]), int(state["step"]) + 1
        print(f"resumed from step {state['step']} ({resume_from})")
    elif resume_from:
        print(f"TAU_RESUME_FROM={resume_from} holds no checkpoint; starting from step 0")
    attempt = os.environ.get("TAU_RETRY_ATTEMPT")
    print(f"training {steps} steps from step {start}" + (f" (retry attempt {attempt})" if attempt else ""))

    rng = random.Random(start)
    lr = 0.05
    for step in range(start, steps):
        batch = rng.sample(data, 32)
        grad_w = sum(2 * (w * x + b - y) * x for x, y in batch) / len(batch)
        grad_b = sum(2 * (w * x + b - y) for x, y in batch) / len(batch)
        w, b = w - lr * grad_w, b - lr * grad_b
        loss, accuracy = evaluate(data, w, b)
        now = time.time()
        row = {"_step": step, "_timestamp": round(now, 6), "loss": round(loss, 10), "accuracy": round(accuracy, 10)}
        atomic_write(metrics_dir / f"chunk-{step:06d}-{int(now * 1000)}.jsonl", json.dumps(row) + "\n")
        if step % 5 == 4 or step == steps - 1:
            atomic_write(checkpoint_dir / "checkpoint.json", json.dumps({"step": step, "w": w, "b": b}) + "\n")
        print(f"step {step:3d}  loss {loss:.5f}  accuracy {accuracy:.3f}")
        time.sleep(pause)

    loss, accuracy = evaluate(data, w, b)
    report = {"steps": steps, "resumed_from_step": start if start else None, "w": w, "b": b,
              "final_loss": loss, "final_accuracy": accuracy, "target": {"w": 3.0, "b": 2.0}}
    report_dir = Path(staging) if staging else output
    atomic_write(report_dir / "report.json", json.dumps(report, indent=2) + "\n")
    print(f"done: w={w:.3f} b={b:.3f} loss={loss:.5f}; report in {report_dir / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
