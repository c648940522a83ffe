"""The engine: one :class:`RenderRequest` in, Kubernetes objects out, through the renderer registry."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from tau_core.config.run_model import RunConfig, normalized, run_config
from tau_core.errors import ConfigError, PluginError
from tau_core.rendering.constants import ENGINE_KINDS
from tau_core.rendering.context import RenderContext
from tau_core.rendering.values import detached

if TYPE_CHECKING:
    from tau_core.plugins import Host


def _to_context(value: Mapping[str, Any] | RenderContext | None) -> RenderContext:
    return RenderContext.from_mapping(value)


def _to_config(value: Mapping[str, Any] | RunConfig) -> RunConfig:
    return value if isinstance(value, RunConfig) else run_config(value)


@attrs.define(kw_only=True)
class RenderRequest:
    """Everything a renderer needs; renderers read nothing else (no cluster, no clock)."""

    name: str
    """Run name (DNS-1123); becomes ``metadata.name``."""
    config: RunConfig = attrs.field(converter=_to_config)
    """Normalized ``tau.yaml`` as the typed :class:`~tau_core.config.run_model.RunConfig` (a normalized
    mapping, e.g. ``ValidatedConfig.normalized``, is converted at construction; a key the field catalog
    does not describe is a :class:`~tau_core.errors.ConfigError`)."""
    context: RenderContext = attrs.field(factory=RenderContext, converter=_to_context)
    """Resolved platform values (a plain mapping is converted at construction)."""
    sources: Mapping[str, str] = attrs.field(factory=dict)
    """Dotted config path -> where the value came from (config, workspace default, ...)."""
    config_hash: str = ""
    submission_id: str = ""
    config_dir: Path | None = None
    """Directory of the config file: entrypoints, working dirs and archives are relative to it."""
    env: Mapping[str, str] = attrs.field(factory=dict)
    """Process environment consulted by renderers (``TAU_METRICS_OFFLOAD_IMAGE``, ...)."""

    @property
    def kind(self) -> str:
        return kind_for_engine(str(self.config.engine or "job"))

    @property
    def normalized(self) -> dict[str, Any]:
        """The config as the normalized mapping (every catalog path present, ``None`` when unset): for
        path-driven consumers (hashing, a submit request, dotted-path lookups of free-form values)."""
        return normalized(self.config)

    def ctx(self, key: str, default: Any = None) -> Any:
        """A context field by name; ``default`` when unset or empty."""
        return self.context.value(key, default)


def kind_for_engine(engine: str) -> str:
    engine = engine.strip().lower()
    engine = "rayjob" if engine == "ray" else engine
    if engine not in ENGINE_KINDS:
        raise ConfigError(f'engine "{engine}" is not valid; use job or rayjob',
                          hint="set engine: job or engine: rayjob")
    return ENGINE_KINDS[engine]


def render(request: RenderRequest, host: Host | None = None) -> list[dict[str, Any]]:
    """Render ``request`` with the renderer registered for its engine's kind; workload first."""
    if host is None:
        from tau_core.plugins import get_host

        host = get_host()
    registry = host.registry("renderers")
    if request.kind not in registry:
        raise PluginError(f"no renderer is registered for kind {request.kind}",
                          hint="install tau-run (pip install tau-run), or check TAU_PLUGINS / TAU_DISABLE_PLUGINS")
    renderer = registry[request.kind].load()
    return detached(renderer(request))
