"""Managed workflow manifests (``schema_version: 1``): the files the Python SDK writes.

A managed manifest is a first-class input of ``tau run``: it has its own field catalog
(:data:`MANAGED_FIELDS`, the same single-source approach as the direct config's catalog), its
own JSON Schema (:func:`build_managed_schema`) and validator (:func:`load_managed`), and it is
translated into a direct RayJob config (:func:`to_direct`) so that resolution, sources shown in
dry-run, the renderer hooks and the lifecycle verbs are exactly the direct path's.  What a
direct config cannot say (the staged module and wrapper, the upstream checkpoint, the manifest's
extra mounts and its secret payload) travels to the RayJob renderer as a :class:`ManagedPayload`
in the render context under :data:`CONTEXT_KEY`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from tau_core import keys
from tau_core.config.catalog import QUANTITY_PATTERN, Field
from tau_core.config.issues import ConfigIssue, ConfigValidationError, PathKey
from tau_core.config.loader import Document, require_mapping
from tau_core.config.reserved import RESERVED_MOUNT_PATHS
from tau_core.hashing import sha256_hex

SCHEMA_VERSION = 1
SCHEMA_ID = "https://taugrid.dev/schemas/tau-managed-workflow.schema.json"
CONTEXT_KEY = "managed"
DEFAULT_PREFIX = "tau"
USER_MODULE = "tau_user_module.py"
WRAPPER = "tau_py_wrapper.py"
MANIFEST_FILE = "tau_manifest.json"
SECRET_PAYLOAD = "tau-job-secrets.json"
KINDS = ("rayjob", "rayjob-eval")
RESERVED_KEYS = ("schema_version", "name", "compute", "eval", "entrypoint")
RESERVED_MOUNT_NAMES = ("script", "manifest", "data", "tau-hot", "dshm")
UPSTREAM_ENV = "TAU_UPSTREAM_CHECKPOINT"
STELLAR_HISTORY = keys.STELLAR_HISTORY_GLOB
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _f(path: str, type: str, description: str, **kw: Any) -> Field:
    return Field(path, type, description, **kw)


#: Every field of a ``schema_version: 1`` manifest.  Schema, docs and validation come from here.
MANAGED_FIELDS: tuple[Field, ...] = (
    _f("schema_version", "integer", "Manifest format version; must be 1.", minimum=1, maximum=1),
    _f("name", "string", "Workflow name (DNS label); the workload is named <resource_naming.prefix>-<name>."),
    _f("workload_kind", "string", "rayjob (train) or rayjob-eval (one GPU head actor plus CPU workers).",
       values=KINDS, default="rayjob"),
    _f("compute", "object", "GPUs, workers and pod sizing."),
    _f("compute.gpus", "integer", "GPUs per worker (0 for a CPU RayJob).", minimum=0, maximum=8, default=1),
    _f("compute.workers", "integer", "Worker pods (0 means 1).", minimum=0, default=1),
    _f("compute.gpu_resource_mode", "string", "How GPUs are requested.", values=("device-plugin", "mig")),
    *(_f(f"compute.{k}", "quantity", f"{k.replace('_', ' ')} of the pods.")
      for k in ("cpus", "cpu_limit", "memory", "memory_limit", "worker_cpus", "worker_cpu_limit",
                "worker_memory", "worker_memory_limit")),
    _f("eval", "object", "Eval settings; an empty mapping on a train manifest."),
    _f("eval.cpu_workers", "integer", "CPU workers of an eval workload.", minimum=0),
    _f("eval.upstream", "string", "Name of the upstream train workflow."),
    _f("run", "object", "Generated run settings."),
    _f("run.workload_kind", "string", "Same as workload_kind (generated at submit).", values=KINDS),
    _f("run.smoke_pairs", "integer", "Smoke pair count forwarded to the function.", minimum=0),
    _f("runtime", "object", "Per-pod Python environment and variables."),
    _f("runtime.pip", "string_list", "pip requirements of every pod (required; tau ships no default)."),
    _f("runtime.image", "string", "Container image."),
    _f("runtime.env", "object_list", "Literal environment variables as a list of {name, value}."),
    _f("runtime.env[].name", "string", "Variable name."),
    _f("runtime.env[].value", "string", "Variable value."),
    _f("runtime.env_secret", "string_map", "Variables from existing Secrets: NAME: \"SECRET:KEY\"."),
    _f("storage", "object", "The data PVC and extra read-only mounts (model caches)."),
    _f("storage.data_pvc", "string", "Existing PVC mounted at /data."),
    _f("storage.mounts", "object_list", "Extra PVC mounts."),
    _f("storage.mounts[].name", "string", "Volume name (DNS label)."),
    _f("storage.mounts[].mountPath", "string", "Absolute mount path."),
    _f("storage.mounts[].pvc", "string", "PVC claim name."),
    _f("storage.mounts[].readOnly", "boolean", "Mount read-only (default true)."),
    _f("artifacts", "object", "Declared artifacts."),
    _f("artifacts.checkpoint", "string", "Checkpoint file, relative to the run's artifacts directory."),
    _f("research", "object", "Research metadata."),
    _f("research.experiment", "string", "Experiment the run belongs to."),
    _f("model", "object", "Model metadata."),
    *(_f(f"model.{k}", "string", f"Model {k.replace('_', ' ')}.") for k in ("name", "base", "task",
                                                                            "primary_metric")),
    _f("model.tags", "string_list", "Model tags."),
    _f("model.metric_direction", "string", "Whether lower or higher primary_metric is better.",
       values=("lower", "higher")),
    _f("resource_naming", "object", "Kubernetes object naming."),
    _f("resource_naming.prefix", "string", "Prefix of every object name.", default=DEFAULT_PREFIX),
    _f("entrypoint", "object", "The Python function the wrapper calls."),
    _f("entrypoint.script", "string", "Module file (relative to the manifest; staged as tau_user_module.py)."),
    _f("entrypoint.function", "string", "Function name.", default="main"),
    _f("entrypoint.args", "any", "Positional arguments (JSON)."),
    _f("entrypoint.kwargs", "any", "Keyword arguments (JSON)."),
    _f("entrypoint.pass_ctx", "boolean", "Pass a tau.Ctx as the first argument.", default=True),
    _f("policy", "object", "Placement and accounting."),
    *(_f(f"policy.{k}", "string", f"Policy {k.replace('_', ' ')}.") for k in ("namespace", "team", "preset",
                                                                              "lane", "queue", "gpu_class")),
    _f("policy.node_selector", "string_map", "Extra node selectors."),
    _f("policy.disable_default_priorities", "boolean", "Omit the default priority classes."),
    _f("workflow", "object", "Generated workflow wiring."),
    _f("workflow.extra_scripts", "string_list", "Extra files staged next to the module (SRC[:DEST])."),
    _f("workflow.secret_payload", "string", "Secret payload file (0600 JSON {name, stringData}); never inlined."),
    _f("workflow.upstream_checkpoint", "string", "Absolute in-pod path of the upstream checkpoint (eval)."),
    _f("profiler", "object", "Bounded profiling."),
    _f("profiler.mode", "string", "Profiler.", values=("nsys",)),
    _f("profiler.rank", "string_or_integer", "Rank(s) to profile: 0, \"0,8\" or all."),
    _f("profiler.warmup", "string", "Delay before capture."),
    _f("profiler.duration", "string", "Capture duration."),
)
REQUIRED: dict[str, tuple[str, ...]] = {"": ("schema_version", "name"), "runtime.env[]": ("name",),
                                        "storage.mounts[]": ("name", "mountPath", "pvc")}
_BY_PATH = {f.path: f for f in MANAGED_FIELDS}


def _children(prefix: str) -> list[Field]:
    depth = prefix.count(".") + 1 if prefix else 0
    return [f for f in MANAGED_FIELDS
            if (f.path.startswith(prefix + ".") if prefix else True) and f.path.count(".") == depth]


def _node(f: Field) -> dict[str, Any]:
    from tau_core.config.schema import _annotate, _leaf

    if f.type == "object":
        s = _object(f.path)
    elif f.type == "object_list":
        s = {"type": "array", "items": _object(f.path + "[]")}
    elif f.type == "quantity":
        s = {"type": ["string", "number"], "pattern": QUANTITY_PATTERN}
    else:
        s = _leaf(f)
    return _annotate(s, f)


def _object(prefix: str) -> dict[str, Any]:
    props = {f.path.rsplit(".", 1)[-1]: _node(f) for f in _children(prefix)}
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if prefix in REQUIRED:
        out["required"] = list(REQUIRED[prefix])
    return out


def build_managed_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a managed workflow manifest."""
    from tau_core.config.schema import DRAFT

    return {"$schema": DRAFT, "$id": SCHEMA_ID, "title": "Tau managed workflow manifest",
            "description": "schema_version: 1 files written by the Python SDK (tau.train / tau.eval) and read "
            "by tau run. Unknown keys are reported as warnings and ignored.",
            **_object(""), "x-tau-field-count": len(MANAGED_FIELDS)}


