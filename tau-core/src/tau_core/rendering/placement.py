"""Placement: GPU class, node selector and tolerations, Kueue topology, and the TTL."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tau_core import keys
from tau_core.errors import ConfigError
from tau_core.rendering.constants import (
    DEFAULT_JOB_TTL_SECONDS,
    GPU_CLASS_ALIASES,
    GPU_TOLERATIONS,
    MAX_TTL_SECONDS,
    PLACEMENT_EQUIVALENTS,
    PLACEMENTS,
    RAYJOB_TTL_SECONDS,
)

if TYPE_CHECKING:
    from tau_core.config.run_model import RunConfig
    from tau_core.rendering.engine import RenderRequest

# -- GPU class and topology ---------------------------------------------------------------------------


def normalized_gpu_class(value: Any) -> str | None:
    """Canonical GPU class (lowercase, ``_``/space -> ``-``, legacy aliases mapped) or None."""
    if value is None or str(value).strip() == "":
        return None
    text = re.sub(r"[\s_]+", "-", str(value).strip().lower())
    return GPU_CLASS_ALIASES.get(text, text)


def gpu_placement(
    gpu_class: Any, node_selector: Mapping[str, str] | None, gpus: int
) -> tuple[dict[str, str], list[dict[str, str]]]:
    """(node selector, tolerations) for a pod with ``gpus`` GPUs and the requested class.

    A specific class adds ``tau.azure.com/gpu-class`` to the selector; ``any`` adds nothing.
    A conflicting user selector on that key is an error.  GPU pods tolerate the GPU taints.
    """
    cls = normalized_gpu_class(gpu_class)
    selector = {str(k): str(v) for k, v in (node_selector or {}).items()}
    user = selector.get(keys.GPU_CLASS)
    if cls and cls != "any":
        if user is not None and user != cls:
            raise ConfigError(
                f'gpu_class "{cls}" requires {keys.GPU_CLASS}="{cls}", but the workload node selector uses "{user}"',
                hint=f"remove {keys.GPU_CLASS} from policy.node_selector or make it match policy.gpu_class",
            )
        selector[keys.GPU_CLASS] = cls
    elif cls == "any" and user is not None:
        raise ConfigError(
            f'gpu_class "any" is unconstrained and cannot be combined with node selector {keys.GPU_CLASS}="{user}"',
            hint="pick a specific policy.gpu_class or drop the node selector",
        )
    tolerations = [dict(t) for t in GPU_TOLERATIONS] if gpus > 0 else []
    return dict(sorted(selector.items())), tolerations


def topology_annotations(placement: Any) -> dict[str, str]:
    """Kueue topology-aware-scheduling annotations for a placement (decision 1)."""
    if not placement:
        return {}
    text = str(placement).strip().lower()
    pair = PLACEMENTS.get(text) or PLACEMENT_EQUIVALENTS.get(text)
    if pair is None:
        allowed = "|".join(PLACEMENTS)
        raise ConfigError(
            f'policy.topology "{placement}" is invalid (allowed: {allowed})',
            hint="use one of the documented placements: " + ", ".join(PLACEMENTS),
        )
    return {pair[0]: pair[1]}


def resolved_topology(request: RenderRequest) -> str | None:
    value = request.context.topology or request.config.policy.topology
    if not value:
        profile = request.context.workload_profile
        value = profile.get("placement") if profile else None
    return str(value) if value else None


def node_selector(request: RenderRequest, gpus: int) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Pod node selector and tolerations: GPU class, then ``policy.node_selector`` merged last."""
    policy = request.config.policy
    user = selector_map(policy.node_selector)
    return gpu_placement(policy.gpu_class, user, gpus)


def selector_map(value: Any) -> dict[str, str]:
    if not value:
        return {}
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    result: dict[str, str] = {}
    for item in value:
        k, eq, v = str(item).partition("=")
        if not eq:
            raise ConfigError("policy.node_selector: expected KEY=VALUE", hint=f'got "{item}"')
        result[k] = v
    return result


# -- TTL ------------------------------------------------------------------------------------------------


def ttl_seconds(config: RunConfig, kind: str) -> int:
    """``ttlSecondsAfterFinished``: 28800 for a Job unless configured; fixed 15 for a RayJob."""
    if kind == "RayJob":
        return RAYJOB_TTL_SECONDS
    value = config.run.ttl_seconds_after_finished
    if value is None:
        return DEFAULT_JOB_TTL_SECONDS
    ttl = int(value)
    if not 1 <= ttl <= MAX_TTL_SECONDS:
        raise ConfigError(
            f"run.ttl_seconds_after_finished must be between 1 and {MAX_TTL_SECONDS}, got {ttl}",
            hint="omit it to keep the 28800-second default",
        )
    return ttl
