"""The ``kubernetes`` execution backend: Jobs and RayJobs submitted through Kueue.

One class, :class:`KubernetesBackend`, assembled from one mixin per capability:

=============  ==========================================================================
``session``    options, one :class:`~tau_core.kube.KubeSession` per verb, the sync edge (anyio)
``targeting``  the run's namespace: explicit, its TauWorkspace, or the primary workspace
``status``     snapshot, evidence settling, the status tree, ``list``
``watch``      ``watch_status`` and ``wait``: informers in an anyio task group
``submit``     preflights, idempotent creates, server dry runs, replacing a workload
``cancel``     delete and wait for teardown
``logs``       Job pod logs and Ray driver output, followed in a task group
``artifacts``  ``get`` through a read-only helper pod
``retry``      ``submit`` with automatic retry, ``supervise``, ``retry``
``resume``     manual restart from a checkpoint
=============  ==========================================================================

The synchronous methods implement :class:`tau_core.lifecycle.ExecutionBackend`; each runs its async
counterpart through :mod:`tau_core.aio`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .artifacts import HELPER_IMAGE, HELPER_MOUNT, PUBLISH_DIR, PUBLISH_MARKER, Artifacts, safe_relative
from .cancel import Cancel
from .logs import Logs
from .objects import (
    CLAIM_API,
    DEFAULT_PRIORITY_CLASSES,
    JOB_API,
    LOG_OFFLOAD_CONTAINER,
    RAYJOB_API,
    VISIBILITY_API,
    WORKLOAD_API,
    WORKSPACE_API,
    new_submission_id,
)
from .resume import Resume
from .retry import Retry
from .status import diagnostic_commands
from .targeting import ResolvedTarget, _workspace_namespace


@dataclass
class KubernetesBackend(Retry, Resume, Cancel, Logs, Artifacts):
    """Jobs and RayJobs on one cluster.  ``context``/``kubeconfig`` select the cluster."""


__all__ = [
    "CLAIM_API", "DEFAULT_PRIORITY_CLASSES", "HELPER_IMAGE", "HELPER_MOUNT", "JOB_API", "LOG_OFFLOAD_CONTAINER",
    "PUBLISH_DIR", "PUBLISH_MARKER", "RAYJOB_API", "VISIBILITY_API", "WORKLOAD_API", "WORKSPACE_API",
    "KubernetesBackend", "ResolvedTarget", "_workspace_namespace", "diagnostic_commands", "new_submission_id",
    "safe_relative",
]
