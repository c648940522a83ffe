"""Validate a loaded direct run config and produce the normalized config renderers consume.

Pipeline: managed-manifest detection -> value pre-normalization (case, deprecated spellings,
nulls) -> compiled JSON Schema (fast gate) -> structural walker (every structural problem,
only when the gate fails) -> alias resolution -> engine inference -> cross-field rules
(:mod:`tau_core.config.rules`) -> normalization with defaults.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau_core.config.catalog import (
    BY_PATH,
    DEFAULT_JOB_TTL_SECONDS,
    FIELDS,
    JOB,
    OPTIONAL_OBJECTS,
    PRECEDENCE,
    RAYJOB,
    REQUIRED,
    Field,
    canonical_fields,
)
from tau_core.config.issues import ConfigIssue, ConfigValidationError, PathKey, dotted
from tau_core.config.loader import Document, require_mapping
from tau_core.errors import ConfigError
from tau_core.hashing import config_hash as config_hash  # the one definition, re-exported

if TYPE_CHECKING:
    from tau_core.config.run_model import RunConfig

SOURCE_CONFIG = "config"
SOURCE_DEFAULT = "default"


class ManagedManifestError(ConfigError):
    """The file is an SDK-generated managed workflow manifest, not a direct run config."""


@dataclass
class ValidatedConfig:
    """A valid direct config: the normalized dict plus what validation learned about it."""

    normalized: dict[str, Any]
    engine: str
    name: str | None
    document: Document
    #: canonical dotted path -> the document path the value came from (set by the user)
    origins: dict[str, tuple[PathKey, ...]] = field(default_factory=dict)
    #: canonical dotted path -> "config" | "default"
    sources: dict[str, str] = field(default_factory=dict)
    warnings: list[ConfigIssue] = field(default_factory=list)
    engine_inferred: bool = False
    base_dir: Path | None = None

    _hash: str | None = field(default=None, repr=False)

    @property
    def config_hash(self) -> str:
        if self._hash is None:
            self._hash = config_hash(self.normalized)
        return self._hash

    @property
    def model(self) -> RunConfig:
        """The normalized config as the typed, catalog-generated :class:`~tau_core.config.run_model.RunConfig`."""
        from tau_core.config.run_model import run_config

        return run_config(self.normalized)

    def get(self, dotted_path: str) -> Any:
        return get_path(self.normalized, dotted_path)

    def is_set(self, dotted_path: str) -> bool:
        return dotted_path in self.origins


def get_path(data: Any, dotted_path: str) -> Any:
    node = data
    for part in dotted_path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def set_path(data: dict[str, Any], dotted_path: str, value: Any) -> None:
    parts = _split(dotted_path)
    node = data
    for part in parts[:-1]:
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        node = nxt
    node[parts[-1]] = value


@cache
def _split(dotted_path: str) -> tuple[str, ...]:
    return tuple(dotted_path.split("."))




def is_managed_manifest(data: Any) -> bool:
    """A managed manifest has a non-null schema_version and neither engine nor run.engine."""
    if not isinstance(data, dict) or data.get("schema_version") is None:
        return False
    run = data.get("run")
    return data.get("engine") is None and not (isinstance(run, dict) and run.get("engine") is not None)


# -- pre-normalization ----------------------------------------------------------------------

def _normalize_gpu_class(value: str) -> str:
    return "-".join(value.strip().lower().replace("_", " ").split())


def _prenormalize(data: dict[str, Any], doc: Document, warnings: list[ConfigIssue]) -> dict[str, Any]:
    """Drop explicit nulls of known fields, canonicalize case-insensitive and deprecated values."""
    out: dict[str, Any] = _copy_tree(data)
    _pre_object("", out, (), doc, warnings)
    return out


def _pre_object(prefix: str, node: Any, path: tuple[PathKey, ...], doc: Document,
                warnings: list[ConfigIssue]) -> None:
    if not isinstance(node, dict):
        return
    for key in list(node):
        full = f"{prefix}.{key}" if prefix else key
        f = BY_PATH.get(full)
        if f is None:
            continue
        value = node[key]
        kpath = (*path, key)
        if value is None and f.status != "reserved":
            del node[key]
            continue
        if f.type == "object":
            _pre_object(full, value, kpath, doc, warnings)
        elif f.type == "object_list" and isinstance(value, list):
            for i, item in enumerate(value):
                _pre_object(full + "[]", item, (*kpath, i), doc, warnings)
        elif f.type == "string" and isinstance(value, str) and f.case_insensitive:
            canon = _normalize_gpu_class(value) if f.path == "policy.gpu_class" else value.strip().lower()
            if canon in f.deprecated_values:
                new = f.deprecated_values[canon]
                warnings.append(doc.issue(kpath, dotted(kpath), f"{value!r} is deprecated; use {new!r}",
                                          f"replace it with {new}", severity="warning"))
                canon = new
            elif f.path == "policy.gpu_class" and canon not in f.values:
                mapped = _gpu_class_rule(value)
                if mapped is not None:
                    canon = mapped
            if canon in f.values:
                node[key] = canon
        elif f.type == "string_list" and isinstance(value, list) and f.case_insensitive and f.item_values:
            lowered = {v.lower(): v for v in f.item_values}
            node[key] = [lowered.get(v.strip().lower(), v) if isinstance(v, str) else v for v in value]


def _gpu_class_rule(value: str) -> str | None:
    """Ask the registered GPU-class rule tables and rules (``tau_register_gpu_class_rules``) about a value."""
    from tau_core.config.catalog import GPU_CLASSES
    from tau_core.gpu_catalog import gpu_class_for

    try:
        return gpu_class_for(value, classes=GPU_CLASSES)
    except Exception:
        return None


# -- the pipeline ---------------------------------------------------------------------------

def validate_document(doc: Document, *, name_override: str | None = None, base_dir: Path | None = None,
                      check_files: bool = True) -> ValidatedConfig:
    """Validate ``doc`` as a direct run config; raise :class:`ConfigValidationError` listing every problem."""
    from tau_core.config import rules
    from tau_core.config.structure import Walker, compiled_validator

    data = require_mapping(doc)
    if is_managed_manifest(data):
        raise ManagedManifestError(
            f"{doc.display} is a managed workflow manifest (schema_version: {data.get('schema_version')!r}), "
            "generated by the Python SDK (tau.train / tau.serve); tau run validate checks direct run configs only",
            hint="validate the Python source that generates it (tau python ...), or write a direct config "
            "with engine: job|rayjob (see tau run explain-config)",
        )
    warnings: list[ConfigIssue] = []
    pre = _prenormalize(data, doc, warnings)
    from tau_core.config.structure import pruned, schema_accepts, schema_errors

    structural: list[ConfigIssue] = []
    validator = compiled_validator()
    try:
        validator(pre)
    except schema_errors() as exc:
        walker = Walker(doc)
        structural = walker.walk(pre)
        if not structural:  # the gate and the walker come from one catalog; keep the gate's verdict anyway
            raise ConfigValidationError([doc.issue((), "", f"schema violation: {exc}")], warnings) from None
        # keep checking what is structurally sound, so every problem is reported in one pass
        pre = pruned(pre, walker.prune)
        if not schema_accepts(pre):
            raise ConfigValidationError(structural, warnings) from None
    if "schema_version" in pre:
        warnings.append(doc.issue(("schema_version",), "schema_version",
                                  "schema_version is reserved for SDK-generated managed manifests and is ignored "
                                  "in a direct config", severity="warning"))

    values, origins, alias_issues = _resolve_aliases(pre, doc, warnings)
    if name_override is not None:
        values["name"] = name_override
        origins.pop("name", None)
    engine, inferred = _infer_engine(values)
    ctx = rules.RuleContext(doc=doc, values=values, origins=origins, engine=engine, base_dir=base_dir,
                            check_files=check_files, name_from_flag=name_override is not None)
    ctx.issues.extend(alias_issues)
    rules.run_all(ctx)
    if not structural:  # rule warnings over a pruned document would describe values the user did write
        warnings.extend(ctx.warnings)
    issues = structural + ctx.issues
    if issues:
        issues.sort(key=lambda i: (i.line, i.column))
        raise ConfigValidationError(issues, warnings)
    normalized, sources = _normalize(values, origins, engine, name_override)
    return ValidatedConfig(normalized=normalized, engine=engine, name=normalized.get("name"), document=doc,
                           origins=origins, sources=sources, warnings=warnings, engine_inferred=inferred,
                           base_dir=base_dir)


Located = dict[str, tuple[Any, tuple[PathKey, ...]]]


def _leaves(data: dict[str, Any], prefix: str = "", path: tuple[PathKey, ...] = ()) -> Located:
    """Catalog leaf path -> (value, document path), for the catalog fields present in ``data``."""
    out: Located = {}
    for key, value in data.items():
        full = f"{prefix}.{key}" if prefix else key
        f = BY_PATH.get(full)
        if f is None:
            continue
        if f.type == "object" and full not in OPTIONAL_OBJECTS:
            out.update(_leaves(value, full, (*path, key)))
        else:
            out[full] = (value, (*path, key))
    return out


def _resolve_aliases(pre: dict[str, Any], doc: Document, warnings: list[ConfigIssue]) -> tuple[
        dict[str, Any], dict[str, tuple[PathKey, ...]], list[ConfigIssue]]:
    leaves = _leaves(pre)
    values: dict[str, Any] = {}
    origins: dict[str, tuple[PathKey, ...]] = {}
    issues: list[ConfigIssue] = []
    handled: set[str] = set()
    for canonical, order in PRECEDENCE.items():
        present = [(p, leaves[p]) for p in order if p in leaves]
        handled.update(order)
        if not present:
            continue
        winner_path, (winner, where) = present[0]
        values[canonical] = winner
        origins[canonical] = where
        for other_path, (other, other_where) in present[1:]:
            if other != winner:
                if canonical == "engine":
                    issues.append(doc.issue(other_where, other_path,
                                            f"{other_path}={other!r} conflicts with {winner_path}={winner!r}",
                                            "set the engine in one place"))
                else:
                    warnings.append(doc.issue(other_where, other_path,
                                              f"{other_path} is ignored because {winner_path} is also set "
                                              f"({winner_path} wins)", f"remove {other_path}",
                                              severity="warning"))
    for path, (value, where) in leaves.items():
        if path in handled:
            continue
        values[path] = value
        origins[path] = where
    return values, origins, issues


def workload_kind(values: dict[str, Any]) -> tuple[str | None, str | None]:
    for path in ("workflow.workload_kind", "run.workload_kind", "compute.workload_kind"):
        if values.get(path) is not None:
            return values[path], path
    return None, None


def _infer_engine(values: dict[str, Any]) -> tuple[str, bool]:
    """Engine inference (reference §1.14)."""
    engine = values.get("engine")
    if engine in (JOB, RAYJOB):
        return engine, False
    kind, _ = workload_kind(values)
    if kind in (JOB, RAYJOB):
        return kind, False
    workers = values.get("compute.workers")
    if isinstance(workers, (int, float)) and workers > 1:
        return RAYJOB, True
    if "compute.gpus_per_worker" in values or values.get("runtime.pip"):
        return RAYJOB, True
    return JOB, True


# -- normalization ---------------------------------------------------------------------------

def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _coerce(f: Field, value: Any) -> Any:
    if f.type == "integer" and isinstance(value, float):
        return int(value)
    if f.type == "quantity" and not isinstance(value, str):
        return _scalar_text(value)
    if f.type == "scalar_map":
        return {k: _scalar_text(v) for k, v in value.items()}
    if f.type in ("string_map", "map"):
        return copy.deepcopy(value)
    if f.type == "string_list":
        return list(value)
    if f.type == "object_list":
        keys = [x.path.rsplit(".", 1)[-1] for x in FIELDS if x.path.startswith(f.path + "[].")]
        return [{k: item.get(k) for k in keys} for item in value]
    if f.path in OPTIONAL_OBJECTS:
        return {k: value.get(k) for k in REQUIRED.get(f.path, ())}
    if f.path == "profiler.rank":
        return str(value)
    return value


def _default(f: Field, engine: str, values: dict[str, Any], name: str | None) -> Any:
    if engine not in f.engines or f.status == "workflow-only":
        return None
    p = f.path
    if p == "run.ttl_seconds_after_finished":
        return DEFAULT_JOB_TTL_SECONDS
    if p == "execution.launcher":
        return "python" if engine == JOB else "ray-train"
    if p == "policy.mode":
        return "elastic" if values.get("policy.lane") == "elastic" else "fixed"
    if p == "resilience.checkpoint_path":
        return f"/data/checkpoints/finetunes/{name}" if name else None
    launcher = values.get("execution.launcher")
    if p in ("execution.mode", "execution.num_samples", "execution.max_concurrent_trials"):
        if launcher != "ray-tune":
            return None
        return {"execution.mode": "min", "execution.num_samples": 1, "execution.max_concurrent_trials": 1}[p]
    if p == "profiler.duration":
        return "2m" if values.get("profiler.mode") == "nsys" else None
    if p == "profiler.rank":
        return "0" if values.get("profiler.mode") else None
    if p == "compute.gpu_resource_mode" and values.get("compute.mig_profile"):
        return "mig"
    if isinstance(f.default, list):
        return list(f.default)
    return f.default


#: Fields whose default depends on other values (computed per config).
_DYNAMIC_DEFAULTS = frozenset({
    "run.ttl_seconds_after_finished", "execution.launcher", "policy.mode", "resilience.checkpoint_path",
    "execution.mode", "execution.num_samples", "execution.max_concurrent_trials", "profiler.duration",
    "profiler.rank", "compute.gpu_resource_mode",
})


@cache
def _skeleton(engine: str) -> tuple[dict[str, Any], tuple[tuple[str, str], ...], tuple[Field, ...]]:
    """Per engine: the normalized dict of static defaults, their sources, and the dynamic fields."""
    skeleton: dict[str, Any] = {}
    static_sources: list[tuple[str, str]] = []
    dynamic: list[Field] = []
    for f in canonical_fields():
        if f.path == "engine":
            set_path(skeleton, "engine", engine)
            continue
        if f.path in _DYNAMIC_DEFAULTS:
            set_path(skeleton, f.path, None)
            dynamic.append(f)
            continue
        default = _default(f, engine, {}, None)
        set_path(skeleton, f.path, default)
        if default is not None:
            static_sources.append((f.path, SOURCE_DEFAULT))
    return skeleton, tuple(static_sources), tuple(dynamic)


def _copy_tree(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _copy_tree(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy_tree(v) for v in node]
    return node


def _copy_skeleton(node: dict[str, Any]) -> dict[str, Any]:
    return {k: (_copy_skeleton(v) if type(v) is dict else v[:] if type(v) is list else v)
            for k, v in node.items()}


def _normalize(values: dict[str, Any], origins: dict[str, tuple[PathKey, ...]], engine: str,
               name_override: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    skeleton, static_sources, dynamic = _skeleton(engine)
    normalized: dict[str, Any] = _copy_skeleton(skeleton)
    sources: dict[str, str] = dict(static_sources)
    sources["engine"] = SOURCE_CONFIG if "engine" in values else SOURCE_DEFAULT
    name = values.get("name")
    for f in dynamic:
        if f.path not in values:
            default = _default(f, engine, values, name)
            if default is not None:
                set_path(normalized, f.path, default)
                sources[f.path] = SOURCE_DEFAULT
    for p, value in values.items():
        given = BY_PATH.get(p)
        if given is None or p == "engine" or given.status == "reserved":
            continue
        set_path(normalized, p, _coerce(given, value))
        sources[p] = SOURCE_CONFIG
    if name_override is not None:
        sources["name"] = "flag"
    # the resolved experiment id: name -> id derived from title -> group
    exp = normalized["experiment"]
    if exp.get("name") is None:
        derived = _experiment_id(exp.get("title")) or exp.get("group")
        if derived:
            exp["name"] = derived
            sources["experiment.name"] = SOURCE_DEFAULT
    return normalized, sources


def _experiment_id(title: Any) -> str | None:
    if not isinstance(title, str):
        return None
    out = []
    for ch in title.strip().lower():
        out.append(ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "-")
    text = "-".join(filter(None, "".join(out).split("-")))
    return text[:63].strip("-._") or None
