"""A local run whose output is hostile to terminals: escape sequences, BEL, CR and C1 bytes."""
import json
import os
from pathlib import Path

print("title \x1b]0;PWNED\x07 clear \x1b[2J bell \x07 cr \r overwrite \x9b31m c1", flush=True)
out = Path(os.environ.get("TAU_OUTPUT_DIR") or "out")
(out / "metrics").mkdir(parents=True, exist_ok=True)
(out / "metrics" / "history.jsonl").write_text(
    "".join(json.dumps({"_step": s, "loss": 1.0 / (s + 1)}) + "\n" for s in range(4)))
(out / "report \x1b[31mred.txt").write_text("artifact with an escape sequence in its name\n")
