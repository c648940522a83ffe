"""Cross-field rules: identity, source and working directory, runtime environment, compute and policy."""

from __future__ import annotations

import posixpath
from pathlib import Path

from tau_core.config.catalog import BY_PATH, GPU_CLASSES, JOB, RAYJOB
from tau_core.config.reserved import (
    RAYJOB_NAME_MAX,
    RESERVED_ENV,
    SETTABLE_TAU_ENV,
)
from tau_core.config.rule_context import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    ENV_NAME,
    LABEL_NAME,
    LABEL_VALUE,
    MAX_ENV_TOTAL_BYTES,
    MAX_ENV_VALUE_BYTES,
    PINNED_HINT,
    PINNED_MESSAGE,
    SECRET_KEY,
    SHAPE,
    RuleContext,
    clean_absolute,
    intent,
    pinned,
    rule,
    under,
)

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
        ctx.error("run.source.image", f"run.source.image {PINNED_MESSAGE}", PINNED_HINT)
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
