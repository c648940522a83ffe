"""Typed workload profiles, as TauCluster status and ``TauWorkloadProfileSnapshot`` files publish them,
and the serving rules a profile must meet.

A resolved profile (``status.workloadProfiles.profiles[]``) is the normalized intent the platform declared
(name, applicability, cardinality, mode, placement, default LocalQueue, execution target, priorities) plus
the queue bindings the controller observed for it (``localQueues``, ``clusterQueues``, ``resourceFlavors``,
``topologies``, ``workloadPriorityClasses``, ``podPriorityClasses``) and its readiness. :func:`read_profile`
builds the typed view at the edge (unknown keys and wrongly typed values are refused, naming the field);
:meth:`WorkloadProfile.to_dict` gives back exactly the published mapping, so ``profileSetHash`` stays
computable from the typed form.

:func:`multinode_rayservice` says whether a profile may back a multi-node RayService of N GPU workers
(``tau serve deploy --nodes N``) and, when not, why in one line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, get_args, get_origin

import attrs

from tau_core.config.catalog import SAME_NETWORK_DOMAIN_PLACEMENTS
from tau_core.errors import ConfigError

if TYPE_CHECKING:
    import cattrs

__all__ = [
    "MAX_RAYSERVICE_NODES",
    "Applicability",
    "LocalQueueBinding",
    "MultiNodeVerdict",
    "Priorities",
    "ProfileCondition",
    "WorkloadProfile",
    "multinode_rayservice",
    "read_profile",
]

#: ``--nodes`` is an int32 worker count (2..2147483647).
MAX_RAYSERVICE_NODES = 2147483647


@attrs.frozen(kw_only=True)
class Applicability:
    """Who may use the profile; an empty or absent list applies to everyone."""

    teams: list[str] | None = None
    lanes: list[str] | None = None
    """Scheduling lanes (``training``, ``eval``, ``large-memory``, ``elastic``, ``serving``)."""
    namespaces: list[str] | None = None


@attrs.frozen(kw_only=True)
class Priorities:
    workload_priority_class_name: str | None = None
    pod_priority_class_name: str | None = None
    disable_default_priorities: bool | None = None


@attrs.frozen(kw_only=True)
class LocalQueueBinding:
    """One LocalQueue the profile resolved to, with the ClusterQueue behind it."""

    namespace: str
    name: str
    cluster_queue: str


@attrs.frozen(kw_only=True)
class ProfileCondition:
    """A per-profile condition (``LocalQueuesResolved`` ... ``Ready``)."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None
    observed_generation: int | None = None


@attrs.frozen(kw_only=True)
class WorkloadProfile:
    """One resolved workload profile. The observed identities are ``None`` where the source omits them
    (a declaration that was never resolved), so :meth:`to_dict` round-trips exactly."""

    name: str
    gpus_per_worker: int
    worker_count: int
    placement: str
    default_local_queue: str
    description: str | None = None
    applicability: Applicability | None = None
    mode: str | None = None
    execution_target: str | None = None
    priorities: Priorities | None = None
    local_queues: list[LocalQueueBinding] | None = None
    cluster_queues: list[str] | None = None
    resource_flavors: list[str] | None = None
    topologies: list[str] | None = None
    workload_priority_classes: list[str] | None = None
    pod_priority_classes: list[str] | None = None
    ready: bool | None = None
    conditions: list[ProfileCondition] | None = None
    observed_generation: int | None = None

    @property
    def lanes(self) -> list[str]:
        """The lanes the profile serves (empty: every lane)."""
        return list((self.applicability or Applicability()).lanes or [])

    @property
    def teams(self) -> list[str]:
        return list((self.applicability or Applicability()).teams or [])

    @property
    def effective_mode(self) -> str:
        return self.mode or "fixed"

    @property
    def effective_execution_target(self) -> str:
        return self.execution_target or "singleCluster"

    def to_dict(self) -> dict[str, Any]:
        """The published camelCase mapping (unset fields left out)."""
        data: dict[str, Any] = converter().unstructure(self)
        return data


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _strict(kind: type[Any]) -> Any:
    def hook(value: Any, _: Any) -> Any:
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__} {value!r}")
        return value

    return hook


def _is_list(hint: Any) -> bool:
    origin: Any = get_origin(hint)
    return origin is list


