"""Fit a tiny linear pricing policy with NumPy and write it to TAU_OUTPUT_DIR/policy.json."""

import json
import os
from pathlib import Path

import numpy as np


def main() -> None:
    rng = np.random.default_rng(int(os.environ.get("MARKET_POLICY_SEED", "20260626")))
    steps = int(os.environ.get("MARKET_POLICY_STEPS", "4000"))
    batch = int(os.environ.get("MARKET_POLICY_BATCH_SIZE", "256"))
    true_w = np.array([0.7, -0.2, 0.1])
    w = np.zeros(3)
    for _ in range(steps // 100):
        x = rng.normal(size=(batch, 3))
        y = x @ true_w + rng.normal(scale=0.01, size=batch)
        w -= 0.1 * (2 / batch) * x.T @ (x @ w - y)
    out = Path(os.environ.get("TAU_OUTPUT_DIR", "."))
    out.mkdir(parents=True, exist_ok=True)
    (out / "policy.json").write_text(json.dumps({"weights": w.round(4).tolist()}))
    print("weights", w.round(4).tolist())


if __name__ == "__main__":
    main()
