"""Cross-field rules of the direct run config (reference §1), applied after the schema passes.

Each rule reads the alias-resolved values (canonical dotted path -> value, only what the
user set) and reports problems at the position of the key the user actually wrote.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tau_core.config.catalog import BY_PATH, GPU_CLASSES, JOB, RAYJOB, RETRY_REASONS
from tau_core.config.issues import ConfigIssue, PathKey
from tau_core.config.loader import Document
from tau_core.config.reserved import (
    MAX_LITERAL_ENV_TOTAL_BYTES,
    MAX_LITERAL_ENV_VALUE_BYTES,
    RAY_TRAIN_SECTIONS,
    RAYJOB_NAME_MAX,
    RESERVED_ENV,
    RESERVED_PATHS,
    RESERVED_VOLUMES,
    SETTABLE_TAU_ENV,
    TORCHRUN_MANAGED_FLAGS,
)


class _Lazy:
    """A regular expression compiled on first use (most rules never run for a given config)."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._compiled: re.Pattern[str] | None = None

    def _get(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern)
        return self._compiled

    def match(self, text: str) -> re.Match[str] | None:
        return self._get().match(text)

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self._get().fullmatch(text)

    def search(self, text: str) -> re.Match[str] | None:
        return self._get().search(text)


DNS1123_LABEL = _Lazy(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = _Lazy(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = _Lazy(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = _Lazy(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
ENV_NAME = _Lazy(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
SECRET_KEY = _Lazy(r"^[-._a-zA-Z0-9]+$")
PINNED_IMAGE = _Lazy(
    r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127})?@sha256:[0-9a-f]{64}$"
)
TELEMETRY_ID = _Lazy(r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")
SHAPE = _Lazy(r"^([0-9]+)x([a-z0-9][-a-z0-9]*)$")
CONFIG_KEY = _Lazy(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

MAX_ENV_VALUE_BYTES = MAX_LITERAL_ENV_VALUE_BYTES
MAX_ENV_TOTAL_BYTES = MAX_LITERAL_ENV_TOTAL_BYTES
MAX_IMAGE_ASSETS = 8
_PINNED_MESSAGE = "must be a complete lowercase OCI image reference pinned by an @sha256:<64 lowercase hex> digest"
_PINNED_HINT = "resolve the digest once (docker buildx imagetools inspect) and write <repo>@sha256:<digest>"


@dataclass
class RuleContext:
    doc: Document
    values: dict[str, Any]
    origins: dict[str, tuple[PathKey, ...]]
    engine: str
    base_dir: Path | None = None
    check_files: bool = True
    name_from_flag: bool = False
    issues: list[ConfigIssue] = field(default_factory=list)
    warnings: list[ConfigIssue] = field(default_factory=list)

    def get(self, path: str, default: Any = None) -> Any:
        return self.values.get(path, default)

    def has(self, path: str) -> bool:
        return path in self.values

    def where(self, path: str) -> tuple[PathKey, ...]:
        if path in self.origins:
            return self.origins[path]
        head = path.split(".")[0]
        for canonical, origin in self.origins.items():
            if path.startswith(canonical + "."):
                rest = path[len(canonical) + 1:]
                return (*origin, *rest.split("."))
        return tuple(path.split(".")) if head else ()

    def shown(self, path: str) -> str:
        where = self.where(path)
        out = ""
        for part in where:
            out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
        return out or path

    def error(self, path: str, message: str, hint: str | None = None, *, at: tuple[PathKey, ...] | None = None,
              shown: str | None = None) -> None:
        from tau_core.config.catalog import hint_for

        where = at if at is not None else self.where(path)
        self.issues.append(self.doc.issue(where, shown or self.shown(path), message, hint or hint_for(shown or path)))

    def warn(self, path: str, message: str, hint: str | None = None) -> None:
        self.warnings.append(self.doc.issue(self.where(path), self.shown(path), message, hint, severity="warning"))


Rule = Callable[[RuleContext], None]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def run_all(ctx: RuleContext) -> None:
    for fn in RULES:
        fn(ctx)


# -- helpers ----------------------------------------------------------------------------------

def clean_absolute(value: str) -> bool:
    return (
        value == value.strip() and value.startswith("/") and not value.startswith("//") and "\\" not in value
        and "\x00" not in value and posixpath.normpath(value) == value
    )


def under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def overlaps(a: str, b: str) -> bool:
    return under(a, b) or under(b, a)


def pinned(image: str) -> bool:
    return bool(PINNED_IMAGE.match(image))


def intent(ctx: RuleContext) -> str:
    from tau_core.config.validate import workload_kind

    kind, _ = workload_kind(ctx.values)
    if ctx.has("engine") and kind:
        return f"engine={ctx.get('engine')}/workload_kind={kind}"
    if ctx.has("engine"):
        return f"engine={ctx.get('engine')}"
    if kind:
        return f"workload_kind={kind}"
    return f"implicit dispatch (engine {ctx.engine})"


def has_pvc(ctx: RuleContext) -> bool:
    return bool(ctx.get("storage.data_pvc") or ctx.get("storage.result_pvc") or ctx.get("storage.volumes"))


def mount_roots(ctx: RuleContext) -> list[str]:
    roots = []
    if ctx.get("storage.data_pvc") or ctx.get("storage.result_pvc"):
        roots.append("/data")
    volumes = ctx.get("storage.volumes") or []
    mounts = ctx.get("storage.mounts") or []
    if volumes and not mounts:
        roots.append("/data")
    for spec in mounts:
        parts = spec.split(":")
        if len(parts) >= 2 and parts[1].startswith("/") and (len(parts) < 3 or parts[2] != "ro"):
            roots.append(parts[1])
    return roots


# -- identity ----------------------------------------------------------------------------------

@rule
def name_rules(ctx: RuleContext) -> None:
    name = ctx.get("name")
    if name is None:
        ctx.error("name", "a run needs a name", "set name: in the config, or pass NAME on the command line",
                  at=())
        return
    where = "the NAME argument" if ctx.name_from_flag else "name"
    if len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        ctx.error("name", f"{where} {name!r} is not a valid Kubernetes name (DNS-1123: lowercase letters, digits, "
                  "'-' and '.', starting and ending with a letter or digit)", "for example: train-resnet-01")
        return
    if ctx.engine == RAYJOB:
        if not DNS1123_LABEL.match(name):
            ctx.error("name", f"RayJob name {name!r} must be a DNS-1123 label (no dots)", "use '-' instead of '.'")
        elif len(name) > RAYJOB_NAME_MAX:
            ctx.error("name", f"RayJob name {name!r} is too long ({len(name)} characters; the KubeRay limit is "
                      f"{RAYJOB_NAME_MAX})", "shorten the name")
    nodes = ctx.get("execution.nodes", 1)
    if ctx.engine == JOB and nodes > 1 and len(name) + len("-headless") > 63:
        ctx.error("name", f"multi-node Job name {name!r} is too long: {name}-headless must fit in 63 characters",
                  "shorten the name")


@rule
def engine_rules(ctx: RuleContext) -> None:
    from tau_core.config.validate import workload_kind

    kind, kind_path = workload_kind(ctx.values)
    if kind and kind_path and ctx.has("engine") and kind != ctx.get("engine"):
        ctx.error(kind_path, f"engine={ctx.get('engine')} conflicts with workload_kind={kind}",
                  "set the engine in one place")


@rule
def engine_matrix(ctx: RuleContext) -> None:
    """Job-only and RayJob-only fields (reference §1.18)."""
    engine = ctx.engine
    for path, value in ctx.values.items():
        f = BY_PATH.get(path)
        if f is None or engine in f.engines:
            continue
        if path == "compute.workers" and value == 1:
            continue
        if path == "execution.nodes" and value == 1:
            continue
        hint = f"switch to engine: {f.engines[0]} or remove {ctx.shown(path)}"
        message = f"{intent(ctx)} cannot set {path}"
        if path == "compute.gpus":
            message = "compute.gpus is only supported for engine: job"
            hint = "use compute.gpus_per_worker for a RayJob"
        elif path == "compute.gpus_per_worker":
            hint = "use compute.gpus for a direct Job, or switch to engine: rayjob"
        elif path == "compute.workers":
            message = f"{intent(ctx)} cannot set compute.workers={value}"
            hint = "use engine: rayjob, or remove compute.workers"
        elif path.startswith(("compute.head_", "compute.worker_")):
            hint = "Jobs are single-pod: use compute.cpu_request, cpu_limit, memory_request and memory_limit"
        elif path == "execution.nodes":
            message = "execution.nodes is for engine: job"
            hint = "use compute.workers for the RayJob pod count"
        elif path == "runtime.pip":
            hint = "use engine: rayjob, or bake dependencies into the image"
        elif path in ("storage.volumes", "storage.mounts"):
            message = "RayJob configs support storage.data_pvc and storage.output, but not storage.volumes/mounts"
            hint = "mount the claim with storage.data_pvc"
        elif path == "run.working_dir":
            message = "run.working_dir is not supported with engine: job (it ships a project to Ray's runtime_env)"
            hint = "use run.source for an immutable source image, or runtime.working_dir for the container's " \
                   "working directory"
        elif path == "policy.clear_node_selector":
            message = "policy.clear_node_selector requires engine: job; RayJobs cannot clear generated node selectors"
        ctx.error(path, message, hint)
    if not ctx.get("workflow.file"):
        if ctx.has("runtime.env_kv"):
            ctx.error("runtime.env_kv", "runtime.env_kv is only supported for workflow.file managed configs",
                      "remove runtime.env_kv (use runtime.env_secret), or delegate with workflow.file")
        for path in ("run.main_script", "run.smoke_pairs", "compute.cpu_workers", "workflow.script",
                     "workflow.main_script", "workflow.extra_scripts", "workflow.upstream_checkpoint",
                     "workflow.secret_payload", "workflow.smoke_pairs", "workflow.workload_kind"):
            if ctx.has(path):
                ctx.warn(path, f"{path} only applies to managed workflows (workflow.file) and is ignored here")
    else:
        for path, what in (("run.source", "run.source"), ("runtime.working_dir", "runtime.working_dir"),
                           ("storage.image_assets", "storage.image_assets"), ("storage.publish", "storage.publish")):
            if ctx.has(path):
                ctx.error(path, f"{what} requires direct Job dispatch and cannot be used with workflow.file",
                          f"remove {what} or workflow.file")


@rule
def entrypoint_rules(ctx: RuleContext) -> None:
    entry = ctx.get("entrypoint")
    if entry is None:
        return
    if not entry.strip() or entry != entry.strip():
        ctx.error("entrypoint", f"entrypoint {entry!r} must be a non-blank path without surrounding whitespace")
        return
    if ctx.has("run.source"):
        if entry.startswith("/") or posixpath.normpath(entry) != entry or entry.startswith("..") or "\\" in entry:
            ctx.error("entrypoint", f"entrypoint {entry!r} must be a clean relative path inside run.source",
                      "write it relative to run.source.path, for example experiments/train.py")
        return
    if ctx.check_files and ctx.base_dir is not None and not ctx.has("workflow.file"):
        target = Path(entry) if entry.startswith("/") else ctx.base_dir / entry
        if not target.is_file():
            ctx.error("entrypoint", f"entrypoint {entry!r} does not exist (looked for {target})",
                      "paths are relative to the config file's directory")
    wd = ctx.get("run.working_dir")
    if wd is not None and ctx.engine == RAYJOB and not entry.endswith(".py"):
        ctx.error("entrypoint", f"entrypoint {entry!r} must be a .py file inside run.working_dir",
                  "it runs as python3 -m <module>")


@rule
def source_rules(ctx: RuleContext) -> None:
    source = ctx.get("run.source")
    if source is None:
        return
    image, path = source.get("image"), source.get("path")
    if isinstance(image, str) and not pinned(image):
        ctx.error("run.source.image", f"run.source.image {_PINNED_MESSAGE}", _PINNED_HINT)
    if isinstance(path, str):
        if not clean_absolute(path) or path == "/":
            ctx.error("run.source.path", f"run.source.path {path!r} must be a clean absolute directory below /")
        elif under(path, "/tau-source"):
            ctx.error("run.source.path", f"run.source.path {path!r} is hidden by Tau's staging volume",
                      "copy from another directory")
    if ctx.get("entrypoint") is None:
        ctx.error("run.source", "run.source requires entrypoint", "set entrypoint relative to run.source.path")
    if ctx.engine != JOB and "run.source" in ctx.origins:
        pass  # reported by the engine matrix
    if ctx.has("run.working_dir"):
        ctx.error("run.source", "run.source and run.working_dir cannot be used together", "keep one of them")


@rule
def working_dir_rules(ctx: RuleContext) -> None:
    wd = ctx.get("runtime.working_dir")
    if wd is not None:
        if not clean_absolute(wd):
            ctx.error("runtime.working_dir", f"runtime.working_dir {wd!r} must be a clean absolute container path",
                      "for example /workspace/project")
        if ctx.has("run.source"):
            ctx.error("runtime.working_dir", "runtime.working_dir and run.source cannot be used together",
                      "run.source fixes the container working directory at /tau/source")
        if ctx.has("run.working_dir"):
            ctx.error("runtime.working_dir", "runtime.working_dir and run.working_dir cannot be used together",
                      "runtime.working_dir is the Job container's directory; run.working_dir ships a Ray project")
    rwd = ctx.get("run.working_dir")
    if rwd is not None and ctx.engine == RAYJOB and ctx.check_files and ctx.base_dir is not None:
        target = Path(rwd) if rwd.startswith("/") else ctx.base_dir / rwd
        if not target.is_dir():
            ctx.error("run.working_dir", f"run.working_dir {rwd!r} is not a directory (looked for {target})",
                      "paths are relative to the config file's directory")
        else:
            entry = ctx.get("entrypoint")
            if entry:
                ep = (Path(entry) if entry.startswith("/") else ctx.base_dir / entry).resolve()
                try:
                    ep.relative_to(target.resolve())
                except ValueError:
                    ctx.error("entrypoint", f"entrypoint {entry!r} must lie inside run.working_dir {rwd!r}")
    for i, pattern in enumerate(ctx.get("run.working_dir_excludes") or []):
        if not pattern.strip():
            ctx.error("run.working_dir_excludes", "exclude patterns must not be blank",
                      at=(*ctx.where("run.working_dir_excludes"), i))


# -- runtime -----------------------------------------------------------------------------------

def _reserved_env(key: str, allow_nccl: bool, nodes: int) -> bool:
    if key.upper().startswith("TAU_") and key not in SETTABLE_TAU_ENV:
        return True
    if key in RESERVED_ENV:
        return True
    if key.upper().startswith("NCCL_") and not allow_nccl:
        return True
    return nodes > 1 and key == "JOB_COMPLETION_INDEX"


@rule
def env_rules(ctx: RuleContext) -> None:
    env = ctx.get("runtime.env") or {}
    secrets = ctx.get("runtime.env_secret") or {}
    if not env and not secrets and not ctx.has("runtime.env_kv"):
        return
    allow_nccl = bool(ctx.get("execution.allow_nccl_override"))
    nodes = ctx.get("execution.nodes", 1)
    base = ctx.where("runtime.env")
    total = 0
    for key, raw in env.items():
        from tau_core.config.validate import _scalar_text

        value = raw if isinstance(raw, str) else _scalar_text(raw)
        at = (*base, key)
        if not isinstance(raw, str) and isinstance(raw, float):
            ctx.warnings.append(ctx.doc.issue(at, f"runtime.env.{key}", f"unquoted number is passed as {value!r}",
                                              "quote the value to keep its exact text", severity="warning"))
        if not ENV_NAME.match(key):
            ctx.error("runtime.env", f"{key!r} is not a valid environment variable name", at=at,
                      shown=f"runtime.env.{key}")
        elif _reserved_env(key, allow_nccl, nodes):
            hint = ("Tau owns the TAU_ namespace; the only TAU_ keys you can set are " + ", ".join(SETTABLE_TAU_ENV)
                    if key.upper().startswith("TAU_") else
                    "set execution.allow_nccl_override: true to override NCCL settings"
                    if key.upper().startswith("NCCL_") else "Tau sets it for distributed launch")
            ctx.error("runtime.env", f"{key} is managed by Tau and cannot be overridden", hint, at=at,
                      shown=f"runtime.env.{key}")
        size = len(value.encode("utf-8"))
        if size > MAX_ENV_VALUE_BYTES:
            ctx.error("runtime.env", f"literal environment variable {key!r} is {size} bytes; the maximum is "
                      f"{MAX_ENV_VALUE_BYTES} bytes",
                      "publish content once in a digest-pinned image and use run.source or storage.image_assets",
                      at=at, shown=f"runtime.env.{key}")
        total += len(key.encode("utf-8")) + 1 + size + 1
    if total > MAX_ENV_TOTAL_BYTES:
        ctx.error("runtime.env", f"literal environment payload is {total} bytes; the maximum is "
                  f"{MAX_ENV_TOTAL_BYTES} bytes", "move content into run.source or storage.image_assets")
    sbase = ctx.where("runtime.env_secret")
    for key, ref in secrets.items():
        at = (*sbase, key)
        shown = f"runtime.env_secret.{key}"
        if not ENV_NAME.match(key):
            ctx.error("runtime.env_secret", f"{key!r} is not a valid environment variable name", at=at, shown=shown)
        elif _reserved_env(key, allow_nccl, nodes):
            ctx.error("runtime.env_secret", f"{key} is managed by Tau and cannot be overridden", at=at, shown=shown)
        if key in env:
            ctx.error("runtime.env_secret", f"runtime.env_secret.{key} conflicts with runtime.env.{key}",
                      "set each environment variable in only one place", at=at, shown=shown)
        name, sep, skey = ref.partition(":")
        if not sep or not DNS1123_SUBDOMAIN.match(name) or not SECRET_KEY.match(skey):
            ctx.error("runtime.env_secret", f"{key} must reference a Secret as SECRET_NAME:KEY",
                      "for example WANDB_API_KEY: \"wandb-credentials:api-key\"", at=at, shown=shown)
    kv = ctx.get("runtime.env_kv") or {}
    for key in kv:
        if key in env or key in secrets:
            ctx.error("runtime.env_kv", f"runtime.env_kv.{key} duplicates another runtime env key",
                      at=(*ctx.where("runtime.env_kv"), key), shown=f"runtime.env_kv.{key}")


@rule
def pip_rules(ctx: RuleContext) -> None:
    for i, item in enumerate(ctx.get("runtime.pip") or []):
        if not item.strip() or item != item.strip():
            ctx.error("runtime.pip", f"runtime.pip entry {item!r} must be non-blank without surrounding spaces",
                      at=(*ctx.where("runtime.pip"), i), shown=f"runtime.pip[{i}]")


# -- compute -----------------------------------------------------------------------------------

@rule
def compute_rules(ctx: RuleContext) -> None:
    mode = ctx.get("compute.gpu_resource_mode")
    if mode is not None:
        allowed = ("device-plugin",) if ctx.engine == JOB else ("device-plugin", "mig")
        if mode not in allowed:
            ctx.error("compute.gpu_resource_mode",
                      f"{intent(ctx)} cannot use compute.gpu_resource_mode={mode!r}",
                      "supported: " + ", ".join(allowed))
    if ctx.get("compute.mig_profile") and mode not in (None, "mig"):
        ctx.error("compute.mig_profile", f"compute.mig_profile implies gpu_resource_mode mig, not {mode!r}")
    shape = ctx.get("policy.shape")
    if shape is not None:
        m = SHAPE.match(shape)
        if not m:
            ctx.error("policy.shape", f"policy.shape {shape!r} is not a shape like 8xa100-80gb")
        else:
            count = int(m.group(1))
            gpus = ctx.get("compute.gpus")
            if gpus is not None and gpus != count:
                ctx.error("compute.gpus", f"compute.gpus={gpus} conflicts with policy shape {shape!r} ({count} GPUs)")
            per = ctx.get("compute.gpus_per_worker")
            if per is not None and per != count and ctx.engine == RAYJOB:
                ctx.error("compute.gpus_per_worker",
                          f"compute.gpus_per_worker={per} conflicts with policy shape {shape!r} ({count} GPUs)")
    if ctx.engine == JOB and ctx.get("compute.gpus") is None and shape is None and not (
            ctx.get("policy.profile") or ctx.get("policy.workload_profile_snapshot")):
        ctx.warn("compute.gpus", "no GPU count is set: a ready workload profile must provide it at submit time",
                 "set compute.gpus (0 for a CPU Job) or policy.profile")


# -- policy ------------------------------------------------------------------------------------

@rule
def policy_rules(ctx: RuleContext) -> None:
    ns = ctx.get("policy.namespace")
    if ns is not None and (len(ns) > 63 or not DNS1123_LABEL.match(ns)):
        ctx.error("policy.namespace", f"namespace {ns!r} is not a valid DNS-1123 label")
    for path in ("policy.team", "policy.workspace", "policy.profile", "policy.queue", "policy.workload_priority_class",
                 "policy.pod_priority_class"):
        value = ctx.get(path)
        if value is None:
            continue
        if path == "policy.team":
            if len(value) > 63 or not LABEL_VALUE.match(value) or not value:
                ctx.error(path, f"team {value!r} must be a Kubernetes label value (at most 63 characters)")
        elif path == "policy.queue" and value == "auto":
            ctx.error(path, "policy.queue: auto requires live queue discovery and is not supported",
                      "name the LocalQueue, or omit policy.queue to use the workspace or profile queue")
        elif len(value) > 253 or not DNS1123_SUBDOMAIN.match(value):
            ctx.error(path, f"{value!r} is not a valid Kubernetes object name")
    lane = ctx.get("policy.lane")
    mode = ctx.get("policy.mode")
    topology = ctx.get("policy.topology")
    gpu_class = ctx.get("policy.gpu_class")
    tier = ctx.get("policy.priority_tier")
    if lane == "elastic" and mode == "fixed":
        ctx.error("policy.mode", "lane elastic requires mode elastic", "set policy.mode: elastic or change the lane")
    if mode == "elastic":
        if lane is not None and lane != "elastic":
            ctx.error("policy.mode", f"mode elastic requires lane elastic, got lane {lane!r}")
        if topology == "single-node-nvlink":
            ctx.error("policy.topology", "mode elastic needs unconstrained placement, not single-node-nvlink",
                      "use elastic-workers or independent")
        if gpu_class == "h200-141gb":
            ctx.error("policy.gpu_class", "h200-141gb cannot be used with mode elastic")
    if topology == "elastic-workers" and mode == "fixed":
        ctx.error("policy.topology", "topology elastic-workers requires mode elastic")
    if tier == "priority" and lane == "elastic":
        ctx.error("policy.priority_tier", "priority tier 'priority' is not available for lane elastic")
    if gpu_class == "h200-141gb" and lane is not None and lane != "large-memory":
        ctx.error("policy.gpu_class", f"h200-141gb is reserved for lane large-memory, not {lane!r}",
                  "set policy.lane: large-memory or pick another GPU class")
    if tier is not None and (ctx.get("policy.workload_priority_class") or ctx.get("policy.pod_priority_class")):
        ctx.error("policy.priority_tier", "policy.priority_tier cannot be combined with explicit priority classes",
                  "keep either the tier or the priority classes")
    if tier is not None and ctx.get("policy.disable_default_priorities"):
        ctx.error("policy.priority_tier", "policy.priority_tier cannot be combined with "
                  "policy.disable_default_priorities")
    selectors = ctx.get("policy.node_selector") or {}
    base = ctx.where("policy.node_selector") if selectors else ()
    for key, value in selectors.items():
        at = (*base, key)
        shown = f"policy.node_selector.{key}"
        prefix, _, label = key.rpartition("/")
        if (prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix))) or len(label) > 63 \
                or not LABEL_NAME.match(label):
            ctx.error("policy.node_selector", f"{key!r} is not a valid label key", at=at, shown=shown)
        if len(value) > 63 or not LABEL_VALUE.match(value):
            ctx.error("policy.node_selector", f"{value!r} is not a valid label value", at=at, shown=shown)
        if key == "tau.azure.com/gpu-class" and gpu_class is not None:
            if gpu_class == "any":
                ctx.error("policy.node_selector", "gpu_class 'any' is unconstrained and cannot be combined with a "
                          "tau.azure.com/gpu-class node selector", at=at, shown=shown)
            elif value != gpu_class:
                ctx.error("policy.node_selector", f"gpu_class {gpu_class!r} requires tau.azure.com/gpu-class="
                          f"{gpu_class!r}, but the node selector uses {value!r}", at=at, shown=shown)
    if gpu_class is not None and gpu_class not in GPU_CLASSES:
        ctx.error("policy.gpu_class", f"unknown GPU class {gpu_class!r}", "allowed: " + ", ".join(GPU_CLASSES))
    snapshot = ctx.get("policy.workload_profile_snapshot")
    if snapshot is not None:
        for path in ("policy.namespace", "policy.team", "policy.lane"):
            if not ctx.get(path):
                ctx.error("policy.workload_profile_snapshot", f"{path} is required with "
                          "policy.workload_profile_snapshot so offline profile selection has an explicit "
                          "namespace/team/lane authorization scope", f"set {path}")
        if ctx.check_files and ctx.base_dir is not None:
            target = Path(snapshot) if snapshot.startswith("/") else ctx.base_dir / snapshot
            if not target.is_file():
                ctx.error("policy.workload_profile_snapshot", f"snapshot file {snapshot!r} does not exist "
                          f"(looked for {target})", "export one with tau cluster profiles export --output FILE")


# -- storage -----------------------------------------------------------------------------------

@rule
def storage_rules(ctx: RuleContext) -> None:
    data_pvc = ctx.get("storage.data_pvc")
    result_pvc = ctx.get("storage.result_pvc")
    for path, claim in (("storage.data_pvc", data_pvc), ("storage.result_pvc", result_pvc)):
        if claim is not None and (len(claim) > 253 or not DNS1123_SUBDOMAIN.match(claim)):
            ctx.error(path, f"{claim!r} is not a valid PersistentVolumeClaim name")
    if data_pvc and result_pvc and data_pvc != result_pvc:
        ctx.error("storage.result_pvc", f"storage.result_pvc cannot differ from storage.data_pvc for "
                  f"{'job' if ctx.engine == JOB else 'RayJob'} run configs")
    volumes = ctx.get("storage.volumes") or []
    mounts = ctx.get("storage.mounts") or []
    if volumes and data_pvc:
        ctx.error("storage.volumes", "storage.data_pvc cannot be combined with storage.volumes for job run configs",
                  "use one of them")
    names: set[str] = set()
    vbase = ctx.where("storage.volumes") if volumes else ()
    for i, spec in enumerate(volumes):
        at, shown = (*vbase, i), f"storage.volumes[{i}]"
        name, eq, rest = spec.partition("=")
        kind, _, src = rest.partition(":")
        if not eq or not DNS1123_LABEL.match(name):
            ctx.error("storage.volumes", f"volume {spec!r} must be NAME=pvc:CLAIM", at=at, shown=shown)
            continue
        if kind != "pvc":
            ctx.error("storage.volumes", f"volume {name!r} is not pvc-backed; run configs support pvc volumes only",
                      "write NAME=pvc:CLAIM", at=at, shown=shown)
        elif not src or not DNS1123_SUBDOMAIN.match(src):
            ctx.error("storage.volumes", f"volume {name!r} needs a claim name: NAME=pvc:CLAIM", at=at, shown=shown)
        if name in RESERVED_VOLUMES or name.startswith("tau-asset-"):
            ctx.error("storage.volumes", f"volume name {name!r} is reserved by Tau", "pick another name", at=at,
                      shown=shown)
        if name in names:
            ctx.error("storage.volumes", f"volume {name!r} is declared more than once", at=at, shown=shown)
        names.add(name)
    if mounts and not volumes:
        ctx.error("storage.mounts", "storage.mounts requires at least one storage.volumes entry")
    mbase = ctx.where("storage.mounts") if mounts else ()
    seen_paths: list[str] = []
    for i, spec in enumerate(mounts):
        at, shown = (*mbase, i), f"storage.mounts[{i}]"
        parts = spec.split(":")
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
            ctx.error("storage.mounts", f"mount {spec!r} must be NAME:PATH[:ro|rw]", at=at, shown=shown)
            continue
        name, path = parts[0], parts[1]
        if volumes and name not in names:
            ctx.error("storage.mounts", f"mount {spec!r} names unknown volume {name!r}",
                      "declare it in storage.volumes", at=at, shown=shown)
        if not clean_absolute(path):
            ctx.error("storage.mounts", f"mount path {path!r} must be a clean absolute path", at=at, shown=shown)
        elif any(overlaps(path, r) for r in RESERVED_PATHS if r != "/data") or path == "/":
            ctx.error("storage.mounts", f"mount path {path!r} overlaps a Tau-reserved path", at=at, shown=shown)
        elif any(overlaps(path, p) for p in seen_paths):
            ctx.error("storage.mounts", f"mount path {path!r} overlaps another mount", at=at, shown=shown)
        seen_paths.append(path)
    output = ctx.get("storage.output")
    if output is not None:
        if not output.startswith("/"):
            ctx.error("storage.output", f"storage.output {output!r} must be an absolute path")
        elif not clean_absolute(output):
            ctx.error("storage.output", f"storage.output {output!r} must be a clean absolute path (no '.', '..' "
                      "or repeated slashes)")
        elif not has_pvc(ctx):
            ctx.error("storage.output", "no PVC supplied by storage.data_pvc or storage.volumes/mounts; output "
                      "cannot be retrieved by tau run get", "set storage.data_pvc")
        else:
            roots = mount_roots(ctx)
            if not any(under(output, r) for r in roots):
                ctx.error("storage.output", f"storage.output {output!r} is not under any mounted PVC path "
                          f"{roots}", "put it under /data")
    if ctx.get("storage.publish") == "staged":
        if not has_pvc(ctx):
            ctx.error("storage.publish", "staged publishing needs durable output: set storage.data_pvc")
        if ctx.engine == JOB and ctx.get("execution.nodes", 1) > 1:
            ctx.error("storage.publish", "staged publishing requires a single Job pod (execution.nodes: 1)")
    _image_assets(ctx)
    checkpoint = ctx.get("storage.checkpoint")
    if checkpoint is not None:
        if checkpoint != checkpoint.strip():
            ctx.error("storage.checkpoint", f"must not have surrounding whitespace (got {checkpoint!r})")
        elif (not checkpoint or checkpoint.startswith("/") or "\\" in checkpoint
              or any(seg in ("", ".", "..") for seg in checkpoint.split("/"))):
            ctx.error("storage.checkpoint", "must be a relative path inside the run's checkpoint dir, without '.' or "
                      f"'..' segments (got {checkpoint!r})", "for example best/model.safetensors")
        elif not has_pvc(ctx):
            ctx.error("storage.checkpoint", "storage.checkpoint requires a writable durable PVC",
                      "set storage.data_pvc")


def _image_assets(ctx: RuleContext) -> None:
    assets = ctx.get("storage.image_assets")
    if not assets:
        return
    base = ctx.where("storage.image_assets")
    if len(assets) > MAX_IMAGE_ASSETS:
        ctx.error("storage.image_assets", f"storage.image_assets supports at most {MAX_IMAGE_ASSETS} entries")
    names: set[str] = set()
    mounts: list[tuple[int, str]] = []
    for i, asset in enumerate(assets):
        at = (*base, i)
        name, image = asset.get("name", ""), asset.get("image", "")
        src, mount = asset.get("source_path", ""), asset.get("mount_path", "")
        if len(name) > 50 or not DNS1123_LABEL.match(name):
            ctx.error("storage.image_assets", f"storage.image_assets[{i}].name must be a lowercase DNS label no "
                      "longer than 50 characters", at=(*at, "name"), shown=f"storage.image_assets[{i}].name")
        elif name in names:
            ctx.error("storage.image_assets", f"storage.image_assets name {name!r} is declared more than once",
                      at=(*at, "name"), shown=f"storage.image_assets[{i}].name")
        names.add(name)
        if not pinned(image):
            ctx.error("storage.image_assets", f"storage.image_assets[{i}].image {_PINNED_MESSAGE}", _PINNED_HINT,
                      at=(*at, "image"), shown=f"storage.image_assets[{i}].image")
        if not clean_absolute(src) or under(src, "/tau-asset"):
            ctx.error("storage.image_assets", f"storage.image_assets[{i}].source_path {src!r} must be a clean "
                      "absolute path outside /tau-asset", at=(*at, "source_path"),
                      shown=f"storage.image_assets[{i}].source_path")
        if not clean_absolute(mount) or mount == "/":
            ctx.error("storage.image_assets", f"storage.image_assets[{i}].mount_path {mount!r} must be a clean "
                      "absolute path", at=(*at, "mount_path"), shown=f"storage.image_assets[{i}].mount_path")
            continue
        reserved = next((r for r in RESERVED_PATHS if overlaps(mount, r)), None)
        if reserved:
            ctx.error("storage.image_assets", f"storage.image_assets[{i}].mount_path {mount!r} overlaps "
                      f"Tau-reserved path {reserved}", at=(*at, "mount_path"),
                      shown=f"storage.image_assets[{i}].mount_path")
            continue
        for _j, other in mounts:
            if overlaps(mount, other):
                ctx.error("storage.image_assets", f"storage.image_assets mount paths {other!r} and {mount!r} "
                          "overlap", at=(*at, "mount_path"), shown=f"storage.image_assets[{i}].mount_path")
        mounts.append((i, mount))


# -- profiler, metrics, experiment -----------------------------------------------------------------

@rule
def profiler_rules(ctx: RuleContext) -> None:
    mode = ctx.get("profiler.mode")
    present = [p for p in ctx.values if p.startswith("profiler.")]
    if not present:
        return
    if mode is None:
        ctx.error(present[0], "profiler settings need profiler.mode (nsys or ncu)")
        return
    rank = ctx.get("profiler.rank")
    if rank is not None:
        text = str(rank)
        if not (text == "all" or (text.isdigit() and not isinstance(rank, bool))):
            ctx.error("profiler.rank", f"profiler.rank {rank!r} must be a non-negative integer or 'all'")
    for path in ("profiler.warmup", "profiler.duration"):
        if ctx.has(path) and mode != "nsys":
            ctx.error(path, f"{path} currently applies only to profiler.mode=nsys")
    if not has_pvc(ctx):
        ctx.error("profiler.mode", "profiler requires durable PVC output",
                  "configure storage.data_pvc or storage.volumes/mounts")
    if ctx.get("execution.launcher") == "torchrun":
        ctx.error("profiler.mode", "profiler cannot be combined with execution.launcher: torchrun")


@rule
def metrics_rules(ctx: RuleContext) -> None:
    history = ctx.get("metrics.history") or []
    base = ctx.where("metrics.history") if history else ()
    for i, entry in enumerate(history):
        at, shown = (*base, i), f"metrics.history[{i}]"
        if not entry.strip():
            ctx.error("metrics.history", "metric history entries must not be blank", at=at, shown=shown)
        elif entry.startswith("/"):
            if not under(posixpath.normpath(entry), "/data") or ".." in entry.split("/"):
                ctx.error("metrics.history", f"absolute metric path {entry!r} must be under /data", at=at,
                          shown=shown)
        elif ".." in entry.split("/") or "\\" in entry:
            ctx.error("metrics.history", f"metric path {entry!r} must stay inside storage.output", at=at,
                      shown=shown)
    if not ctx.get("metrics.offload.enabled"):
        return
    where = "metrics.offload.enabled"
    if not history:
        ctx.error(where, "metrics.offload.enabled requires at least one metrics.history path")
    project = ctx.get("experiment.project")
    exp = ctx.get("experiment.name") or _title_id(ctx.get("experiment.title")) or ctx.get("experiment.group")
    if not project:
        ctx.error(where, "metrics.offload.enabled requires experiment.project", "set experiment.project")
    if not exp:
        ctx.error(where, "metrics.offload.enabled requires experiment.name (or group)", "set experiment.name")
    for path in ("experiment.project", "experiment.name", "experiment.group"):
        value = ctx.get(path)
        if value is not None and (len(value) > 128 or not TELEMETRY_ID.match(value)):
            ctx.error(path, f"{path} {value!r} must be a telemetry id (lowercase letters, digits and internal "
                      "'-', '_' or '.')")
    if not has_pvc(ctx):
        ctx.error(where, "metrics offload needs storage.output on a writable PVC under /data",
                  "set storage.data_pvc")
    if ctx.get("entrypoint") is None:
        ctx.error(where, "metrics.offload.enabled requires run.entrypoint")
    if ctx.engine == JOB and ctx.get("execution.nodes", 1) > 1:
        ctx.error(where, "metrics.offload.enabled requires a single Job pod")


def _title_id(title: Any) -> str | None:
    from tau_core.config.validate import _experiment_id

    return _experiment_id(title)


# -- execution ---------------------------------------------------------------------------------

@rule
def execution_rules(ctx: RuleContext) -> None:
    launcher = ctx.get("execution.launcher")
    engine = ctx.engine
    if launcher in ("ray-train", "ray-tune") and engine != RAYJOB:
        ctx.error("execution.launcher", f"execution.launcher {launcher!r} requires engine: rayjob (needs a Ray "
                  f"cluster); got engine: {engine}", "set engine: rayjob")
    if launcher == "torchrun" and engine != JOB:
        ctx.error("execution.launcher", "execution.launcher torchrun is for engine: job",
                  "Ray Train manages distributed init; use ray-train for engine: rayjob")
    if launcher == "python" and engine != JOB:
        ctx.error("execution.launcher", "execution.launcher python is for engine: job",
                  "use ray-train for engine: rayjob")
    effective = launcher or ("python" if engine == JOB else "ray-train")
    ppn = ctx.get("execution.processes_per_node")
    if ppn is not None and ppn > 1 and effective != "torchrun":
        ctx.error("execution.processes_per_node", "execution.processes_per_node > 1 requires execution.launcher: "
                  "torchrun")
    gpus = ctx.get("compute.gpus")
    if ppn is not None and ppn > 1 and gpus is not None and gpus > 0 and ppn > gpus:
        ctx.error("execution.processes_per_node", f"execution.processes_per_node={ppn} exceeds compute.gpus={gpus}")
    nodes = ctx.get("execution.nodes", 1)
    if engine == JOB and nodes > 1 and effective != "torchrun":
        ctx.error("execution.nodes", "execution.nodes > 1 requires execution.launcher: torchrun")
    if effective == "torchrun":
        entry = ctx.get("entrypoint")
        if entry is not None and not entry.endswith(".py"):
            ctx.error("entrypoint", f"entrypoint {entry!r} must be a .py file with execution.launcher: torchrun")
    tune_fields = [p for p in ("execution.metric", "execution.mode", "execution.num_samples",
                               "execution.max_concurrent_trials") if ctx.has(p)]
    if tune_fields and effective != "ray-tune" and engine == RAYJOB:
        ctx.error(tune_fields[0], "execution.metric/mode/num_samples/max_concurrent_trials require "
                  "execution.launcher: ray-tune")
    configs = ctx.get("execution.configs")
    if effective == "ray-tune":
        if not ctx.get("execution.metric"):
            ctx.error("execution.launcher", "ray-tune requires execution.metric", "set execution.metric: loss")
        if not configs:
            ctx.error("execution.launcher", "ray-tune requires a non-empty execution.configs search space")
    if not configs:
        return
    base = ctx.where("execution.configs")
    if effective in ("python", "torchrun"):
        canon: dict[str, str] = {}
        for key, value in configs.items():
            at, shown = (*base, key), f"execution.configs.{key}"
            if not CONFIG_KEY.match(key):
                ctx.error("execution.configs", f"config key {key!r} is not a valid flag name", at=at, shown=shown)
                continue
            if value is None:
                ctx.error("execution.configs", f"config {key!r} is null", "use an empty string for a bare flag",
                          at=at, shown=shown)
            elif isinstance(value, (dict, list)):
                ctx.error("execution.configs", f"config {key!r} must be a scalar for launcher {effective}",
                          at=at, shown=shown)
            c = key.lower().replace("_", "-")
            if effective == "torchrun" and c in TORCHRUN_MANAGED_FLAGS:
                ctx.error("execution.configs", f"--{c} is managed by Tau's torchrun launch", at=at, shown=shown)
            if c in canon:
                ctx.error("execution.configs", f"config {key!r} duplicates {canon[c]!r}", at=at, shown=shown)
            canon[c] = key
    elif effective == "ray-train":
        for key, value in configs.items():
            at, shown = (*base, key), f"execution.configs.{key}"
            if key not in RAY_TRAIN_SECTIONS:
                ctx.error("execution.configs", f"ray-train configs accept only {', '.join(RAY_TRAIN_SECTIONS)}",
                          at=at, shown=shown)
            elif not isinstance(value, dict):
                ctx.error("execution.configs", f"{key} must be a mapping", at=at, shown=shown)
            elif key == "scaling_config":
                for bad in ("num_workers", "resources_per_worker"):
                    if bad in value:
                        ctx.error("execution.configs", f"scaling_config.{bad} is derived from compute.*",
                                  "set compute.workers / gpus_per_worker instead", at=(*at, bad),
                                  shown=f"execution.configs.scaling_config.{bad}")


# -- resilience --------------------------------------------------------------------------------

def _seconds(duration: str) -> float:
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    total = 0.0
    for number, unit in re.findall(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)", duration):
        total += float(number) * units[unit]
    return total


@rule
def resilience_rules(ctx: RuleContext) -> None:
    reasons = ctx.get("resilience.retry_on") or []
    if not reasons and not ctx.has("resilience.checkpoint_path") and not ctx.has("resilience.backoff_initial"):
        return
    from tau_core.lifecycle import FailureReason

    base = ctx.where("resilience.retry_on") if reasons else ()
    allowed = {FailureReason.parse(r) for r in RETRY_REASONS} if reasons else set()
    for i, reason in enumerate(reasons):
        try:
            parsed = FailureReason.parse(reason)
        except ValueError:
            parsed = None
        if parsed not in allowed:
            ctx.error("resilience.retry_on", f"{reason!r} is not a retryable failure reason",
                      "allowed: " + ", ".join(RETRY_REASONS) + " (Unknown is never retried)",
                      at=(*base, i), shown=f"resilience.retry_on[{i}]")
    path = ctx.get("resilience.checkpoint_path")
    if path is not None and (not clean_absolute(path) or path == "/"):
        ctx.error("resilience.checkpoint_path", f"resilience.checkpoint_path {path!r} must be a clean absolute path",
                  "for example /data/checkpoints/finetunes/<name>")
    initial, maximum = ctx.get("resilience.backoff_initial"), ctx.get("resilience.backoff_max")
    if initial and maximum and _seconds(initial) > _seconds(maximum):
        ctx.error("resilience.backoff_initial", f"backoff_initial {initial} is longer than backoff_max {maximum}")