@cache
def converter() -> cattrs.Converter:
    """camelCase keys, strict scalars, unknown keys refused, unset fields omitted (built on first use)."""
    import cattrs
    from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

    conv = cattrs.Converter(forbid_extra_keys=True)
    for kind in (str, int, bool):
        conv.register_structure_hook(kind, _strict(kind))

    def a_list(value: Any, hint: Any) -> list[Any]:
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {type(value).__name__} {value!r}")
        (item,) = get_args(hint)
        return [conv.structure(v, item) for v in value]

    conv.register_structure_hook_func(_is_list, a_list)
    for cls in (Applicability, Priorities, LocalQueueBinding, ProfileCondition, WorkloadProfile):
        fields = attrs.fields(cls)
        renamed: Any = {f.name: override(rename=_camel(f.name)) for f in fields}
        # unset (None) fields are left out, so a published mapping round-trips exactly
        omitted: Any = {f.name: override(rename=_camel(f.name), omit_if_default=f.default is None) for f in fields}
        conv.register_structure_hook(cls, make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=True,
                                                                 **renamed))
        conv.register_unstructure_hook(cls, make_dict_unstructure_fn(cls, conv, **omitted))
    return conv


_SNAKE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")


def read_profile(data: Mapping[str, Any] | WorkloadProfile, where: str = "workload profile") -> WorkloadProfile:
    """The typed view of one published profile; a wrong key or value is a :class:`ConfigError` naming it."""
    if isinstance(data, WorkloadProfile):
        return data
    import cattrs

    name = data.get("name") if isinstance(data, Mapping) else None
    label = f"{where} {name!r}" if isinstance(name, str) else where
    if not isinstance(data, Mapping):
        raise ConfigError(f"{label} must be a mapping, got {type(data).__name__}")
    try:
        return converter().structure(dict(data), WorkloadProfile)
    except cattrs.BaseValidationError as exc:
        # the paths name attributes; the published keys are their camelCase spellings
        detail = "; ".join(_SNAKE.sub(lambda m: _camel(m.group()), line)
                           for line in cattrs.transform_error(exc, path="profile"))
        raise ConfigError(f"{label} is malformed: {detail}",
                          hint="re-export the snapshot, or ask the platform team to repair the TauCluster") from None


@attrs.frozen
class MultiNodeVerdict:
    """Whether a profile may back a multi-node RayService; ``reason`` is one line when it may not."""

    allowed: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.allowed


def _refusals(p: WorkloadProfile, nodes: int) -> list[str]:
    name = repr(p.name)
    out = []
    if p.effective_mode != "fixed":
        out.append(f"workload profile {name} has mode {p.effective_mode}; a multi-node RayService needs a fixed "
                   "profile")
    if p.placement not in SAME_NETWORK_DOMAIN_PLACEMENTS:
        out.append(f"workload profile {name} has placement {p.placement}; a multi-node RayService needs "
                   "same-network-domain placement (multi-node-nccl)")
    if p.effective_execution_target != "singleCluster":
        out.append(f"workload profile {name} targets {p.effective_execution_target}; a multi-node RayService "
                   "runs on a single cluster (executionTarget singleCluster)")
    if p.gpus_per_worker < 1:
        out.append(f"workload profile {name} has {p.gpus_per_worker} GPUs per worker; a multi-node RayService "
                   "needs at least 1")
    if nodes != p.worker_count:
        out.append(f"--nodes {nodes} does not match workload profile {name} workerCount {p.worker_count}")
    return out


def multinode_rayservice(profile: WorkloadProfile | Mapping[str, Any], nodes: int) -> MultiNodeVerdict:
    """May ``profile`` back a RayService with ``nodes`` GPU workers (``tau serve deploy --nodes``)?

    The rules: ``2 <= nodes <= 2147483647``; the profile is ``mode: fixed``, its placement keeps the workers
    in one network domain (``same-network-domain``, or the documented ``multi-node-nccl``), its
    ``executionTarget`` is ``singleCluster``, it grants at least one GPU per worker, and ``nodes`` equals its
    ``workerCount``. The reason names every broken rule, separated by ``; ``.
    """
    p = read_profile(profile)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 2 <= nodes <= MAX_RAYSERVICE_NODES:
        return MultiNodeVerdict(False, f"--nodes must be an integer from 2 to {MAX_RAYSERVICE_NODES} for a "
                                       f"multi-node RayService, got {nodes!r}")
    refusals = _refusals(p, nodes)
    return MultiNodeVerdict(not refusals, "; ".join(refusals))
