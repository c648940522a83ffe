"""The field catalog: the single source of truth for the direct run config (``tau.yaml``).

Every field the direct config accepts is one :class:`Field` below.  The JSON Schema
(:mod:`tau_core.config.schema`), the Markdown reference (:mod:`tau_core.config.explain`),
the structural checker and the normalizer (:mod:`tau_core.config.validate`) are all
generated from this list, so they cannot disagree.

Paths are dotted; ``[]`` marks the items of a list of objects (``storage.image_assets[].name``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

JOB = "job"
RAYJOB = "rayjob"
BOTH: tuple[str, ...] = (JOB, RAYJOB)

#: Field status vocabulary (``x-tau-status`` in the schema).
STATUSES = ("ga", "beta", "alpha", "deprecated", "alias", "reserved", "workflow-only")

#: Leaf and container types.
TYPES = (
    "string", "integer", "boolean", "string_or_integer", "quantity", "duration", "string_list", "string_map",
    "scalar_map",
    "map", "object", "object_list", "any",
)

GPU_CLASSES: tuple[str, ...] = (
    "any", "a10-4gb", "a10-8gb", "a10-12gb", "a10-24gb", "a100-40gb", "a100-80gb", "h100-80gb",
    "h100-95gb", "h200-141gb", "gb200-192gb", "gb300-288gb",
)
#: Legacy GPU class inputs accepted for one compatibility window (doc 39).
LEGACY_GPU_CLASSES: dict[str, str] = {
    "a100-nvlink-80gb": "a100-80gb",
    "h100-standalone-95gb": "h100-95gb",
    "h200-nvlink-141gb": "h200-141gb",
}
#: Placement vocabulary for ``policy.topology`` (decision 1).
TOPOLOGIES: tuple[str, ...] = ("independent", "single-node-nvlink", "multi-node-nccl", "elastic-workers")
#: Placement vocabulary for a workload profile's ``placement`` (decision 1).
PROFILE_PLACEMENTS: tuple[str, ...] = ("independent", "single-node-nvlink", "multi-node-nccl")
#: The newer placement names product TauCluster catalogs publish; the readers, the CRD and the controller accept
#: them beside the documented ones (the migration maps multi-node-nccl to same-network-domain).
PROFILE_PLACEMENTS_NEWER: tuple[str, ...] = (
    "unconstrained", "same-host", "same-accelerator-domain", "same-network-domain", "same-site",
)
ACCEPTED_PROFILE_PLACEMENTS: tuple[str, ...] = PROFILE_PLACEMENTS + PROFILE_PLACEMENTS_NEWER
#: Placements that may spread a profile's workers over several nodes (``workerCount > 1`` needs one).
MULTI_WORKER_PLACEMENTS: tuple[str, ...] = ("multi-node-nccl", *PROFILE_PLACEMENTS_NEWER)
#: Placements that keep every worker inside one network domain (what multi-node serving needs).
SAME_NETWORK_DOMAIN_PLACEMENTS: tuple[str, ...] = ("same-network-domain", "multi-node-nccl")
LANES: tuple[str, ...] = ("eval", "training", "large-memory", "elastic", "serving")
ENGINES: tuple[str, ...] = (JOB, RAYJOB)
DEPRECATED_ENGINES: dict[str, str] = {"ray": RAYJOB}
WORKLOAD_KINDS: tuple[str, ...] = (JOB, RAYJOB)
DEPRECATED_WORKLOAD_KINDS: dict[str, str] = {"ray": RAYJOB, "ray-train": RAYJOB, "ray_train": RAYJOB}
LAUNCHERS: tuple[str, ...] = ("python", "torchrun", "ray-train", "ray-tune")
RETRY_REASONS: tuple[str, ...] = ("Preempted", "Evicted", "OOMKilled")
DEFAULT_RETRY_ON: tuple[str, ...] = ("Preempted", "Evicted")
DEFAULT_JOB_TTL_SECONDS = 28800
MAX_TTL_SECONDS = 2147483647

QUANTITY_PATTERN = r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+|[mkMGTPE]|[KMGTPE]i)?$"
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"
MIG_PROFILE_PATTERN = r"^[0-9]+g\.[0-9]+gb$"


@dataclass(frozen=True)
class Field:
    """One config field."""

    path: str
    type: str
    description: str
    default: Any = None
    #: Allowed values (canonical spellings).
    values: tuple[str, ...] = ()
    #: Deprecated spellings and the canonical value each one is normalized to.
    deprecated_values: Mapping[str, str] = field(default_factory=dict)
    #: Canonical path this field is an alias of (status ``alias``).
    alias_of: str | None = None
    status: str = "ga"
    engines: tuple[str, ...] = BOTH
    minimum: int | None = None
    maximum: int | None = None
    pattern: str | None = None
    #: Values are matched case-insensitively (and normalized to the canonical spelling).
    case_insensitive: bool = False
    #: Allowed item values for string lists.
    item_values: tuple[str, ...] = ()
    #: A human note on how the default is derived when it is not a constant.
    default_note: str = ""

    @property
    def leaf(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def is_container(self) -> bool:
        return self.type in ("object", "object_list")

    @property
    def canonical(self) -> str:
        return self.alias_of or self.path


def _f(path: str, type: str, description: str, **kw: Any) -> Field:
    return Field(path, type, description, **kw)


_ENGINE_VALUES = {"values": ENGINES, "deprecated_values": DEPRECATED_ENGINES, "case_insensitive": True}
_KIND_VALUES = {"values": WORKLOAD_KINDS, "deprecated_values": DEPRECATED_WORKLOAD_KINDS, "case_insensitive": True}

FIELDS: tuple[Field, ...] = (
    # -- identity -------------------------------------------------------------------------
    _f("schema_version", "any", "Managed workflow manifest marker written by the Python SDK; a direct config "
       "never sets it (its presence without engine switches to the managed path).", status="reserved"),
    _f("name", "string", "Run and workload name (DNS-1123; at most 47 characters for RayJob). A positional "
       "NAME with --config overrides it."),
    _f("engine", "string", "Workload kind: job (batch/v1 Job) or rayjob (KubeRay RayJob). Inferred when "
       "omitted: rayjob for compute.workers > 1, an explicit compute.gpus_per_worker or runtime.pip; "
       "otherwise job.", **_ENGINE_VALUES),
    _f("entrypoint", "string", "Script to run, relative to the config file's directory (with run.source: "
       "relative to the source tree). Omit it to run the image's own ENTRYPOINT."),
    _f("script", "string", "Alias of entrypoint.", alias_of="entrypoint", status="alias"),
    _f("image", "string", "Lowest-priority alias of runtime.image.", alias_of="runtime.image", status="alias"),
    # -- run.* ----------------------------------------------------------------------------
    _f("run", "object", "Run identity aliases, immutable Job source staging and Ray project shipping."),
    _f("run.name", "string", "Alias of name (wins over name).", alias_of="name", status="alias"),
    _f("run.engine", "string", "Alias of engine (wins over engine).", alias_of="engine", status="alias",
       **_ENGINE_VALUES),
    _f("run.entrypoint", "string", "Alias of entrypoint (highest precedence).", alias_of="entrypoint",
       status="alias"),
    _f("run.script", "string", "Alias of entrypoint.", alias_of="entrypoint", status="alias"),
    _f("run.image", "string", "Alias of runtime.image (below runtime.image, above image).",
       alias_of="runtime.image", status="alias"),
    _f("run.main_script", "string", "Main script for managed workflow rendering.", status="workflow-only"),
    _f("run.workload_kind", "string", "Workload kind when engine is omitted (job or rayjob).", **_KIND_VALUES),
    _f("run.smoke_pairs", "integer", "Smoke pair count forwarded to managed workflow rendering.",
       status="workflow-only", minimum=0),
    _f("run.source", "object", "Immutable source tree from a digest-pinned OCI image, copied by an init "
       "container to /tau/source.", engines=(JOB,)),
    _f("run.source.image", "string", "Source image, pinned by @sha256 digest.", engines=(JOB,)),
    _f("run.source.path", "string", "Clean absolute directory inside the source image to copy.", engines=(JOB,)),
    _f("run.ttl_seconds_after_finished", "integer", "Seconds a finished Job is kept (spec.ttlSecondsAfterFinished).",
       default=DEFAULT_JOB_TTL_SECONDS, minimum=1, maximum=MAX_TTL_SECONDS, engines=(JOB,)),
    _f("run.working_dir", "string", "Host directory (relative to the config file) packaged into the Ray "
       "runtime_env working_dir.", engines=(RAYJOB,)),
    _f("run.working_dir_excludes", "string_list", "Extra glob patterns excluded from the project archive.",
       engines=(RAYJOB,)),
    # -- workflow.* -----------------------------------------------------------------------
    _f("workflow", "object", "Delegation to an SDK-generated managed workflow manifest.", status="workflow-only"),
    _f("workflow.file", "string", "Managed workflow manifest path (config-relative); its presence selects "
       "managed dispatch.", status="workflow-only"),
    _f("workflow.script", "string", "Workflow script.", status="workflow-only"),
    _f("workflow.main_script", "string", "Workflow main script.", status="workflow-only"),
    _f("workflow.workload_kind", "string", "Workload kind for the managed workflow.", status="workflow-only",
       **_KIND_VALUES),
    _f("workflow.extra_scripts", "string_list", "Extra scripts as SRC[:DEST] (SRC config-relative).",
       status="workflow-only"),
    _f("workflow.upstream_checkpoint", "string", "Checkpoint from an upstream run.", status="workflow-only"),
    _f("workflow.secret_payload", "string", "Config-relative secret payload file.", status="workflow-only"),
    _f("workflow.smoke_pairs", "integer", "Overrides run.smoke_pairs.", status="workflow-only", minimum=0),
    # -- runtime.* ------------------------------------------------------------------------
    _f("runtime", "object", "Image, working directory, packages, environment and pod security."),
    _f("runtime.image", "string", "Container image (highest priority; pin by digest for reproducibility). "
       "RayJob defaults to the AKS AI runtime Ray image."),
    _f("runtime.working_dir", "string", "Clean absolute container path used as container.workingDir.",
       engines=(JOB,)),
    _f("runtime.pip", "string_list", "pip requirements installed by the RayJob driver before the entrypoint.",
       engines=(RAYJOB,)),
    _f("runtime.env", "scalar_map", "Literal, non-secret environment variables (64 KiB per value, 128 KiB in "
       "total; the TAU_ namespace is reserved)."),
    _f("runtime.env_secret", "string_map", "Environment variables from Secrets: NAME: \"SECRET:KEY\"."),
    _f("runtime.env_kv", "string_map", "Key Vault environment for managed workflows only.",
       status="workflow-only"),
    _f("runtime.security", "object", "Pod security settings."),
    _f("runtime.security.mode", "string", "restricted applies the Restricted Pod Security fields to every "
       "container (non-root 65532 by default).", values=("restricted",)),
    # -- compute.* ------------------------------------------------------------------------
    _f("compute", "object", "Worker, GPU, CPU and memory intent."),
    _f("compute.workers", "integer", "Ray worker pods (the head is separate and CPU-only).", default=1,
       minimum=1, engines=(RAYJOB,)),
    _f("compute.gpus", "integer", "GPUs for the Job pod (0 for a CPU Job).", minimum=0, engines=(JOB,)),
    _f("compute.gpus_per_worker", "integer", "GPUs per Ray worker (0..8).", default=1, minimum=0, maximum=8,
       engines=(RAYJOB,)),
    _f("compute.cpu_workers", "integer", "CPU workers for managed eval workflows.", status="workflow-only",
       minimum=0),
    _f("compute.workload_kind", "string", "Workload kind when engine is omitted (lowest precedence).",
       **_KIND_VALUES),
    _f("compute.gpu_resource_mode", "string", "How GPUs are requested: device-plugin (Job and RayJob) or mig "
       "(RayJob).", default="device-plugin", values=("device-plugin", "nvidia", "dra", "mig")),
    _f("compute.mig_profile", "string", "MIG profile such as 1g.10gb (implies mig mode).",
       pattern=MIG_PROFILE_PATTERN, engines=(RAYJOB,)),
    _f("compute.cpu_request", "quantity", "CPU request (Job container; RayJob head and worker default)."),
    _f("compute.cpu_limit", "quantity", "CPU limit (Job container; RayJob head and worker default)."),
    _f("compute.memory_request", "quantity", "Memory request (Job container; RayJob head and worker default)."),
    _f("compute.memory_limit", "quantity", "Memory limit (Job container; RayJob head and worker default)."),
    _f("compute.head_cpu_request", "quantity", "Ray head CPU request.", engines=(RAYJOB,)),
    _f("compute.head_cpu_limit", "quantity", "Ray head CPU limit.", engines=(RAYJOB,)),
    _f("compute.head_memory_request", "quantity", "Ray head memory request.", engines=(RAYJOB,)),
    _f("compute.head_memory_limit", "quantity", "Ray head memory limit.", engines=(RAYJOB,)),
    _f("compute.worker_cpu_request", "quantity", "Ray worker CPU request.", engines=(RAYJOB,)),
    _f("compute.worker_cpu_limit", "quantity", "Ray worker CPU limit.", engines=(RAYJOB,)),
    _f("compute.worker_memory_request", "quantity", "Ray worker memory request.", engines=(RAYJOB,)),
    _f("compute.worker_memory_limit", "quantity", "Ray worker memory limit.", engines=(RAYJOB,)),
    # -- policy.* -------------------------------------------------------------------------
    _f("policy", "object", "Explicit operator and accounting overrides; the workload profile is authoritative."),
    _f("policy.workspace", "string", "TauWorkspace whose defaults apply."),
    _f("policy.namespace", "string", "Target namespace (DNS-1123 label)."),
    _f("policy.profile", "string", "TauCluster workload profile to select."),
    _f("policy.queue", "string", "Kueue LocalQueue (defaults from the workspace or profile)."),
    _f("policy.team", "string", "Team, for profile applicability (label value).", default_note="$TAU_TEAM"),
    _f("policy.lane", "string", "Scheduling lane.", values=LANES),
    _f("policy.gpu_class", "string", "Hardware-only GPU class, rendered as the tau.azure.com/gpu-class label and "
       "node selector; any adds no selector.", values=GPU_CLASSES, deprecated_values=LEGACY_GPU_CLASSES,
       case_insensitive=True),
    _f("policy.mode", "string", "fixed or elastic.", values=("fixed", "elastic"),
       default_note="fixed, or elastic when lane is elastic"),
    _f("policy.topology", "string", "Placement: independent, single-node-nvlink, multi-node-nccl or "
       "elastic-workers.", values=TOPOLOGIES),
    _f("policy.shape", "string", "Shape such as 8xa100-80gb; may prove a Job's GPU count."),
    _f("policy.priority_tier", "string", "Priority tier: default or priority.", values=("default", "priority")),
    _f("policy.priority", "string", "Alias of policy.priority_tier.", alias_of="policy.priority_tier",
       status="alias", values=("default", "priority")),
    _f("policy.workload_profile_snapshot", "string", "Offline TauWorkloadProfileSnapshot file (config-relative); "
       "accepted only with --dry-run=client and explicit namespace, team and lane."),
    _f("policy.workload_priority_class", "string", "Kueue WorkloadPriorityClass."),
    _f("policy.pod_priority_class", "string", "Kubernetes PriorityClass for the pods."),
    _f("policy.node_selector", "string_map", "Extra node selectors, merged last."),
    _f("policy.clear_node_selector", "boolean", "Drop generated node selectors before policy.node_selector.",
       engines=(JOB,)),
    _f("policy.disable_default_priorities", "boolean", "Omit the taugrid-* default priority classes."),
    # -- storage.* ------------------------------------------------------------------------
    _f("storage", "object", "Durable data, output, checkpoint and extra mounts."),
    _f("storage.data_pvc", "string", "Existing platform PVC mounted at /data (never created by Tau)."),
    _f("storage.result_pvc", "string", "Result PVC; must equal data_pvc when both are set."),
    _f("storage.output", "string", "Absolute durable output directory under a mounted PVC.",
       default_note="/data/checkpoints/workflows/<name> for a Job with a PVC; <outputRoot>/<name> with a "
       "workspace output root"),
    _f("storage.publish", "string", "staged: write to TAU_OUTPUT_STAGING_DIR, publish complete sets only.",
       values=("staged",)),
    _f("storage.volumes", "string_list", "Extra volumes as NAME=pvc:CLAIM.", engines=(JOB,)),
    _f("storage.mounts", "string_list", "Mounts as NAME:PATH[:ro|rw].", engines=(JOB,)),
    _f("storage.image_assets", "object_list", "Read-only directories staged from digest-pinned images "
       "(at most 8).", engines=(JOB,)),
    _f("storage.image_assets[].name", "string", "Asset name (lowercase DNS label, at most 50 characters).",
       engines=(JOB,)),
    _f("storage.image_assets[].image", "string", "Asset image pinned by @sha256 digest.", engines=(JOB,)),
    _f("storage.image_assets[].source_path", "string", "Clean absolute directory in the asset image.",
       engines=(JOB,)),
    _f("storage.image_assets[].mount_path", "string", "Clean absolute mount path in the main container.",
       engines=(JOB,)),
    _f("storage.checkpoint", "string", "Servable model file or directory, relative to the run's checkpoint dir."),
    # -- profiler.* -----------------------------------------------------------------------
    _f("profiler", "object", "Bounded rank-scoped profiling.", status="beta"),
    _f("profiler.mode", "string", "nsys or ncu.", values=("nsys", "ncu"), status="beta"),
    _f("profiler.rank", "string_or_integer", "Rank to profile: a non-negative integer or all.", default="0",
       status="beta"),
    _f("profiler.warmup", "duration", "Delay before capture (nsys only).", status="beta"),
    _f("profiler.duration", "duration", "Capture duration (nsys only).", status="beta",
       default_note="2m for nsys"),
    # -- metrics.* ------------------------------------------------------------------------
    _f("metrics", "object", "Published JSONL metric paths and the opt-in offload sidecar."),
    _f("metrics.history", "string_list", "JSONL metric files or globs (relative to storage.output, or absolute "
       "under /data)."),
    _f("metrics.offload", "object", "Metrics offload sidecar.", status="alpha"),
    _f("metrics.offload.enabled", "boolean", "Run the metrics-offload sidecar (image from "
       "TAU_METRICS_OFFLOAD_IMAGE).", default=False, status="alpha"),
    # -- experiment.* ---------------------------------------------------------------------
    _f("experiment", "object", "Experiment identity: project, experiment name and group."),
    _f("experiment.project", "string", "Experiment project."),
    _f("experiment.name", "string", "Experiment id.", default_note="derived from title, else group"),
    _f("experiment.group", "string", "Experiment group (arm)."),
    _f("experiment.title", "string", "Deprecated; only used to derive experiment.name.", status="deprecated"),
    # -- execution.* ----------------------------------------------------------------------
    _f("execution", "object", "Launcher, node/process topology, launcher configs and Ray Tune settings."),
    _f("execution.launcher", "string", "python or torchrun (job); ray-train or ray-tune (rayjob).",
       values=LAUNCHERS, default_note="python for job, ray-train for rayjob"),
    _f("execution.processes_per_node", "integer", "Processes per node (> 1 requires torchrun).", minimum=1),
    _f("execution.nodes", "integer", "Nodes (> 1: Indexed Job with torchrun).", default=1, minimum=1,
       engines=(JOB,)),
    _f("execution.metric", "string", "Ray Tune metric to optimize.", engines=(RAYJOB,)),
    _f("execution.mode", "string", "Ray Tune direction.", values=("min", "max"), engines=(RAYJOB,),
       default_note="min with ray-tune"),
    _f("execution.num_samples", "integer", "Ray Tune samples.", minimum=1, engines=(RAYJOB,),
       default_note="1 with ray-tune"),
    _f("execution.max_concurrent_trials", "integer", "Ray Tune concurrent trials.", minimum=1, engines=(RAYJOB,),
       default_note="1 with ray-tune"),
    _f("execution.configs", "map", "Launcher configs: script flags (python/torchrun), Ray Train sections, or the "
       "Ray Tune search space."),
    _f("execution.allow_nccl_override", "boolean", "Allow NCCL_* keys in runtime.env.", default=False),
    # -- resilience.* ---------------------------------------------------------------------
    _f("resilience", "object", "Automatic retry and checkpoint path."),
    _f("resilience.max_retries", "integer", "Automatic retries (0 disables).", default=0, minimum=0),
    _f("resilience.retry_on", "string_list", "Failure reasons that are retried (case-insensitive).",
       default=list(DEFAULT_RETRY_ON), item_values=RETRY_REASONS, case_insensitive=True),
    _f("resilience.checkpoint_path", "string", "Checkpoint directory injected as TAU_RESUME_FROM.",
       default_note="/data/checkpoints/finetunes/<name>"),
    _f("resilience.backoff_initial", "duration", "First retry delay.", default="30s"),
    _f("resilience.backoff_max", "duration", "Largest retry delay.", default="5m"),
)

BY_PATH: dict[str, Field] = {f.path: f for f in FIELDS}

#: Objects that are either absent (None in the normalized config) or complete.
OPTIONAL_OBJECTS: frozenset[str] = frozenset({"run.source"})

#: Keys an object requires when it is present.
REQUIRED: dict[str, tuple[str, ...]] = {
    "run.source": ("image", "path"),
    "storage.image_assets[]": ("name", "image", "source_path", "mount_path"),
}

#: Where a canonical field can be written, highest precedence first.
PRECEDENCE: dict[str, tuple[str, ...]] = {
    "name": ("run.name", "name"),
    "engine": ("run.engine", "engine"),
    "entrypoint": ("run.entrypoint", "run.script", "entrypoint", "script"),
    "runtime.image": ("runtime.image", "run.image", "image"),
    "policy.priority_tier": ("policy.priority_tier", "policy.priority"),
}

#: Keys removed from the config, with the message that replaces "unknown key".
REMOVED: dict[str, tuple[str, str]] = {
    "task": ("task: eval was removed; evaluation is an ordinary run",
             "use engine: job, pass model and result paths through runtime.env, and keep storage.output for "
             "tau run get"),
    "run.task": ("run.task was removed; evaluation is an ordinary run",
                 "use engine: job, pass model and result paths through runtime.env"),
    "eval": ("eval.harness and eval.model were removed; evaluation is an ordinary run",
             "use engine: job and pass paths through runtime.env"),
    "policy.topology_policy": ("policy.topology_policy was removed with the file-based TopologyPolicy catalog",
                               "select a TauCluster workload profile with policy.profile, or set "
                               "policy.workload_profile_snapshot for offline rendering"),
    "policy.preset": ("policy.preset was removed with the file-based TopologyPolicy catalog",
                      "select a TauCluster workload profile with policy.profile"),
    "metrics.offload.image": ("metrics.offload.image is not a config field",
                              "set TAU_METRICS_OFFLOAD_IMAGE in the environment (a digest-pinned image)"),
    "metrics.offload.out": ("metrics.offload.out is not a config field",
                            "set TAU_METRICS_OFFLOAD_OUT in the environment"),
    "execution.beta_features": ("execution.beta_features is not supported",
                                "MultiKueue is selected by the workload profile's executionTarget"),
}


@cache
def children(prefix: str) -> tuple[Field, ...]:
    """Direct children of an object path ('' for the top level)."""
    depth = 0 if not prefix else prefix.count(".") + 1
    out = []
    for f in FIELDS:
        if prefix and not f.path.startswith(prefix + "."):
            continue
        if f.path.count(".") == depth:
            out.append(f)
    return tuple(out)


@cache
def canonical_fields() -> tuple[Field, ...]:
    """Fields whose values appear in the normalized config: non-alias, non-reserved leaves, plus lists of
    objects (normalized item by item)."""
    out = []
    for f in FIELDS:
        if f.alias_of is not None or f.status == "reserved" or "[]" in f.path:
            continue
        if any(f.path.startswith(o + ".") for o in OPTIONAL_OBJECTS):
            continue
        if f.type == "object" and f.path not in OPTIONAL_OBJECTS:
            continue
        out.append(f)
    return tuple(out)


def aliases_of(path: str) -> list[Field]:
    return [f for f in FIELDS if f.alias_of == path]


def field_for_path(dotted_path: str) -> Field | None:
    """The catalog field behind a reported path (``storage.image_assets[0].name``, ``runtime.env.X``)."""
    import re

    path = re.sub(r"\[\d+\]", "[]", dotted_path)
    while path:
        f = BY_PATH.get(path)
        if f is not None:
            return f
        if "." not in path:
            return None
        path = path.rsplit(".", 1)[0]
    return None


def hint_for(dotted_path: str) -> str:
    """A fallback hint for a problem at ``dotted_path``: what the field is and what it accepts."""
    f = field_for_path(dotted_path)
    if f is None:
        return "see tau run explain-config for the valid fields"
    text = f"{f.path}: {f.description.rstrip('.')}"
    if f.values:
        text += " (allowed: " + ", ".join(f.values) + ")"
    elif f.item_values:
        text += " (allowed items: " + ", ".join(f.item_values) + ")"
    if f.engines != BOTH:
        text += f"; engine {f.engines[0]} only"
    return text