@cache
def _permissive_validator() -> Any:
    import fastjsonschema

    def relax(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: relax(v) for k, v in node.items() if k != "additionalProperties"}
        if isinstance(node, list):
            return [relax(v) for v in node]
        return node

    schema = relax(build_managed_schema())
    schema.pop("$schema", None)
    return fastjsonschema.compile(schema)


# -- the typed model ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Mount:
    name: str
    mount_path: str
    pvc: str
    read_only: bool = True


@dataclass(frozen=True)
class Entrypoint:
    script: str | None
    function: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    pass_ctx: bool = True


@dataclass(frozen=True)
class ManagedManifest:
    """A validated managed manifest (only what rendering needs; the raw mapping is kept too)."""

    name: str
    kind: str
    prefix: str
    gpus: int
    workers: int
    cpu_workers: int
    upstream: str | None
    pip: tuple[str, ...]
    image: str | None
    env: tuple[tuple[str, str], ...]
    data_pvc: str | None
    mounts: tuple[Mount, ...]
    checkpoint: str | None
    entrypoint: Entrypoint
    extra_scripts: tuple[str, ...]
    secret_payload: str | None
    upstream_checkpoint: str | None
    smoke_pairs: int
    raw: Mapping[str, Any]

    @property
    def resource_name(self) -> str:
        return f"{self.prefix}-{self.name}" if self.prefix else self.name


