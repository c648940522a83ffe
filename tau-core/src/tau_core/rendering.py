"""The rendering engine: one request in, Kubernetes objects out.

:func:`render` picks the renderer registered for the config's engine (``job`` -> ``Job``,
``rayjob`` -> ``RayJob``) through the ``tau_register_renderers`` hook and calls it with a
:class:`RenderRequest`.  Renderers never talk to a cluster and never produce random values
or timestamps: the only per-submission value is the submission id passed in the request,
from which publication and metrics-session ids are derived.

The helpers below are renderer-independent so that every workload renderer (Job, RayJob,
RayService, Deployment) builds metadata, security, placement and environment the same way.

``RenderRequest.context`` keys read by the helpers (all optional unless noted):

``namespace`` (required), ``queue`` (required), ``workspace``, ``workspace_id`` (alias
``workspace_uid``), ``service_account``, ``workload_identity`` (bool), ``workload_priority_class``
(alias ``priority_class``), ``pod_priority_class``, ``disable_default_priorities`` (bool),
``output`` (resolved ``storage.output``), ``output_root``, ``result_pvc``, ``workload_profile``
(dict: the selected profile), ``profile_set_hash``, ``tau_cluster_generation``,
``workload_profile_source``, ``topology`` (resolved placement), ``code_sha``, ``tau_command``
(argv, list or string), ``dry_run`` (``client``/``server``/None), ``redact_secrets`` (bool;
defaults to ``dry_run == "client"``), ``retry`` (dict ``attempt``/``max``/``reason``),
``resume_from``, ``artifact_publication_id``, ``metrics_session_id``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from tau_core import keys
from tau_core.errors import ConfigError, PluginError

if TYPE_CHECKING:
    from tau_core.plugins import Host

# -- constants --------------------------------------------------------------------------------

ENGINE_KINDS: dict[str, str] = {"job": "Job", "rayjob": "RayJob"}

PLACEHOLDER_QUEUE = "<unresolved-queue>"
PLACEHOLDER_NAMESPACE = "<unresolved-namespace>"
PLACEHOLDER_WORKSPACE = "<unresolved-workspace>"
PLACEHOLDER_SERVICE_ACCOUNT = "<unresolved-service-account>"
REDACTED = "<redacted>"

DEFAULT_JOB_TTL_SECONDS = 28800
RAYJOB_TTL_SECONDS = 15
MAX_TTL_SECONDS = 2147483647

MAX_LITERAL_ENV_VALUE_BYTES = 64 * 1024
MAX_LITERAL_ENV_TOTAL_BYTES = 128 * 1024
MAX_ANNOTATION_VALUE_BYTES = 8192

RESTRICTED_UID = 65532
DEFAULT_PRIORITY_CLASS = "taugrid-default"
PRIORITY_TIER_CLASS = "taugrid-priority"
DEFAULT_QUEUE = "jobqueue"

GPU_CLASSES = (
    "any",
    "a10-4gb",
    "a10-8gb",
    "a10-12gb",
    "a10-24gb",
    "a100-40gb",
    "a100-80gb",
    "h100-80gb",
    "h100-95gb",
    "h200-141gb",
    "gb200-192gb",
    "gb300-288gb",
)
GPU_CLASS_ALIASES = {
    "a100-nvlink-80gb": "a100-80gb",
    "h100-standalone-95gb": "h100-95gb",
    "h200-nvlink-141gb": "h200-141gb",
}
#: Placement vocabulary (decision 1) -> the Kueue topology request it renders.
PLACEMENTS: dict[str, tuple[str, str]] = {
    "independent": (keys.KUEUE_PODSET_UNCONSTRAINED_TOPOLOGY, "true"),
    "single-node-nvlink": (keys.KUEUE_PODSET_REQUIRED_TOPOLOGY, keys.HOSTNAME),
    "multi-node-nccl": (keys.KUEUE_PODSET_UNCONSTRAINED_TOPOLOGY, "true"),
    "elastic-workers": (keys.KUEUE_PODSET_UNCONSTRAINED_TOPOLOGY, "true"),
}
#: Placement names that some TauCluster catalogs publish; mapped onto the same annotations.
PLACEMENT_EQUIVALENTS: dict[str, tuple[str, str]] = {
    "unconstrained": (keys.KUEUE_PODSET_UNCONSTRAINED_TOPOLOGY, "true"),
    "same-host": (keys.KUEUE_PODSET_REQUIRED_TOPOLOGY, keys.HOSTNAME),
    "same-network-domain": (keys.KUEUE_PODSET_REQUIRED_TOPOLOGY, keys.NETWORK_DOMAIN),
    "same-site": (keys.KUEUE_PODSET_REQUIRED_TOPOLOGY, keys.SITE),
}

GPU_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    {"key": keys.NVIDIA_GPU, "operator": "Exists", "effect": "NoSchedule"},
)

#: Env keys a researcher may set inside the reserved ``TAU_`` namespace.
SETTABLE_TAU_ENV = ("TAU_RESUME_FROM", "TAU_RETRY_ATTEMPT", "TAU_RETRY_MAX", "TAU_RETRY_REASON")

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_PINNED = re.compile(
    r"^[a-z0-9]+([._-]+[a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[\w][\w.-]{0,127})?"
    r"@sha256:[0-9a-f]{64}$"
)


# -- the request ------------------------------------------------------------------------------


@dataclass
class RenderRequest:
    """Everything a renderer needs; renderers read nothing else (no cluster, no clock)."""

    name: str
    """Run name (DNS-1123); becomes ``metadata.name``."""
    config: Mapping[str, Any]
    """Normalized ``tau.yaml``: every field present, defaults applied, aliases resolved, engine set."""
    context: Mapping[str, Any]
    """Resolved platform values (see the module docstring for the keys)."""
    sources: Mapping[str, str] = field(default_factory=dict)
    """Dotted config path -> where the value came from (config, workspace default, ...)."""
    config_hash: str = ""
    submission_id: str = ""
    config_dir: Path | None = None
    """Directory of the config file: entrypoints, working dirs and archives are relative to it."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Process environment consulted by renderers (``TAU_METRICS_OFFLOAD_IMAGE``, ...)."""

    @property
    def kind(self) -> str:
        return kind_for_engine(str(self.config.get("engine") or "job"))

    def ctx(self, key: str, default: Any = None) -> Any:
        value = self.context.get(key)
        return default if value is None or value == "" else value


