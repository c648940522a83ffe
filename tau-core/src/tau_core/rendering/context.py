"""The typed render context: the resolved platform values a renderer reads besides the config.

:class:`RenderContext` replaces the free-form ``context`` mapping that used to travel in a
:class:`~tau_core.rendering.RenderRequest`.  It is built at the edges (``resolve_run``, a backend
re-rendering for a retry or resume, tests) from a plain mapping through :meth:`RenderContext.from_mapping`
(cattrs, with the legacy aliases ``workspace_uid`` and ``priority_class`` folded in) and turned back
into a plain mapping with :meth:`RenderContext.to_dict` where a submit request carries it onward.
For code that still reads it as a mapping it is also a read-only :class:`~collections.abc.Mapping`
over its set (non-``None``) fields.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

import attrs

from tau_core.config.workspace import truthy

if TYPE_CHECKING:
    import cattrs

#: Old context keys and the field they mean.
ALIASES: dict[str, str] = {"workspace_uid": "workspace_id", "priority_class": "workload_priority_class"}


@attrs.frozen(kw_only=True)
class RetryInfo:
    """The attempt a retry or resume renders (``TAU_RETRY_*``)."""

    attempt: int = 0
    max: int = 0
    reason: str = ""


@attrs.frozen(kw_only=True)
class RenderContext(Mapping[str, Any]):
    """Resolved platform values for one render; every field is optional (``None`` = not resolved)."""

    namespace: str | None = None
    """Target namespace (required by every workload renderer; a ``<unresolved-...>`` placeholder offline)."""
    queue: str | None = None
    """Kueue LocalQueue."""
    workspace: str | None = None
    workspace_id: str | None = None
    """The TauWorkspace uid (old key ``workspace_uid``)."""
    service_account: str | None = None
    workload_identity: bool | None = None
    workload_priority_class: str | None = None
    """Kueue WorkloadPriorityClass (old key ``priority_class``)."""
    pod_priority_class: str | None = None
    disable_default_priorities: bool | None = None
    output: str | None = None
    """Resolved ``storage.output``."""
    output_root: str | None = None
    """The workspace's output root (``storage.output`` defaults under it)."""
    result_pvc: str | None = None
    workload_profile: Mapping[str, Any] | None = None
    """The selected TauCluster workload profile (as published, plus ``stamps``)."""
    profile_set_hash: str | None = None
    tau_cluster_generation: int | str | None = None
    workload_profile_source: str | None = None
    topology: str | None = None
    """Resolved placement."""
    code_sha: str | None = None
    tau_command: tuple[str, ...] | str | None = None
    """The ``tau`` argv (secret flags are redacted when it is stamped)."""
    dry_run: str | None = None
    """``client``, ``server`` or ``None``."""
    redact_secrets: bool | None = None
    """Hide Secret names in env references (defaults to ``dry_run == "client"``)."""
    retry: RetryInfo | None = None
    resume_from: str | None = None
    artifact_publication_id: str | None = None
    metrics_session_id: str | None = None
    local: bool | None = None
    """The run executes on this machine (the local backend)."""
    managed: Any = None
    """A managed manifest's payload (:class:`tau_core.config.managed.ManagedPayload`)."""
    config_dir: str | None = None
    kubeconfig: str | None = None
    """An isolated kubeconfig written by the workspace connection."""
    auto_retry: bool | None = None
    """``False`` turns the submitting CLI's retry supervision off."""

    # -- construction at the edges ----------------------------------------------------------------
    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | RenderContext | None) -> RenderContext:
        """Build a context from a plain mapping (unknown keys are ignored, aliases folded in)."""
        if isinstance(values, RenderContext):
            return values
        given = {str(k): v for k, v in (values or {}).items() if v is not None and v != ""}
        data = {ALIASES.get(k, k): v for k, v in given.items() if k in ALIASES}
        data.update({k: v for k, v in given.items() if k not in ALIASES})  # the canonical key wins
        return converter().structure(data, cls)

    def to_dict(self) -> dict[str, Any]:
        """The set fields as a plain mapping (``retry`` as a dict, the managed payload as is)."""
        out: dict[str, Any] = {}
        for name in _FIELD_NAMES:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, RetryInfo):
                value = attrs.asdict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[name] = value
        return out

    def value(self, key: str, default: Any = None) -> Any:
        """A field by name (aliases accepted); ``default`` when unset or empty."""
        value = getattr(self, ALIASES.get(key, key), None)
        return default if value is None or value == "" else value

    def evolve(self, **changes: Any) -> RenderContext:
        return attrs.evolve(self, **changes)

    # -- read-only mapping view (compatibility) ------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        if key not in _FIELD_SET or getattr(self, key) is None:
            raise KeyError(key)
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())


_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in attrs.fields(RenderContext))
_FIELD_SET = frozenset(_FIELD_NAMES)


@cache
def converter() -> cattrs.Converter:
    """The render-context converter, built on first use (cattrs stays out of ``tau --help``)."""
    import cattrs
    from cattrs.gen import make_dict_structure_fn

    conv = cattrs.Converter(forbid_extra_keys=False)
    conv.register_structure_hook(int | str | None, lambda v, _: v if v is None or isinstance(v, int) else str(v))
    conv.register_structure_hook(tuple[str, ...] | str | None, _structure_command)
    conv.register_structure_hook(Mapping[str, Any] | None, lambda v, _: None if v is None else dict(v))
    conv.register_structure_hook(RetryInfo | None, _structure_retry)
    conv.register_structure_hook(bool | None, lambda v, _: None if v is None else truthy(v))
    conv.register_structure_hook(str | None, lambda v, _: None if v is None else str(v))
    # RenderContext is also a Mapping: structure it as the attrs class it is, not as a dict
    conv.register_structure_hook(RenderContext, make_dict_structure_fn(RenderContext, conv))
    return conv


def _structure_command(value: Any, _: Any) -> tuple[str, ...] | str | None:
    if value is None or isinstance(value, str):
        return value
    return tuple(str(v) for v in value)


def _structure_retry(value: Any, _: Any) -> RetryInfo | None:
    if value is None or isinstance(value, RetryInfo):
        return value
    if not isinstance(value, Mapping) or not value:
        return None
    return RetryInfo(attempt=int(value.get("attempt", 0) or 0), max=int(value.get("max", 0) or 0),
                     reason=str(value.get("reason", "") or ""))

