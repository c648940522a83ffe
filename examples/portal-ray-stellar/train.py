"""Write immutable scalar-history chunks (one closed JSONL file per step) under TAU_OUTPUT_DIR.

Each chunk is written to a temporary dotfile, flushed, and atomically renamed, so the offload
sidecar only ever reads complete rows.
"""

import json
import os
import time
from pathlib import Path


def write_chunk(directory: Path, step: int, row: dict) -> Path:
    stamp = f"{row['_timestamp']:.3f}".replace(".", "")
    final = directory / f"chunk-{step:06d}-{stamp}.jsonl"
    tmp = directory / f".{final.name}.tmp"
    with open(tmp, "w") as handle:
        handle.write(json.dumps(row, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, final)
    return final


def main() -> None:
    out = Path(os.environ.get("TAU_OUTPUT_DIR", "."))
    history = out / "metrics-history-attempt-0"
    history.mkdir(parents=True, exist_ok=True)
    steps = int(os.environ.get("DEMO_STEPS", "3"))
    for step in range(steps):
        row = {"_step": step, "_timestamp": time.time(), "loss": 1.0 / (step + 1), "accuracy": step / (step + 1)}
        print("wrote", write_chunk(history, step, row))


if __name__ == "__main__":
    main()
