"""Profiles and requests the renderer tests share."""

from __future__ import annotations

from typing import Any

import attrs

from tau_core.rendering import RenderContext
from tau_serve.spec import ServeRenderRequest, ServeSpec

IMAGE = "registry.example.com/serve/llm@sha256:" + "a" * 64
PRIORITIES = {"workloadPriorityClassName": "taugrid-default", "podPriorityClassName": "taugrid-default",
              "disableDefaultPriorities": False}


def profile(name: str = "serve-1x", *, gpus: int = 1, workers: int = 1, placement: str = "independent") -> dict[str, Any]:
    return {"name": name, "applicability": {"teams": [], "lanes": [], "namespaces": []}, "gpusPerWorker": gpus,
            "workerCount": workers, "mode": "fixed", "placement": placement, "defaultLocalQueue": "jobqueue",
            "executionTarget": "singleCluster", "priorities": PRIORITIES}


def request(spec: ServeSpec | None = None, *, prof: dict[str, Any] | None = None, dry_run: str | None = None,
            **changes: Any) -> ServeRenderRequest:
    prof = prof or profile()
    base = spec or ServeSpec(name="llm", image=IMAGE, gpus=int(prof["gpusPerWorker"]),
                             nodes=int(prof["workerCount"]))
    if changes:
        base = attrs.evolve(base, **changes)
    context = RenderContext(namespace="aurora", queue="jobqueue", workload_profile=prof,
                            profile_set_hash="0" * 64, tau_cluster_generation=1, dry_run=dry_run)
    return ServeRenderRequest(spec=base, context=context)