@dataclass(frozen=True)
class ManagedPayload:
    """What the RayJob renderer adds for a managed manifest (render context key ``managed``)."""

    files: Mapping[str, bytes]
    entry: str
    env: tuple[tuple[str, str], ...]
    mounts: tuple[Mount, ...]
    secret_name: str | None
    secret_data: Mapping[str, str]
    kind: str
    cpu_workers: int
    gpus: int
    manifest_digest: str


def _issue(doc: Document, path: Sequence[PathKey], message: str, hint: str | None = None) -> ConfigIssue:
    return doc.issue(tuple(path), ".".join(str(p) for p in path), message, hint)


def _unknown_keys(data: Any, prefix: str, doc: Document, path: tuple[PathKey, ...], out: list[ConfigIssue]) -> None:
    if not isinstance(data, dict):
        return
    for key, value in data.items():
        full = f"{prefix}.{key}" if prefix else str(key)
        f = _BY_PATH.get(full)
        if f is None:
            if prefix in ("eval", "artifacts", "research", "model", "resource_naming"):
                continue  # manifest-owned pass-through keys never warn
            out.append(doc.issue((*path, key), full, f'unknown config key "{full}" in {doc.display} (ignored)'
                                 + _suggest(full), severity="warning"))
            continue
        if f.type == "object":
            _unknown_keys(value, full, doc, (*path, key), out)
        elif f.type == "object_list" and isinstance(value, list):
            for i, item in enumerate(value):
                _unknown_keys(item, full + "[]", doc, (*path, key, i), out)


def _suggest(path: str) -> str:
    """``; did you mean "<path>"?`` for a close known key at the same level (or an empty string)."""
    import difflib

    parent, _, leaf = path.rpartition(".")
    siblings = {f.path.rsplit(".", 1)[-1]: f.path for f in _children(parent)}
    close = difflib.get_close_matches(leaf, list(siblings), n=1, cutoff=0.75)
    if not close:  # a known leaf under another parent (compute.gpu -> compute.gpus, scheduling.queue -> policy)
        leaves = {f.path.rsplit(".", 1)[-1].removesuffix("[]"): f.path for f in MANAGED_FIELDS}
        close_any = difflib.get_close_matches(leaf, list(leaves), n=1, cutoff=0.85)
        return f'; did you mean "{leaves[close_any[0]]}"?' if close_any else ""
    return f'; did you mean "{siblings[close[0]]}"?'


