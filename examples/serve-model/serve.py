"""A Ray Serve application for ``tau serve deploy --import-path serve:app``.

It loads whatever ``TAU_MODEL_PATH`` points at (``--checkpoint`` mounts the checkpoint PVC at ``/data``)
and answers ``GET /`` with what it loaded; replace ``load`` and ``__call__`` with your model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ray import serve  # provided by the serving image


def load(path: str) -> dict[str, Any]:
    root = Path(path)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.is_dir() else []
    return {"model_path": path, "files": files[:20]}


@serve.deployment
class Model:
    def __init__(self, greeting: str = "hello") -> None:
        self.greeting = greeting
        self.state = load(os.environ.get("TAU_MODEL_PATH", ""))

    async def __call__(self, request: Any) -> dict[str, Any]:
        return {"greeting": self.greeting, **self.state}


def build(args: dict[str, Any]) -> Any:
    """The application builder: ``--app-args app-args.yaml`` passes ``greeting``."""
    return Model.bind(greeting=str(args.get("greeting", "hello")))


app = Model.bind()
