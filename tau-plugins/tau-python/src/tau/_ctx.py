"""``Ctx``: what a train or eval function receives (locally or in the pod)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Ctx:
    """Where a workload reads and writes, and how it was sized.

    Locally the directories are the local backend's layout (``$TAU_DATA_DIR`` or
    ``~/.local/share/tau``: ``data/`` stands for the cluster's ``/data``, ``hot/`` for ``/mnt``);
    in a pod they are the mounted volumes.
    """

    name: str
    gpus: int = 1
    workers: int = 1
    smoke_pairs: int = 0
    manifest: dict[str, Any] = field(default_factory=dict)
    manifest_path: str | None = None
    data_dir: str = "/data"
    hot_dir: str = "/mnt"
    datasets_dir: str = "/mnt/datasets"
    checkpoints_dir: str = "/mnt/checkpoints"
    durable_datasets_dir: str = "/data/datasets"
    durable_checkpoints_dir: str = "/data/checkpoints"
    upstream_checkpoint: str | None = None
    resume_from: str | None = None
    storage_hot_status: str = "local"
    storage_hot_reason: str = ""
    storage_hot_write_mbps: float | None = None
    is_remote: bool = False
