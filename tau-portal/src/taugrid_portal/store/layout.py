"""Where things live inside a store root (the ``expstore.v7`` layout)."""

from __future__ import annotations

MANIFEST = "manifest.json"
INDEX = "index.sqlite"
APPEND_LOG = "append-log"
METRICS = "metrics"
PLACING = "placing"
ARTIFACTS = "artifacts"
MIRRORS = (
    "experiments", "run_groups", "runs", "run_context", "configs", "tags", "artifacts", "metric_files",
    "idempotency_keys", "events", "observations",
)
