"""``tau workspace init-repo NAME --local``: a repository that runs on this machine by default.

:func:`scaffold_local_repo` writes a README, ``tau/train.yaml``, ``tau/smoke.yaml``, a pure-Python
training script that follows the run contract (metric chunks, checkpoint, report, resume), a
``.gitignore`` and the workspace connection descriptor with ``access.method: local``.  The verb
itself lives in the ``tau-workspace`` distribution; this module is the capability it calls.
"""

from __future__ import annotations

import re
from pathlib import Path

from tau_core import pathsafe
from tau_core.errors import ConflictError, UsageError

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

DESCRIPTOR = """\
# This repository runs targets on this machine by default (`tau run train` = `tau run train --local`).
# Replace access.method with kubeconfig or aks (and add cluster.contextName) to submit to a cluster.
schema: tau.workspace.connection.v1
workspace: local
access:
  method: local
requirements:
  minTauVersion: 0.5.0
"""

TRAIN_YAML = """\
# Training target: `tau run train` (local by default, see tau/workspace.connection.yaml).
name: train
engine: job
entrypoint: ../train.py        # relative to this file
compute:
  gpus: 0
  memory_limit: 1Gi            # enforced locally; exceeding it is reported as OOMKilled
runtime:
  image: python:3.12-slim      # used on a cluster; a local run uses your Python environment
  env:
    STEPS: "40"
metrics:
  history:
    - metrics/*.jsonl          # relative to the run's output directory (TAU_OUTPUT_DIR)
experiment:
  project: {project}
  name: baseline
  group: default
resilience:
  max_retries: 1
  retry_on: [Preempted, Evicted]
  backoff_initial: 5s
"""

SMOKE_YAML = """\
# Smoke target: a two-step run that proves the setup end to end in a few seconds.
name: smoke
engine: job
entrypoint: ../train.py
compute:
  gpus: 0
runtime:
  image: python:3.12-slim
  env:
    STEPS: "2"
metrics:
  history:
    - metrics/*.jsonl
experiment:
  project: {project}
  name: smoke
"""

TRAIN_PY = '''\
"""{name}: a small CPU trainer that follows the TauGrid run contract (pure Python, no downloads).

* metrics: one closed JSONL chunk per step in $TAU_OUTPUT_DIR/metrics/ (temporary dotfile, then rename);
* checkpoint: $TAU_OUTPUT_DIR/checkpoints/checkpoint.json; report: report.json at the end;
* resume: continues from $TAU_RESUME_FROM/checkpoint.json when tau sets it (retry or `tau run resume`).
"""

import json
import os
import random
import time
from pathlib import Path


def atomic_write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{{path.name}}.{{os.getpid()}}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def main():
    output = Path(os.environ.get("TAU_OUTPUT_DIR", "output"))
    steps = int(os.environ.get("STEPS", "40"))
    rng = random.Random(7)
    data = [(x, 3.0 * x + 2.0 + rng.gauss(0, 0.1)) for x in (rng.uniform(-2, 2) for _ in range(256))]
    w, b, start = 0.0, 0.0, 0
    resume = os.environ.get("TAU_RESUME_FROM")
    if resume and (Path(resume) / "checkpoint.json").is_file():
        state = json.loads((Path(resume) / "checkpoint.json").read_text())
        w, b, start = state["w"], state["b"], state["step"] + 1
        print(f"resumed from step {{state['step']}}")
    for step in range(start, steps):
        batch = rng.sample(data, 32)
        w -= 0.05 * sum(2 * (w * x + b - y) * x for x, y in batch) / len(batch)
        b -= 0.05 * sum(2 * (w * x + b - y) for x, y in batch) / len(batch)
        loss = sum((w * x + b - y) ** 2 for x, y in data) / len(data)
        row = {{"_step": step, "_timestamp": time.time(), "loss": loss}}
        name = f"chunk-{{step:06d}}-{{int(time.time() * 1000)}}.jsonl"
        atomic_write(output / "metrics" / name, json.dumps(row) + "\\n")
        atomic_write(output / "checkpoints" / "checkpoint.json", json.dumps({{"step": step, "w": w, "b": b}}))
        print(f"step {{step}} loss {{loss:.5f}}")
    atomic_write(output / "report.json", json.dumps({{"w": w, "b": b, "steps": steps}}, indent=2) + "\\n")
    print("done")


if __name__ == "__main__":
    main()
'''

README = """\
# {name}

A TauGrid research repository that runs on this machine by default.

```console
tau run smoke                 # a two-step check of the setup
tau run train                 # train; prints the run id
tau run status <run> --watch  # Submitted, Started, Running, Completed, Evidence
tau logs <run> -f
tau run get <run>             # list the run's output; --artifact report.json -o raw to fetch one file
taugrid-portal experiment stellar <run>
```

`tau/workspace.connection.yaml` sets `access.method: local`, so `tau run` uses the local backend
(the same as `tau run --local`). Point it at a cluster workspace to submit the same targets to Kubernetes.
"""

GITIGNORE = """\
__pycache__/
*.pyc
output/
"""


def scaffold_local_repo(path: Path | str, name: str, *, force: bool = False) -> list[Path]:
    """Write a local-first repository called ``name`` into ``path``; returns the files written.

    Existing files are never overwritten unless ``force`` is true.
    """
    if not _NAME.match(name or "") or len(name) > 63:
        raise UsageError(f"repository name {name!r} must be a lowercase DNS label (a-z, 0-9, '-')",
                         hint="for example: tau workspace init-repo my-research --local")
    root = Path(path)
    if root.exists() and not root.is_dir():
        raise ConflictError(f"{root} exists and is not a directory")
    files = {
        "README.md": README.format(name=name),
        "train.py": TRAIN_PY.format(name=name),
        "tau/train.yaml": TRAIN_YAML.format(project=name),
        "tau/smoke.yaml": SMOKE_YAML.format(project=name),
        "tau/workspace.connection.yaml": DESCRIPTOR,
        ".gitignore": GITIGNORE,
    }
    root.mkdir(parents=True, exist_ok=True)
    # every file lands inside ROOT: a symlink (ROOT/tau -> elsewhere) is refused before anything is written
    for rel in files:
        pathsafe.ensure_within(root, pathsafe.existing_ancestor(root / rel), what="scaffold path",
                               error=ConflictError,
                               hint="remove the symbolic link, or choose another --output directory")
    existing = [root / rel for rel in files if (root / rel).exists() or (root / rel).is_symlink()]
    if existing and not force:
        shown = ", ".join(str(p) for p in existing)
        raise ConflictError(f"refusing to overwrite existing files: {shown}",
                            hint="choose another directory, or pass --force to regenerate the scaffold files")
    written: list[Path] = []
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        pathsafe.ensure_within(root, target.parent, what="scaffold path", error=ConflictError)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.unlink(missing_ok=True)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)  # replaces a symlink itself, never writes through it
        written.append(target)
    return written
