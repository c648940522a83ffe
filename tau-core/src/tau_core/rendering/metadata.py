"""Workload metadata: output and storage, queue, namespace, priorities, labels and annotations."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from tau_core import keys
from tau_core.errors import ConfigError
from tau_core.rendering.constants import (
    DEFAULT_PRIORITY_CLASS,
    MAX_ANNOTATION_VALUE_BYTES,
    PRIORITY_TIER_CLASS,
    REDACTED,
)
from tau_core.rendering.placement import normalized_gpu_class
from tau_core.rendering.values import (
    canonical_json,
    config_hash,
    experiment_identity,
    image_digest,
    is_placeholder,
    label_value,
    shell_join,
)

if TYPE_CHECKING:
    from tau_core.rendering.engine import RenderRequest

# -- output and storage ---------------------------------------------------------------------------


def result_pvc(request: RenderRequest) -> str | None:
    storage = request.config.storage
    pvc = request.context.result_pvc or storage.result_pvc or storage.data_pvc
    if pvc:
        return str(pvc)
    for spec in storage.volumes or []:
        name, _, rest = str(spec).partition("=")
        kind, _, src = rest.partition(":")
        if name == "data" and kind == "pvc" and src:
            return src
    volumes = [str(v) for v in storage.volumes or []]
    if len(volumes) == 1 and not storage.mounts:
        _, _, rest = volumes[0].partition("=")
        kind, _, src = rest.partition(":")
        if kind == "pvc" and src:
            return src
    return None


def resolved_output(request: RenderRequest) -> str | None:
    """``storage.output`` after defaults: workspace outputRoot, then ``/data/checkpoints/workflows/<name>``."""
    explicit = request.context.output or request.config.storage.output
    if explicit:
        return str(explicit)
    if result_pvc(request) is None:
        return None
    root = request.context.output_root
    if root:
        return str(PurePosixPath(str(root)) / request.name)
    return f"/data/checkpoints/workflows/{request.name}"


def storage_mounts_annotation(pvc: str | None) -> str | None:
    if not pvc:
        return None
    return canonical_json([{"path": "/data", "source": "pvc", "source_ref": pvc}])


# -- metadata ---------------------------------------------------------------------------------------


def workload_profile(request: RenderRequest) -> Mapping[str, Any] | None:
    profile = request.context.workload_profile
    return profile or None


def profile_name(request: RenderRequest) -> str | None:
    profile = workload_profile(request)
    if profile and profile.get("name"):
        return str(profile["name"])
    name = request.config.policy.profile
    return str(name) if name else None


def queue_name(request: RenderRequest, default: str | None = None) -> str:
    """The Kueue LocalQueue: resolved context, ``policy.queue``, the profile's default, then ``default``."""
    queue = request.context.queue or request.config.policy.queue
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
    ns = request.context.namespace or request.config.policy.namespace
    if not ns:
        raise ConfigError(
            "no namespace resolved for this workload: connect a workspace (see `tau workspace list`) or pass --namespace",  # noqa: E501
            hint="set policy.namespace or pass --namespace",
        )
    return str(ns)


def priority_classes(request: RenderRequest) -> tuple[str | None, str | None]:
    """(Kueue WorkloadPriorityClass, pod PriorityClass) after context, config, profile and defaults."""
    policy = request.config.policy
    profile = workload_profile(request) or {}
    prio = profile.get("priorities") or {}
    workload = (
        request.context.workload_priority_class
        or policy.workload_priority_class
        or prio.get("workloadPriorityClassName")
    )
    pod = (request.context.pod_priority_class or policy.pod_priority_class
           or prio.get("podPriorityClassName"))
    disabled: Any = request.context.disable_default_priorities
    if disabled is None:
        disabled = policy.disable_default_priorities
    if disabled is None:
        disabled = prio.get("disableDefaultPriorities")
    if not disabled:
        tier = policy.priority_tier or "default"
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
    workspace = request.context.workspace or cfg.policy.workspace
    if workspace:
        # a client dry-run placeholder stays visible as such instead of being sanitized away
        labels[keys.WORKSPACE] = str(workspace) if is_placeholder(workspace) else label_value(str(workspace))
    profile = profile_name(request)
    if profile:
        labels[keys.PROFILE] = label_value(profile)
    gpu_class = normalized_gpu_class(cfg.policy.gpu_class)
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
        keys.WORKSPACE_ID: _str(request.context.workspace_id),
        keys.RESULT_SCOPE: _str(request.context.output_root),
        keys.TAU_COMMAND: _command_text(request.context.tau_command),
        keys.IMAGE: image,
        keys.IMAGE_DIGEST: image_digest(image) if image else None,
        keys.CODE_SHA: _str(request.context.code_sha),
        keys.CONFIG_HASH: request.config_hash or config_hash(request.normalized),
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
    workspace = request.context.workspace or cfg.policy.workspace
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
    generation = request.context.tau_cluster_generation
    if generation is not None:
        stamps[keys.TAU_CLUSTER_GENERATION] = str(generation)
    set_hash = request.context.profile_set_hash
    if set_hash:
        stamps[keys.WORKLOAD_PROFILE_SET_HASH] = str(set_hash)
    source = request.context.workload_profile_source
    if source:
        stamps[keys.WORKLOAD_PROFILE_SOURCE] = str(source)
    return {k: v for k, v in stamps.items() if v}


def pod_labels(request: RenderRequest, labels: Mapping[str, str]) -> dict[str, str]:
    """Pod-template labels: the workload's minus Kueue's, plus the workload-identity opt-in (sorted)."""
    out = {k: v for k, v in labels.items() if not k.startswith("kueue.x-k8s.io/")}
    sa = request.context.service_account
    if request.context.workload_identity and sa and not is_placeholder(sa):
        out[keys.WORKLOAD_IDENTITY_USE] = "true"
    return dict(sorted(out.items()))


def pod_correlation_annotations(workload_annotations: Mapping[str, str]) -> dict[str, str]:
    """The subset of workload annotations that pod templates carry."""
    keep = (keys.WORKSPACE_ID, keys.RESULT_SCOPE, keys.EXPERIMENT_SOURCE, keys.METRICS_SESSION_ID)
    return {k: v for k, v in sorted(workload_annotations.items()) if k in keep or (k.startswith(keys.STELLAR_PREFIX))}


def _str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


_SECRET_FLAG = re.compile(r"^--?[A-Za-z0-9-]*(token|secret|password|key|credential)[A-Za-z0-9-]*$", re.I)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of every secret-looking flag (token, secret, password, key, credential)
    replaced by ``<redacted>``, whether it follows as ``--flag=value`` or as the next word."""
    out: list[str] = []
    redact_next = False
    for arg in argv:
        if redact_next:
            out.append(REDACTED)
            redact_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if _SECRET_FLAG.match(flag):
            out.append(f"{flag}={REDACTED}" if eq else arg)
            redact_next = not eq
            continue
        out.append(arg)
    return out


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
    return shell_join(redact_argv(argv))