def kind_for_engine(engine: str) -> str:
    engine = engine.strip().lower()
    if engine == "ray":
        engine = "rayjob"
    try:
        return ENGINE_KINDS[engine]
    except KeyError:
        raise ConfigError(
            f'engine "{engine}" is not valid; use job or rayjob', hint="set engine: job or engine: rayjob"
        ) from None


def render(request: RenderRequest, host: Host | None = None) -> list[dict[str, Any]]:
    """Render ``request`` with the renderer registered for its engine's kind; workload first."""
    if host is None:
        from tau_core.plugins import get_host

        host = get_host()
    kind = request.kind
    registry = host.registry("renderers")
    if kind not in registry:
        raise PluginError(
            f"no renderer is registered for kind {kind}",
            hint="install tau-run (pip install tau-run), or check TAU_PLUGINS / TAU_DISABLE_PLUGINS",
        )
    renderer = registry[kind].load()
    return detached(renderer(request))


# -- small utilities ---------------------------------------------------------------------------


_PATHS: dict[str, tuple[str, ...]] = {}


def get(config: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    """``get(cfg, "storage.output")``: a nested value, or ``default`` when missing or None."""
    parts = _PATHS.get(dotted)
    if parts is None:
        parts = _PATHS[dotted] = tuple(dotted.split("."))
    node: Any = config
    for part in parts:
        try:
            node = node.get(part)
        except AttributeError:  # a scalar or a list where a mapping was expected
            return default
        if node is None:
            return default
    return node


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode()
    return hashlib.sha256(data).hexdigest()


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, non-ASCII kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def config_hash(config: Mapping[str, Any]) -> str:
    """The ``tau.azure.com/config-hash`` value: SHA-256 of the normalized config (decision 11)."""
    return sha256_hex(canonical_json(_plain(config)))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def derived_id(*parts: str, length: int = 24) -> str:
    """A deterministic hex id derived from ``parts`` (publication ids, metrics sessions)."""
    return sha256_hex("\x00".join(parts))[:length]


def is_placeholder(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("<unresolved-")


def label_value(value: str) -> str:
    """Sanitize ``value`` into a Kubernetes label value (<= 63 chars, a hash suffix when cut)."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", value.strip().lower())
    text = re.sub(r"-{2,}", "-", text).strip("-_.")
    if len(text) > 63:
        text = text[: 63 - 9].rstrip("-_.") + "-" + sha256_hex(value)[:8]
    if not _LABEL_VALUE.match(text):
        text = "x-" + sha256_hex(value)[:8]
    return text


def image_digest(image: str) -> str | None:
    match = _DIGEST.search(image)
    return match.group(0)[1:] if match else None


def is_pinned_image(image: str) -> bool:
    """A complete lowercase OCI reference pinned by ``@sha256:<64 lowercase hex>``."""
    return bool(_PINNED.match(image))


def require_pinned(image: str, field_name: str) -> None:
    if not is_pinned_image(image):
        raise ConfigError(
            f"{field_name} must be a complete lowercase OCI image reference pinned by an @sha256:<64 lowercase hex> digest",  # noqa: E501
            hint="resolve the tag to its digest (for example with `docker buildx imagetools inspect`) and use IMAGE@sha256:...",  # noqa: E501
        )


def shell_join(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def config_flags(configs: Mapping[str, Any] | None) -> list[str]:
    """``execution.configs`` as sorted ``--key=value`` script flags (python and torchrun launchers)."""
    flags: list[str] = []
    for key in sorted(configs or {}):
        value = (configs or {})[key]
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif value is None:
            text = ""
        else:
            text = str(value)
        flags.append(f"--{key}={text}" if text != "" else f"--{key}")
    return flags


# -- experiment identity -------------------------------------------------------------------------


def experiment_identity(config: Mapping[str, Any]) -> tuple[str, str, str]:
    """(project, experiment id, group); the id is ``name`` -> id from ``title`` -> ``group``."""
    project = str(get(config, "experiment.project", "") or "")
    group = str(get(config, "experiment.group", "") or "")
    name = str(get(config, "experiment.name", "") or "")
    if not name:
        title = str(get(config, "experiment.title", "") or "")
        if title:
            name = re.sub(r"[^a-z0-9._-]+", "-", title.strip().lower()).strip("-")
    return project, name or group, group


# -- output and storage ---------------------------------------------------------------------------


def result_pvc(request: RenderRequest) -> str | None:
    cfg = request.config
    pvc = request.ctx("result_pvc") or get(cfg, "storage.result_pvc") or get(cfg, "storage.data_pvc")
    if pvc:
        return str(pvc)
    for spec in get(cfg, "storage.volumes", []) or []:
        name, _, rest = str(spec).partition("=")
        kind, _, src = rest.partition(":")
        if name == "data" and kind == "pvc" and src:
            return src
    volumes = [str(v) for v in get(cfg, "storage.volumes", []) or []]
    if len(volumes) == 1 and not get(cfg, "storage.mounts"):
        _, _, rest = volumes[0].partition("=")
        kind, _, src = rest.partition(":")
        if kind == "pvc" and src:
            return src
    return None


def resolved_output(request: RenderRequest) -> str | None:
    """``storage.output`` after defaults: workspace outputRoot, then ``/data/checkpoints/workflows/<name>``."""
    explicit = request.ctx("output") or get(request.config, "storage.output")
    if explicit:
        return str(explicit)
    if result_pvc(request) is None:
        return None
    root = request.ctx("output_root")
    if root:
        return str(PurePosixPath(str(root)) / request.name)
    return f"/data/checkpoints/workflows/{request.name}"


def storage_mounts_annotation(pvc: str | None) -> str | None:
    if not pvc:
        return None
    return canonical_json([{"path": "/data", "source": "pvc", "source_ref": pvc}])


# -- metadata ---------------------------------------------------------------------------------------


def workload_profile(request: RenderRequest) -> Mapping[str, Any] | None:
    profile = request.context.get("workload_profile")
    return profile if isinstance(profile, Mapping) and profile else None


def profile_name(request: RenderRequest) -> str | None:
    profile = workload_profile(request)
    if profile and profile.get("name"):
        return str(profile["name"])
    name = get(request.config, "policy.profile")
    return str(name) if name else None


def queue_name(request: RenderRequest, default: str | None = None) -> str:
    """The Kueue LocalQueue: resolved context, ``policy.queue``, the profile's default, then ``default``."""
    queue = request.ctx("queue") or get(request.config, "policy.queue")
    if not queue:
        profile = workload_profile(request)
        queue = profile.get("defaultLocalQueue") if profile else None
    queue = queue or default
    if not queue:
        raise ConfigError(
            f"render suspended {request.kind}: Kueue LocalQueue is required",
            hint="set policy.queue, connect a workspace, or select a workload profile with a defaultLocalQueue",
        )
    return str(queue)


def namespace(request: RenderRequest) -> str:
    ns = request.ctx("namespace") or get(request.config, "policy.namespace")
    if not ns:
        raise ConfigError(
            "no namespace resolved for this workload: connect a workspace (see `tau workspace list`) or pass --namespace",  # noqa: E501
            hint="set policy.namespace or pass --namespace",
        )
    return str(ns)


def priority_classes(request: RenderRequest) -> tuple[str | None, str | None]:
    """(Kueue WorkloadPriorityClass, pod PriorityClass) after context, config, profile and defaults."""
    cfg = request.config
    profile = workload_profile(request) or {}
    prio = profile.get("priorities") or {}
    workload = (
        request.ctx("workload_priority_class")
        or request.ctx("priority_class")
        or get(cfg, "policy.workload_priority_class")
        or prio.get("workloadPriorityClassName")
    )
    pod = request.ctx("pod_priority_class") or get(cfg, "policy.pod_priority_class") or prio.get("podPriorityClassName")
    disabled = request.ctx("disable_default_priorities")
    if disabled is None:
        disabled = get(cfg, "policy.disable_default_priorities")
    if disabled is None:
        disabled = prio.get("disableDefaultPriorities")
    if not disabled:
        tier = get(cfg, "policy.priority_tier") or get(cfg, "policy.priority") or "default"
        default = PRIORITY_TIER_CLASS if tier == "priority" else DEFAULT_PRIORITY_CLASS
        workload = workload or default
        pod = pod or default
    return (str(workload) if workload else None, str(pod) if pod else None)


def workload_labels(request: RenderRequest, *, workload_kind: str, default_queue: str | None = None) -> dict[str, str]:
    """Labels of the workload object (§3.1)."""
    cfg = request.config
    labels: dict[str, str] = {
        keys.KUEUE_QUEUE_NAME: queue_name(request, default_queue),
        keys.MANAGED_BY: keys.MANAGED_BY_VALUE,
        keys.RUN_ID: request.name,
        keys.WORKLOAD_KIND: workload_kind,
    }
    project, experiment, group = experiment_identity(cfg)
    if project:
        labels[keys.STELLAR_PROJECT] = label_value(project)
    if experiment:
        labels[keys.STELLAR_EXPERIMENT] = label_value(experiment)
    if group:
        labels[keys.STELLAR_GROUP] = label_value(group)
    workspace = request.ctx("workspace") or get(cfg, "policy.workspace")
    if workspace:
        # a client dry-run placeholder stays visible as such instead of being sanitized away
        labels[keys.WORKSPACE] = str(workspace) if is_placeholder(workspace) else label_value(str(workspace))
    profile = profile_name(request)
    if profile:
        labels[keys.PROFILE] = label_value(profile)
    gpu_class = normalized_gpu_class(get(cfg, "policy.gpu_class"))
    if gpu_class:
        labels[keys.GPU_CLASS] = gpu_class
    workload_prio, _ = priority_classes(request)
    if workload_prio:
        labels[keys.KUEUE_PRIORITY_CLASS] = workload_prio
    return dict(sorted(labels.items()))


def workload_annotations(
    request: RenderRequest,
    *,
    image: str | None,
    gpu_count: int = 0,
    payload: Mapping[str, str] | None = None,
    execution: Mapping[str, Any] | None = None,
    extra: Mapping[str, str | None] | None = None,
) -> dict[str, str]:
    """Annotations of the workload object (§3.1); values over 8 KiB are dropped."""
    cfg = request.config
    ann: dict[str, str | None] = {
        keys.CAPTURE_VERSION: keys.CAPTURE_VERSION_VALUE,
        keys.NAMESPACE: namespace(request),
        keys.WORKSPACE_ID: _str(request.ctx("workspace_id") or request.ctx("workspace_uid")),
        keys.RESULT_SCOPE: _str(request.ctx("output_root")),
        keys.TAU_COMMAND: _command_text(request.ctx("tau_command")),
        keys.IMAGE: image,
        keys.IMAGE_DIGEST: image_digest(image) if image else None,
        keys.CODE_SHA: _str(request.ctx("code_sha")),
        keys.CONFIG_HASH: request.config_hash or config_hash(cfg),
        keys.GPU_COUNT: str(gpu_count) if gpu_count > 0 else None,
        keys.SUBMISSION_ID: request.submission_id or None,
    }
    pvc = result_pvc(request)
    output = resolved_output(request)
    ann[keys.STORAGE_MOUNTS] = storage_mounts_annotation(pvc)
    if output and pvc:
        ann[keys.RESULT_PATH] = output
        ann[keys.RESULT_PVC] = pvc
    project, experiment, group = experiment_identity(cfg)
    if project:
        ann[keys.STELLAR_PROJECT_VALUE] = project
    if experiment:
        ann[keys.STELLAR_EXPERIMENT_ID] = experiment
    if group:
        ann[keys.STELLAR_GROUP_VALUE] = group
    workspace = request.ctx("workspace") or get(cfg, "policy.workspace")
    tags: dict[str, str] = {}
    if workspace:
        tags["workspace"] = str(workspace)
    if tags:
        ann[keys.STELLAR_TAGS] = canonical_json(tags)
    ann.update(profile_stamps(request))
    if execution:
        ann[keys.WORKLOADSPEC_EXECUTION] = canonical_json(dict(execution))
    ann.update(payload or {})
    ann.update(extra or {})
    return {
        k: v
        for k, v in sorted(ann.items())
        if v is not None and v != "" and len(v.encode()) <= MAX_ANNOTATION_VALUE_BYTES
    }


def profile_stamps(request: RenderRequest) -> dict[str, str]:
    """Doc 43 stamps identifying the observed workload-profile revision."""
    profile = workload_profile(request)
    if not profile:
        return {}
    stamps: dict[str, str] = {keys.WORKLOAD_PROFILE: str(profile.get("name", ""))}
    generation = request.ctx("tau_cluster_generation")
    if generation is not None:
        stamps[keys.TAU_CLUSTER_GENERATION] = str(generation)
    set_hash = request.ctx("profile_set_hash")
    if set_hash:
        stamps[keys.WORKLOAD_PROFILE_SET_HASH] = str(set_hash)
    source = request.ctx("workload_profile_source")
    if source:
        stamps[keys.WORKLOAD_PROFILE_SOURCE] = str(source)
    return {k: v for k, v in stamps.items() if v}


def pod_correlation_annotations(workload_annotations: Mapping[str, str]) -> dict[str, str]:
    """The subset of workload annotations that pod templates carry."""
    keep = (keys.WORKSPACE_ID, keys.RESULT_SCOPE, keys.EXPERIMENT_SOURCE, keys.METRICS_SESSION_ID)
    return {k: v for k, v in sorted(workload_annotations.items()) if k in keep or (k.startswith(keys.STELLAR_PREFIX))}


def _str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


_SECRET_FLAG = re.compile(r"^--?[A-Za-z0-9-]*(token|secret|password|key|credential)[A-Za-z0-9-]*$", re.I)


def _command_text(value: Any) -> str | None:
    """The ``tau`` argv as one string, with the values of secret-looking flags redacted."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError:  # unbalanced quotes: fall back to whitespace words
            argv = value.split()
    else:
        argv = [str(v) for v in value]
    out: list[str] = []
    redact_next = False
    for arg in argv:
        if redact_next:
            out.append(REDACTED)
            redact_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if _SECRET_FLAG.match(flag):
            if eq:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(arg)
                redact_next = True
            continue
        out.append(arg)
    return shell_join(out)


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
    value = request.ctx("topology") or get(request.config, "policy.topology")
    if not value:
        profile = workload_profile(request)
        value = profile.get("placement") if profile else None
    return str(value) if value else None


def node_selector(request: RenderRequest, gpus: int) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Pod node selector and tolerations: GPU class, then ``policy.node_selector`` merged last."""
    user = selector_map(get(request.config, "policy.node_selector"))
    return gpu_placement(get(request.config, "policy.gpu_class"), user, gpus)


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


def ttl_seconds(config: Mapping[str, Any], kind: str) -> int:
    """``ttlSecondsAfterFinished``: 28800 for a Job unless configured; fixed 15 for a RayJob."""
    if kind == "RayJob":
        return RAYJOB_TTL_SECONDS
    value = get(config, "run.ttl_seconds_after_finished")
    if value is None:
        return DEFAULT_JOB_TTL_SECONDS
    ttl = int(value)
    if not 1 <= ttl <= MAX_TTL_SECONDS:
        raise ConfigError(
            f"run.ttl_seconds_after_finished must be between 1 and {MAX_TTL_SECONDS}, got {ttl}",
            hint="omit it to keep the 28800-second default",
        )
    return ttl


# -- environment --------------------------------------------------------------------------------------


def reserved_env_keys(names: Iterable[str], *, allow_nccl: bool = False, extra: Iterable[str] = ()) -> list[str]:
    """The names in ``names`` that Tau owns (``TAU_*`` except the settable ones, MASTER_*, NCCL_*)."""
    extra_set = set(extra)
    bad = []
    for name in names:
        if name.upper().startswith("TAU_") and name not in SETTABLE_TAU_ENV:
            bad.append(name)
        elif name in ("MASTER_ADDR", "MASTER_PORT") or name in extra_set:
            bad.append(name)
        elif name.startswith("NCCL_") and not allow_nccl:
            bad.append(name)
    return sorted(bad)


def check_reserved_env(user_env: Mapping[str, Any], *, allow_nccl: bool, extra: Iterable[str] = ()) -> None:
    bad = reserved_env_keys(user_env, allow_nccl=allow_nccl, extra=extra)
    if bad:
        raise ConfigError(
            f"runtime.env contains Tau-managed keys that cannot be overridden: {', '.join(bad)}",
            hint="remove them from runtime.env (settable TAU_ keys: " + ", ".join(SETTABLE_TAU_ENV) + ")",
        )


def check_env_limits(env: Sequence[Mapping[str, Any]]) -> None:
    """64 KiB per literal value and 128 KiB in total (``len(name)+1+len(value)+1``); refs excluded."""
    total = 0
    for entry in env:
        if "value" not in entry:
            continue
        name = str(entry["name"])
        size = len(str(entry["value"]).encode())
        if size > MAX_LITERAL_ENV_VALUE_BYTES:
            raise ConfigError(
                f'literal environment variable "{name}" is {size} bytes; maximum is {MAX_LITERAL_ENV_VALUE_BYTES} bytes',  # noqa: E501
                hint="publish source or artifacts once and reference a digest-pinned OCI image with run.source "
                "instead of embedding content in environment variables",
            )
        total += len(name.encode()) + 1 + size + 1
    if total > MAX_LITERAL_ENV_TOTAL_BYTES:
        raise ConfigError(
            f"literal environment payload is {total} bytes; maximum is {MAX_LITERAL_ENV_TOTAL_BYTES} bytes",
            hint="publish source or artifacts once and reference a digest-pinned OCI image with run.source "
            "instead of embedding content in environment variables",
        )


def redact_secrets(request: RenderRequest) -> bool:
    flag = request.context.get("redact_secrets")
    if flag is None:
        return request.context.get("dry_run") == "client"
    return bool(flag)


def user_env(request: RenderRequest) -> list[dict[str, Any]]:
    """``runtime.env`` (literal, sorted) and ``runtime.env_secret`` as ``secretKeyRef`` (never values)."""
    cfg = request.config
    literal = {str(k): "" if v is None else str(v) for k, v in (get(cfg, "runtime.env", {}) or {}).items()}
    secrets = {str(k): str(v) for k, v in (get(cfg, "runtime.env_secret", {}) or {}).items()}
    clash = sorted(set(literal) & set(secrets))
    if clash:
        name = clash[0]
        raise ConfigError(
            f"runtime.env_secret.{name} conflicts with runtime.env.{name}; set each env var in only one place",
            hint=f"remove {name} from runtime.env or from runtime.env_secret",
        )
    out: list[dict[str, Any]] = [{"name": k, "value": literal[k]} for k in sorted(literal)]
    redact = redact_secrets(request)
    for name in sorted(secrets):
        secret, sep, key = secrets[name].partition(":")
        if not sep or not secret or not key:
            raise ConfigError(
                f'runtime.env_secret.{name} must be "SECRET_NAME:KEY"',
                hint="reference an existing Secret and key; secret values never go into tau.yaml",
            )
        ref = {"name": REDACTED, "key": REDACTED} if redact else {"name": secret, "key": key}
        out.append({"name": name, "valueFrom": {"secretKeyRef": ref}})
    return out


def retry_env(request: RenderRequest) -> list[dict[str, str]]:
    """``TAU_RESUME_FROM`` and the ``TAU_RETRY_*`` quartet for retries and resumes."""
    env: list[dict[str, str]] = []
    retry = request.context.get("retry")
    resume = request.ctx("resume_from")
    if isinstance(retry, Mapping) and retry:
        checkpoint = (
            resume or get(request.config, "resilience.checkpoint_path") or f"/data/checkpoints/finetunes/{request.name}"
        )
        env += [
            {"name": "TAU_RESUME_FROM", "value": str(checkpoint)},
            {"name": "TAU_RETRY_ATTEMPT", "value": str(retry.get("attempt", 0))},
            {"name": "TAU_RETRY_MAX", "value": str(retry.get("max", 0))},
            {"name": "TAU_RETRY_REASON", "value": str(retry.get("reason", ""))},
        ]
    elif resume:
        env.append({"name": "TAU_RESUME_FROM", "value": str(resume)})
    return env


def merge_env(*groups: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Concatenate env groups; a later entry with the same name replaces the earlier one in place."""
    order: list[str] = []
    merged: dict[str, dict[str, Any]] = {}
    for group in groups:
        for entry in group:
            name = str(entry["name"])
            if name not in merged:
                order.append(name)
            merged[name] = dict(entry)
    return [merged[n] for n in order]


# -- security -------------------------------------------------------------------------------------------


def restricted_mode(config: Mapping[str, Any]) -> bool:
    return bool(get(config, "runtime.security.mode") == "restricted")


def hardened_container_security() -> dict[str, Any]:
    """What every Tau-generated sidecar gets regardless of mode: no privilege escalation, no caps."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def apply_restricted(pod_spec: dict[str, Any], *, fs_group: int | None = None, owner: str = "pod") -> None:
    """Apply the Kubernetes Restricted Pod Security fields to a pod spec and all its containers.

    Explicit non-zero user/group ids are kept; anything that contradicts the profile (root,
    privileged, privilege escalation, added capabilities, unconfined seccomp) is an error.
    """
    psc = dict(pod_spec.get("securityContext") or {})
    _check_owner(psc, owner)
    psc["runAsNonRoot"] = True
    psc.setdefault("seccompProfile", {"type": "RuntimeDefault"})
    if fs_group is not None:
        psc.setdefault("fsGroup", fs_group)
    pod_spec["securityContext"] = dict(sorted(psc.items()))
    for group in ("initContainers", "containers"):
        for container in pod_spec.get(group) or []:
            container["securityContext"] = restricted_container_security(
                container.get("securityContext") or {}, str(container.get("name", "?"))
            )


def restricted_container_security(current: Mapping[str, Any], name: str) -> dict[str, Any]:
    sc = dict(current)
    if sc.get("privileged"):
        raise ConfigError(
            f'runtime.security.mode=restricted conflicts with privileged container "{name}"',
            hint="remove privileged: true or drop runtime.security.mode",
        )
    if sc.get("allowPrivilegeEscalation"):
        raise ConfigError(
            f'runtime.security.mode=restricted conflicts with allowPrivilegeEscalation on container "{name}"',
            hint="remove allowPrivilegeEscalation or drop runtime.security.mode",
        )
    caps = sc.get("capabilities") or {}
    if caps.get("add"):
        raise ConfigError(
            f'runtime.security.mode=restricted conflicts with added capabilities on container "{name}"',
            hint="remove the added capabilities or drop runtime.security.mode",
        )
    _check_owner(sc, f'container "{name}"')
    sc["allowPrivilegeEscalation"] = False
    sc["capabilities"] = {"drop": ["ALL"]}
    sc["runAsNonRoot"] = True
    sc.setdefault("runAsUser", RESTRICTED_UID)
    sc.setdefault("runAsGroup", RESTRICTED_UID)
    sc.setdefault("seccompProfile", {"type": "RuntimeDefault"})
    return dict(sorted(sc.items()))


def _check_owner(sc: Mapping[str, Any], owner: str) -> None:
    if sc.get("runAsNonRoot") is False:
        raise ConfigError(
            f"runtime.security.mode=restricted conflicts with runAsNonRoot=false on {owner}",
            hint="let the workload run as a non-root user",
        )
    if sc.get("runAsUser") == 0:
        raise ConfigError(
            f"runtime.security.mode=restricted conflicts with runAsUser=0 on {owner}", hint="use a non-zero user id"
        )
    seccomp = sc.get("seccompProfile") or {}
    if seccomp.get("type") == "Unconfined":
        raise ConfigError(
            f"runtime.security.mode=restricted conflicts with unconfined seccomp on {owner}",
            hint="use the RuntimeDefault seccomp profile",
        )


# -- payload digests ------------------------------------------------------------------------------------


def script_payload_digest(data: bytes) -> dict[str, str]:
    return {keys.SCRIPT_PAYLOAD_DIGEST: sha256_hex(data)}


def source_payload_digest(image: str, path: str, entrypoint: str) -> dict[str, str]:
    return {keys.PAYLOAD_DIGEST: sha256_hex(f"{image}\n{path}\n{entrypoint}")}


_QUANTITY = re.compile(r"^([+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][-+]?[0-9]+|[mkMGTPE]|[KMGTPE]i)?$")
_SUFFIX = {"": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}


def quantity_value(value: Any) -> float | None:
    """A Kubernetes resource quantity as a number (``"500m"`` -> 0.5, ``"1Gi"`` -> 1073741824.0)."""
    match = _QUANTITY.match(str(value).strip())
    if not match:
        return None
    number, suffix = float(match.group(1)), match.group(2) or ""
    if suffix[:1] in ("e", "E") and suffix not in _SUFFIX:
        return float(number * 10 ** int(suffix[1:]))
    return number * _SUFFIX[suffix]


def check_request_within_limit(what: str, request: Any, limit: Any) -> None:
    """A request above its limit is rejected by the API server; say so before submitting."""
    req, lim = quantity_value(request), quantity_value(limit)
    if req is not None and lim is not None and req > lim:
        raise ConfigError(f"{what} request {request} is above its limit {limit}",
                          hint="raise the limit or lower the request")


def detached(objects: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Independent plain copies (no shared sub-objects, so YAML has no anchors and edits stay local)."""
    return [_plain_copy(obj) for obj in objects]


def _plain_copy(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool:
        return value
    if kind is dict or isinstance(value, Mapping):
        return {str(k): _plain_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_copy(v) for v in value]
    return value


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
