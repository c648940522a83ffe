"""The plugin host: discovery, filtering, failure isolation, registries and tracing.

Plugins are modules published under the ``tau`` entry-point group.  The host

* reads the entry points once, filters them by name with ``TAU_PLUGINS`` (allowlist) and
  ``TAU_DISABLE_PLUGINS`` (blocklist) *before* importing anything;
* imports and registers each remaining plugin, turning any failure (an import error, a hook
  with the wrong signature, a hook the host does not know) into a one-line warning that
  names the distribution, while the other plugins keep working;
* collects the items plugins register through the ``tau_register_*`` hooks into
  :class:`Registry` objects, with provenance, lazily and once per family;
* prints every hook call when ``TAU_TRACE_HOOKS=1``.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pluggy

from tau_core import __version__, hookspecs
from tau_core.errors import ConfigError, PluginError
from tau_core.output import warning as warn

ENTRY_POINT_GROUP = "tau"
ENV_ALLOW = "TAU_PLUGINS"
ENV_BLOCK = "TAU_DISABLE_PLUGINS"
ENV_TRACE = "TAU_TRACE_HOOKS"

#: family name -> hook name
FAMILIES: dict[str, str] = {
    "roots": "tau_register_roots",
    "resolvers": "tau_register_resolvers",
    "renderers": "tau_register_renderers",
    "storage_backends": "tau_register_storage_backends",
    "telemetry_sinks": "tau_register_telemetry_sinks",
    "gpu_class_rules": "tau_register_gpu_class_rules",
    "execution_backends": "tau_register_execution_backends",
    "history_sources": "tau_register_history_sources",
    "fleet_sources": "tau_register_fleet_sources",
}
RENDER_KINDS = ("Job", "RayJob", "RayService", "Deployment")
RESOLVER_KINDS = ("project", "workspace-connection", "workspace-defaults", "workload-profile", "reference")

#: Modules inside tau_core that implement hooks, registered like any third-party plugin.
DEFAULT_PLUGINS: tuple[str, ...] = ("tau_core.builtin_plugins",)

CORE_DIST = "tau-core"


def load_target(target: str) -> Any:
    """Import ``"package.module:attr.sub"`` and return the attribute."""
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


@dataclass
class Entry:
    """One item a plugin registered: a root, a renderer, a backend, ..."""

    family: str
    name: str
    target: Any
    plugin: str
    dist: str
    meta: dict[str, Any] = field(default_factory=dict)
    _loaded: Any = None

    @property
    def priority(self) -> int:
        return int(self.meta.get("priority", 0))

    def load(self) -> Any:
        """The registered object, importing it on first use when it was given as a string."""
        if self._loaded is None:
            if isinstance(self.target, str):
                try:
                    self._loaded = load_target(self.target)
                except Exception as exc:
                    raise PluginError(
                        f"{self.family[:-1].replace('_', ' ')} '{self.name}' from {self.dist} failed to load: "
                        f"{type(exc).__name__}: {exc}",
                        hint=f"reinstall {self.dist}, or disable it with {ENV_BLOCK}={self.plugin}",
                    ) from exc
            else:
                self._loaded = self.target
        return self._loaded


class Registry(Mapping[str, Entry]):
    """The entries of one family, keyed by name, after priority and duplicate resolution."""

    def __init__(self, family: str, entries: Iterable[Entry]) -> None:
        self.family = family
        self._entries: dict[str, Entry] = {}
        self.shadowed: list[Entry] = []
        for entry in entries:
            current = self._entries.get(entry.name)
            if current is None:
                self._entries[entry.name] = entry
            elif entry.priority > current.priority:
                self.shadowed.append(current)
                self._entries[entry.name] = entry
            elif entry.priority < current.priority:
                self.shadowed.append(entry)
            else:
                what = "command root" if family == "roots" else family[:-1].replace("_", " ")
                raise PluginError(
                    f"{what} '{entry.name}' is registered by both {current.dist} and {entry.dist}",
                    hint=f"uninstall one of them, or disable one with {ENV_BLOCK}=<plugin name>",
                )

    def __getitem__(self, name: str) -> Entry:
        return self._entries[name]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(sorted(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def ordered(self) -> list[Entry]:
        """Entries from the highest priority down (ties keep name order)."""
        return sorted(self._entries.values(), key=lambda e: (-e.priority, e.name))

    def require(self, name: str, what: str, *, hint: str) -> Entry:
        """The entry ``name``, or a one-line error naming ``what`` was asked for and what is installed."""
        if name not in self._entries:
            known = ", ".join(sorted(self._entries)) or "none installed"
            raise ConfigError(f"no {what} named {name!r} ({known})", hint=hint)
        return self._entries[name]


@dataclass
class PluginInfo:
    """What the host knows about one plugin (an entry point or a built-in module)."""

    name: str
    dist: str
    version: str
    status: str  # loaded | failed | disabled
    error: str | None = None
    hooks: list[str] = field(default_factory=list)
    module: ModuleType | object | None = None


def _names(value: str | None) -> set[str] | None:
    if value is None:
        return None
    return {part.strip() for part in value.split(",") if part.strip()}


class Host:
    """A plugin manager plus the registries built from it.

    Create one with :meth:`Host.create`.  The CLI keeps one per process; tests build
    isolated hosts (see ``tau_testing``).
    """

    def __init__(self, pm: pluggy.PluginManager, env: Mapping[str, str]) -> None:
        self.pm = pm
        self.env = env
        self.plugins: list[PluginInfo] = []
        self._registries: dict[str, Registry] = {}
        self._trace_undo: Callable[[], None] | None = None
        if env.get(ENV_TRACE, "") not in ("", "0", "false", "no"):
            self._trace_undo = pm.add_hookcall_monitoring(_trace_before, _trace_after)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        *,
        entry_points: bool = True,
        extra_plugins: Iterable[tuple[str, object]] = (),
        env: Mapping[str, str] | None = None,
        builtins: bool = True,
    ) -> Host:
        """Build a host.

        ``entry_points`` discovers installed plugins; ``extra_plugins`` are ``(name, plugin)``
        pairs registered afterwards (tests use this for inline plugins); ``builtins=False``
        leaves out tau-core's own implementations (for testing a hook in isolation).
        """
        pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        pm.add_hookspecs(hookspecs)
        host = cls(pm, os.environ if env is None else env)
        for module_name in DEFAULT_PLUGINS if builtins else ():
            host.add_plugin(module_name, importlib.import_module(module_name), dist=CORE_DIST, version=__version__)
        if entry_points:
            host._load_entry_points()
        for name, plugin in extra_plugins:
            host.add_plugin(name, plugin, dist=name)
        return host

    def _load_entry_points(self) -> None:
        from tau_core.entrypoints import entry_points

        allow = _names(self.env.get(ENV_ALLOW))
        block = _names(self.env.get(ENV_BLOCK)) or set()
        seen: set[tuple[str, str]] = set()
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist, version = ep.dist, ep.version
            if (dist, ep.name) in seen:
                continue  # the same distribution visible twice on sys.path
            seen.add((dist, ep.name))
            keys = {ep.name, dist}
            if (allow is not None and not keys & allow) or keys & block:
                self.plugins.append(PluginInfo(ep.name, dist, version, "disabled"))
                continue
            try:
                module = ep.load()
            except Exception as exc:
                self._fail(PluginInfo(ep.name, dist, version, "failed"), f"failed to import: {_describe(exc)}")
                continue
            name = ep.name if self.pm.get_plugin(ep.name) is None else f"{ep.name}@{dist}"
            self.add_plugin(name, module, dist=dist, version=version)

    def add_plugin(self, name: str, plugin: object, *, dist: str, version: str = "") -> PluginInfo:
        """Register one plugin object, isolating any failure into a warning."""
        info = PluginInfo(name, dist, version, "loaded", module=plugin)
        try:
            self.pm.register(plugin, name=name)
        except Exception as exc:
            return self._fail(info, _describe(exc))
        unknown = [hc.name for hc in (self.pm.get_hookcallers(plugin) or []) if not hc.has_spec()]
        if unknown:
            self.pm.unregister(plugin)
            return self._fail(info, f"implements unknown hook(s) {', '.join(sorted(unknown))}")
        info.hooks = sorted(hc.name for hc in (self.pm.get_hookcallers(plugin) or []))
        self.plugins.append(info)
        self._registries.clear()
        return info

    def remove_plugin(self, name: str) -> None:
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)
        self.plugins = [p for p in self.plugins if p.name != name]
        self._registries.clear()

    def _fail(self, info: PluginInfo, message: str) -> PluginInfo:
        info.status = "failed"
        info.error = message
        self.plugins.append(info)
        warn(f"plugin '{info.name}' from {info.dist} was not loaded: {message}")
        return info

    # -- registries ---------------------------------------------------------------------
    def registry(self, family: str) -> Registry:
        """All entries of ``family`` (see :data:`FAMILIES`), collected once."""
        if family not in self._registries:
            hook_name = FAMILIES[family]
            entries: list[Entry] = []
            dists = {p.name: p.dist for p in self.plugins}
            caller = getattr(self.pm.hook, hook_name)
            for impl in reversed(caller.get_hookimpls()):
                plugin_name = impl.plugin_name
                dist = dists.get(plugin_name, plugin_name)
                collected: list[Entry] = []

                def register(name: str, target: Any, *, _c: list[Entry] = collected, _p: str = plugin_name,
                             _d: str = dist, **meta: Any) -> None:
                    _c.append(Entry(family, name, target, _p, _d, meta))

                others = [p for p in self.pm.get_plugins() if p is not impl.plugin]
                try:
                    self.pm.subset_hook_caller(hook_name, remove_plugins=others)(register=register)
                except Exception as exc:
                    warn(f"plugin '{plugin_name}' from {dist} failed in {hook_name}: {_describe(exc)}")
                    continue
                entries.extend(collected)
            self._registries[family] = Registry(family, entries)
        return self._registries[family]

    def roots(self) -> Registry:
        return self.registry("roots")

    def failed(self) -> list[PluginInfo]:
        return [p for p in self.plugins if p.status == "failed"]

    def resolve(self, kind: str, request: Any) -> Any:
        """Ask the resolvers of ``kind`` in priority order; the first non-None answer wins."""
        for entry in self.registry("resolvers").ordered():
            if entry.meta.get("kind") == kind:
                answer = entry.load()(request)
                if answer is not None:
                    return answer
        return None


def _describe(exc: BaseException) -> str:
    text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _trace_before(hook_name: str, hook_impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    impls = ", ".join(impl.plugin_name for impl in hook_impls) or "(none)"
    print(f"trace: {hook_name}({', '.join(sorted(kwargs))}) -> {impls}", file=sys.stderr)


def _trace_after(outcome: Any, hook_name: str, hook_impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    exc = outcome.exception
    result = f"raised {_describe(exc)}" if exc is not None else f"returned {outcome.get_result()!r}"
    print(f"trace: {hook_name} {result}", file=sys.stderr)


_HOST: Host | None = None


def get_host() -> Host:
    """The process-wide host, created on first use."""
    global _HOST
    if _HOST is None:
        _HOST = Host.create()
    return _HOST


def set_host(host: Host | None) -> Host | None:
    """Replace the process-wide host (used by tests); returns the previous one."""
    global _HOST
    previous, _HOST = _HOST, host
    return previous