def load_managed(doc: Document) -> tuple[ManagedManifest, list[ConfigIssue]]:
    """Validate ``doc`` as a managed manifest; raise :class:`ConfigValidationError` listing every problem."""
    import fastjsonschema

    data = require_mapping(doc, "managed workflow manifest")
    warnings: list[ConfigIssue] = []
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ConfigValidationError([_issue(doc, ("schema_version",),
                                            f"want {SCHEMA_VERSION}, got {data.get('schema_version')!r}",
                                            "regenerate the manifest with this tau (tau python build)")])
    try:
        _permissive_validator()(json.loads(json.dumps(data, default=str)))  # it fills defaults in: use a copy
    except fastjsonschema.JsonSchemaValueException as exc:
        where = tuple(p for p in exc.path[1:])
        message = exc.message.replace("data.", "").replace("data ", "")
        raise ConfigValidationError([_issue(doc, where, f"{message} (managed workflow manifest schema)",
                                            "see tau run schema --managed")]) from None
    _unknown_keys(data, "", doc, (), warnings)
    issues: list[ConfigIssue] = []
    manifest = _build(data, doc, issues)
    if issues or manifest is None:
        raise ConfigValidationError(issues, warnings)
    return manifest, warnings


def _g(data: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or node.get(part) is None:
            return default
        node = node[part]
    return node


def _build(data: Mapping[str, Any], doc: Document, issues: list[ConfigIssue]) -> ManagedManifest | None:
    name = str(data.get("name") or "")
    prefix = str(_g(data, "resource_naming.prefix", DEFAULT_PREFIX))
    if not _DNS_LABEL.match(name):
        issues.append(_issue(doc, ("name",), f"name {name!r} must be a DNS label (a-z, 0-9 and -)"))
    if prefix and not _DNS_LABEL.match(prefix):
        issues.append(_issue(doc, ("resource_naming", "prefix"), f"resource_naming.prefix {prefix!r} must be a DNS "
                                                                 "label"))
    kind = str(_g(data, "run.workload_kind") or data.get("workload_kind") or "")
    if not kind:
        kind = "rayjob-eval" if _g(data, "eval.upstream") or _g(data, "eval.cpu_workers") else "rayjob"
    gpus = int(_g(data, "compute.gpus", 1))
    workers = max(1, int(_g(data, "compute.workers", 1)))
    cpu_workers = int(_g(data, "eval.cpu_workers", 0))
    if kind == "rayjob-eval":
        if gpus < 1:
            issues.append(_issue(doc, ("compute", "gpus"), "@tau.eval gpus must be >= 1"))
        if cpu_workers < 1:
            issues.append(_issue(doc, ("eval", "cpu_workers"), "eval.cpu_workers must be >= 1 for rayjob-eval",
                                 "use a train manifest (workload_kind: rayjob) for GPU-only work"))
    elif gpus == 0 and (cpu_workers or _g(data, "eval.upstream")):
        issues.append(_issue(doc, ("compute", "gpus"), "compute.gpus: 0 cannot be combined with eval fields"))
    pip = [str(p) for p in (_g(data, "runtime.pip") or []) if str(p).strip()]
    if not pip:
        issues.append(_issue(doc, ("runtime", "pip"), "required (declare the per-pod Python "
                                                      "environment your trainer needs; tau ships no default)",
                             "add runtime_pip=[...] to the decorator, or runtime.pip: [...] to the manifest"))
    env = _env(data, doc, issues)
    mounts = _mounts(data, doc, issues)
    entry = _entrypoint(data, doc, issues)
    upstream_ckpt = _g(data, "workflow.upstream_checkpoint")
    if upstream_ckpt is not None and not str(upstream_ckpt).startswith("/"):
        issues.append(_issue(doc, ("workflow", "upstream_checkpoint"), "workflow.upstream_checkpoint must be an "
                             "absolute in-pod path", "for example /data/checkpoints/finetunes/<train>/artifacts/"
                             "<checkpoint>"))
    if issues:
        return None
    return ManagedManifest(
        name=name, kind=kind, prefix=prefix, gpus=gpus, workers=workers, cpu_workers=cpu_workers,
        upstream=_g(data, "eval.upstream"), pip=tuple(pip), image=_g(data, "runtime.image"), env=env,
        data_pvc=_g(data, "storage.data_pvc"), mounts=mounts, checkpoint=_g(data, "artifacts.checkpoint"),
        entrypoint=entry, extra_scripts=tuple(_g(data, "workflow.extra_scripts") or ()),
        secret_payload=_g(data, "workflow.secret_payload"), upstream_checkpoint=upstream_ckpt,
        smoke_pairs=int(_g(data, "run.smoke_pairs", 0)), raw=data)


def _env(data: Mapping[str, Any], doc: Document, issues: list[ConfigIssue]) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for i, item in enumerate(_g(data, "runtime.env") or []):
        name = str(item.get("name", ""))
        if not _ENV_NAME.match(name):
            issues.append(_issue(doc, ("runtime", "env", i, "name"), f"runtime.env name {name!r} is not a valid "
                                                                     "variable name"))
        elif name.upper().startswith("TAU_"):
            issues.append(_issue(doc, ("runtime", "env", i, "name"), f"runtime.env {name} is reserved: Tau owns the "
                                 "TAU_ namespace", "rename the variable"))
        out.append((name, "" if item.get("value") is None else str(item["value"])))
    return tuple(out)


def _mounts(data: Mapping[str, Any], doc: Document, issues: list[ConfigIssue]) -> tuple[Mount, ...]:
    out: list[Mount] = []
    for i, item in enumerate(_g(data, "storage.mounts") or []):
        at = ("storage", "mounts", i)
        mount = Mount(str(item["name"]), str(item["mountPath"]), str(item["pvc"]), bool(item.get("readOnly", True)))
        if mount.name in RESERVED_MOUNT_NAMES or not _DNS_LABEL.match(mount.name):
            issues.append(_issue(doc, (*at, "name"), f"storage.mounts name {mount.name!r} is reserved or not a DNS "
                                 "label", f"reserved names: {', '.join(RESERVED_MOUNT_NAMES)}"))
        path = mount.mount_path.rstrip("/") or "/"
        if not path.startswith("/") or any(path == p or path.startswith(p + "/") for p in RESERVED_MOUNT_PATHS):
            issues.append(_issue(doc, (*at, "mountPath"), f"storage.mounts mountPath {mount.mount_path!r} must be "
                                 "absolute and outside " + ", ".join(RESERVED_MOUNT_PATHS)))
        out.append(mount)
    return tuple(out)


def _entrypoint(data: Mapping[str, Any], doc: Document, issues: list[ConfigIssue]) -> Entrypoint:
    ep = data.get("entrypoint") or {}
    kwargs = ep.get("kwargs") or {}
    args = ep.get("args") or []
    if not isinstance(kwargs, dict):
        issues.append(_issue(doc, ("entrypoint", "kwargs"), "entrypoint.kwargs must be a mapping"))
        kwargs = {}
    if not isinstance(args, list):
        issues.append(_issue(doc, ("entrypoint", "args"), "entrypoint.args must be a list"))
        args = []
    function = str(ep.get("function") or "main")
    if not function.isidentifier():
        issues.append(_issue(doc, ("entrypoint", "function"), f"entrypoint.function {function!r} is not a Python "
                                                              "identifier"))
    return Entrypoint(ep.get("script"), function, tuple(args), kwargs, bool(ep.get("pass_ctx", True)))


# -- translation to the direct path --------------------------------------------------------------

def to_direct(m: ManagedManifest) -> dict[str, Any]:
    """The direct RayJob config a managed manifest renders as (validated by the direct pipeline)."""
    raw = m.raw
    policy = {k: _g(raw, f"policy.{k}") for k in ("namespace", "team", "lane", "queue", "gpu_class",
                                                  "node_selector", "disable_default_priorities")}
    if policy["lane"] is None and m.kind == "rayjob-eval":
        policy["lane"] = "eval"
    if _g(raw, "policy.preset"):
        policy["profile"] = _g(raw, "policy.preset")
    compute: dict[str, Any] = {"workers": m.cpu_workers if m.kind == "rayjob-eval" else m.workers,
                               "gpus_per_worker": 0 if m.kind == "rayjob-eval" else m.gpus}
    sizing = {"cpus": "cpu_request", "cpu_limit": "cpu_limit", "memory": "memory_request",
              "memory_limit": "memory_limit", "worker_cpus": "worker_cpu_request",
              "worker_cpu_limit": "worker_cpu_limit", "worker_memory": "worker_memory_request",
              "worker_memory_limit": "worker_memory_limit"}
    for src, dst in sizing.items():
        value = _g(raw, f"compute.{src}")
        if value is not None:
            compute[dst] = str(value)
    if m.gpus == 0 and m.kind == "rayjob":  # CPU mode defaults
        compute.setdefault("cpu_request", "1")
        compute.setdefault("memory_request", "2Gi")
        compute.setdefault("worker_memory_request", compute.get("memory_request", "4Gi"))
    if _g(raw, "compute.gpu_resource_mode"):
        compute["gpu_resource_mode"] = _g(raw, "compute.gpu_resource_mode")
    out: dict[str, Any] = {
        "name": m.resource_name, "engine": "rayjob", "entrypoint": WRAPPER,
        "runtime": {"pip": list(m.pip), **({"image": m.image} if m.image else {}),
                    **({"env": dict(m.env)} if m.env else {}),
                    **({"env_secret": dict(_g(raw, "runtime.env_secret"))} if _g(raw, "runtime.env_secret") else {})},
        "compute": compute,
        "policy": {k: v for k, v in policy.items() if v is not None},
    }
    storage: dict[str, Any] = {}
    if m.data_pvc:
        storage["data_pvc"] = m.data_pvc
        storage["output"] = f"/data/checkpoints/finetunes/{m.name}"
        out["metrics"] = {"history": [STELLAR_HISTORY]}  # the chunks tau.stellar writes inside the job
    if m.checkpoint and m.data_pvc:  # the checkpoint gate needs the durable output on the data PVC
        storage["checkpoint"] = f"artifacts/{m.checkpoint}"
    if storage:
        out["storage"] = storage
    experiment = _g(raw, "research.experiment")
    if experiment:
        out["experiment"] = {"name": str(experiment)}
    prof = raw.get("profiler") if isinstance(raw.get("profiler"), Mapping) else None
    if prof and prof.get("mode"):
        out["profiler"] = {k: str(v) for k, v in prof.items() if v is not None}
    return out


def wrapper_source() -> bytes:
    """``tau_py_wrapper.py``: loads the staged module and calls the function with a Ctx (no tau needed)."""
    from tau_core.config._managed_wrapper import WRAPPER

    return WRAPPER.encode("utf-8")


def payload(m: ManagedManifest, base_dir: Path, *, display: str) -> ManagedPayload:
    """Read the staged files next to the manifest and build the renderer's payload."""

    from tau_core.errors import ConfigError

    files: dict[str, bytes] = {WRAPPER: wrapper_source()}
    script = m.entrypoint.script
    if script:
        path = Path(script)
        if path.is_absolute() and not path.exists():
            pass  # an absolute path missing here is a path inside the pod: the wrapper imports it there
        else:
            local = _inside(base_dir, path, display, "entrypoint.script")
            if not local.is_file():
                raise ConfigError(f"{display}: entrypoint.script {script!r} not found ({local})",
                                  hint="entrypoint.script is relative to the manifest's directory")
            files[USER_MODULE] = local.read_bytes()
    for spec in m.extra_scripts:
        src, _, dest = spec.partition(":")
        local = _inside(base_dir, Path(src), display, "workflow.extra_scripts")
        if not local.is_file():
            raise ConfigError(f"{display}: workflow.extra_scripts {src!r} not found ({local})")
        target = dest or local.name
        if "/" in target or target in (WRAPPER, USER_MODULE, MANIFEST_FILE) or target.startswith("."):
            raise ConfigError(f"{display}: workflow.extra_scripts destination {target!r} is not a plain file name "
                              "or collides with a staged file")
        files[target] = local.read_bytes()
    manifest_doc = redacted_manifest(m)
    files[MANIFEST_FILE] = manifest_doc
    secret_name, secret_data = _secrets(m, base_dir, display)
    env = [("TAU_MANAGED_KIND", m.kind), ("TAU_MANAGED_NAME", m.name)]
    if m.upstream_checkpoint:
        env.append((UPSTREAM_ENV, m.upstream_checkpoint))
    return ManagedPayload(files=files, entry=WRAPPER, env=tuple(env), mounts=m.mounts, secret_name=secret_name,
                          secret_data=secret_data, kind=m.kind, cpu_workers=m.cpu_workers, gpus=m.gpus,
                          manifest_digest=sha256_hex(manifest_doc))


def redacted_manifest(m: ManagedManifest) -> bytes:
    """The manifest the wrapper reads in the pod (canonical JSON; the secret payload path is dropped)."""
    data = json.loads(json.dumps(m.raw, default=str))
    (data.get("workflow") or {}).pop("secret_payload", None)
    data.setdefault("entrypoint", {})["script"] = USER_MODULE if m.entrypoint.script and \
        not (Path(m.entrypoint.script).is_absolute() and not Path(m.entrypoint.script).exists()) \
        else m.entrypoint.script
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def _inside(base_dir: Path, path: Path, display: str, field: str) -> Path:
    from tau_core.errors import ConfigError

    local = (path if path.is_absolute() else base_dir / path).resolve()
    root = base_dir.resolve()
    from tau_core.config.targets import git_root

    repo = git_root(root) or (root.parent if root.name == "tau" else root)  # the local backend's project rule
    if not (local == repo or repo in local.parents):
        raise ConfigError(f"{display}: {field} {str(path)!r} is outside the repository ({repo})",
                          hint="keep the module inside the repository, or use an absolute path that exists only "
                               "in the image")
    return local


def _secrets(m: ManagedManifest, base_dir: Path, display: str) -> tuple[str | None, dict[str, str]]:
    from tau_core.errors import ConfigError

    if not m.secret_payload:
        return None, {}
    path = Path(m.secret_payload)
    path = path if path.is_absolute() else base_dir / path
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{display}: workflow.secret_payload {m.secret_payload!r} is unreadable: {exc}",
                          hint="the SDK writes it next to the manifest at submit (mode 0600)") from None
    data = doc.get("stringData") if isinstance(doc, dict) else None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise ConfigError(f"{display}: workflow.secret_payload must be JSON {{name, stringData: {{KEY: value}}}}")
    for key in data:
        if not _ENV_NAME.match(key) or key.upper().startswith("TAU_"):
            raise ConfigError(f"{display}: secret {key!r} is not a valid, non-TAU_ variable name")
    return f"{m.resource_name}-secrets", dict(sorted(data.items()))




def validate_managed(doc: Document, *, name_override: str | None = None, base_dir: Path | None = None) -> Any:
    """A managed manifest as a :class:`tau_core.config.validate.ValidatedConfig` of its direct RayJob.

    The payload for the renderer is kept in ``validated.document.extra["managed"]``.
    """
    from tau_core.config.validate import validate_document
    from tau_core.errors import ConfigError

    if name_override is not None:
        raise ConfigError("managed workflow configs take the run name from the config file; remove positional NAME",
                          hint=f"{doc.display} names the run (name:)")
    manifest, warnings = load_managed(doc)
    base = base_dir or (doc.path.resolve().parent if doc.path else Path.cwd())
    direct = to_direct(manifest)
    synthetic = Document(display=doc.display, data=direct, path=doc.path,
                         extra={CONTEXT_KEY: payload(manifest, base, display=doc.display), "manifest": manifest})
    validated = validate_document(synthetic, base_dir=base, check_files=False)
    validated.warnings[:0] = warnings
    if doc.text:  # a managed manifest's config hash is the SHA-256 of the file's bytes
        validated._hash = sha256_hex(doc.text)
    return validated
