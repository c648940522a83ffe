"""Rendering constants: engines, placeholders, TTLs, limits, GPU classes and placements."""

from __future__ import annotations

from tau_core import keys
from tau_core.config.reserved import MAX_LITERAL_ENV_TOTAL_BYTES as MAX_LITERAL_ENV_TOTAL_BYTES
from tau_core.config.reserved import MAX_LITERAL_ENV_VALUE_BYTES as MAX_LITERAL_ENV_VALUE_BYTES
from tau_core.config.reserved import SETTABLE_TAU_ENV as SETTABLE_TAU_ENV

ENGINE_KINDS: dict[str, str] = {"job": "Job", "rayjob": "RayJob"}

PLACEHOLDER_QUEUE = "<unresolved-queue>"
PLACEHOLDER_NAMESPACE = "<unresolved-namespace>"
PLACEHOLDER_WORKSPACE = "<unresolved-workspace>"
PLACEHOLDER_SERVICE_ACCOUNT = "<unresolved-service-account>"
REDACTED = "<redacted>"

DEFAULT_JOB_TTL_SECONDS = 28800
RAYJOB_TTL_SECONDS = 15
MAX_TTL_SECONDS = 2147483647

MAX_ANNOTATION_VALUE_BYTES = 8192

RESTRICTED_UID = 65532
DEFAULT_PRIORITY_CLASS = "taugrid-default"
PRIORITY_TIER_CLASS = "taugrid-priority"
DEFAULT_QUEUE = "jobqueue"

GPU_CLASSES = (
    "any",
    "a10-4gb",
    "a10-8gb",
    "a10-12gb",
    "a10-24gb",
    "a100-40gb",
    "a100-80gb",
    "h100-80gb",
    "h100-95gb",
    "h200-141gb",
    "gb200-192gb",
    "gb300-288gb",
)
GPU_CLASS_ALIASES = {
    "a100-nvlink-80gb": "a100-80gb",
    "h100-standalone-95gb": "h100-95gb",
    "h200-nvlink-141gb": "h200-141gb",
}
#: Placement vocabulary (decision 1) -> the Kueue topology request it renders.
PLACEMENTS: dict[str, tuple[str, str]] = {
    "independent": (keys.KUEUE_PODSET_UNCONSTRAINED_TOPOLOGY, "true"),
    "single-node-nvlink": (keys.KUEUE_PODSET_REQUIRED_TOPOLOGY, keys.HOSTNAME),
    "multi-node-nccl": (keys.KUEUE_PODSET_UNCONSTRAINED_TOPOLOGY, "true"),
    "elastic-workers": (keys.KUEUE_PODSET_UNCONSTRAINED_TOPOLOGY, "true"),
}
#: Placement names that some TauCluster catalogs publish; mapped onto the same annotations.
PLACEMENT_EQUIVALENTS: dict[str, tuple[str, str]] = {
    "unconstrained": (keys.KUEUE_PODSET_UNCONSTRAINED_TOPOLOGY, "true"),
    "same-host": (keys.KUEUE_PODSET_REQUIRED_TOPOLOGY, keys.HOSTNAME),
    "same-accelerator-domain": (keys.KUEUE_PODSET_REQUIRED_TOPOLOGY, keys.ACCELERATOR_DOMAIN),
    "same-network-domain": (keys.KUEUE_PODSET_REQUIRED_TOPOLOGY, keys.NETWORK_DOMAIN),
    "same-site": (keys.KUEUE_PODSET_REQUIRED_TOPOLOGY, keys.SITE),
}

GPU_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    {"key": keys.NVIDIA_GPU, "operator": "Exists", "effect": "NoSchedule"},
)

#: Env keys a researcher may set inside the reserved ``TAU_`` namespace.
