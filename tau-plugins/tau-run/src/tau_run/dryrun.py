"""Client dry-run output: the rendered objects as YAML, every resolved value annotated with its source.

A header lists every resolved value (``# policy.queue = jobqueue  (from: workload profile)``);
inside the objects, fields that carry a resolved value get an end-of-line comment
(``namespace: research  # from: flag``), so doc 17's "default sources visible" holds.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from tau_core import keys
from tau_core.config.resolve import Resolution

#: rendered mapping key -> the source-map entry that explains it
KEY_SOURCES: dict[str, str] = {
    keys.KUEUE_QUEUE_NAME: "context.queue",
    keys.WORKSPACE: "context.workspace",
    keys.NAMESPACE: "context.namespace",
    "serviceAccountName": "context.service_account",
    keys.KUEUE_PRIORITY_CLASS: "policy.workload_priority_class",
    "priorityClassName": "policy.pod_priority_class",
    "ttlSecondsAfterFinished": "run.ttl_seconds_after_finished",
    keys.GPU_CLASS: "policy.gpu_class",
    keys.KUEUE_PODSET_REQUIRED_TOPOLOGY: "policy.topology",
    keys.KUEUE_PODSET_UNCONSTRAINED_TOPOLOGY: "policy.topology",
    keys.WORKLOAD_PROFILE: "context.workload_profile",
    keys.WORKLOAD_PROFILE_SET_HASH: "context.workload_profile",
    keys.TAU_CLUSTER_GENERATION: "context.workload_profile",
    keys.PROFILE: "context.workload_profile",
    keys.RESULT_PATH: "storage.output",
    keys.CONFIG_HASH: "config",
    "parallelism": "execution.nodes",
    "completions": "execution.nodes",
    "replicas": "compute.workers",
}


def _source_for(key: str, value: Any, path: tuple[str, ...], resolution: Resolution) -> str | None:
    sources: Mapping[str, str] = resolution.request.sources
    cfg = resolution.request.config
    if key == "namespace" and path[-1:] == ("metadata",):
        return sources.get("context.namespace")
    if key == "name" and path == ("metadata",):
        return sources.get("name")
    if key == "image" and isinstance(value, str) and value == cfg.runtime.image:
        return sources.get("runtime.image")
    if key == "nvidia.com/gpu":
        return sources.get("compute.gpus") or sources.get("compute.gpus_per_worker")
    if key == "ttlSecondsAfterFinished" and resolution.validated.engine != "job":
        return "default"
    if key == keys.CONFIG_HASH:
        return "config (hash of the normalized config)"
    if key in ("cpu", "memory") and len(path) >= 2 and path[-2] == "resources" and path[-1] in ("requests", "limits"):
        kind = "request" if path[-1] == "requests" else "limit"
        group = "head_" if "headGroupSpec" in path else "worker_" if "workerGroupSpecs" in path else ""
        for field in ([f"{group}{key}_{kind}"] if group else []) + [f"{key}_{kind}"]:
            given = getattr(cfg.compute, field, None)
            if given is not None and str(given) == str(value):
                return sources.get(f"compute.{field}", "config")
        return "default"
    entry = KEY_SOURCES.get(key)
    if entry is None:
        return None
    if entry == "policy.workload_priority_class" or entry == "policy.pod_priority_class":
        return sources.get(entry) or ("workload profile" if resolution.request.context.workload_profile
                                      else "default")
    if entry == "storage.output":
        return sources.get("storage.output") or ("workspace default" if "context.output_root" in sources
                                                 else "default")
    return sources.get(entry)


def _env_source(name: str, resolution: Resolution) -> str:
    if name in (resolution.request.config.runtime.env or {}):
        return resolution.request.sources.get("runtime.env", "config")
    return "default (set by tau)"


def _annotate(node: Any, resolution: Resolution, path: tuple[str, ...] = ()) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(node, Mapping):
        out = CommentedMap()
        env_item = path[-2:] == ("env", "[]") and "name" in node and "value" in node
        for key, value in node.items():
            out[key] = _annotate(value, resolution, (*path, str(key)))
            if not isinstance(value, (Mapping, list)):
                source: str | None
                if env_item and key == "value":
                    source = _env_source(str(node["name"]), resolution)
                else:
                    source = _source_for(str(key), value, path, resolution)
                if source:
                    out.yaml_add_eol_comment(f"from: {source}", key)
        return out
    if isinstance(node, list):
        seq = CommentedSeq()
        for item in node:
            seq.append(_annotate(item, resolution, (*path, "[]")))
        return seq
    return node


def _header(resolution: Resolution) -> list[str]:
    req = resolution.request
    lines = [f"# tau run --dry-run=client: {resolution.validated.document.display} "
             f"({resolution.validated.engine}, config-hash {req.config_hash[:12]})",
             "# resolved values and where they came from:"]
    for key in sorted(resolution.values):
        value = resolution.values[key]
        lines.append(f"#   {key} = {value.value}  (from: {value.source})")
    cfg = req.normalized
    from tau_core.config.validate import get_path

    for path in sorted(req.sources):
        if path.startswith("context."):
            continue
        value = get_path(cfg, path)
        if value is None:
            continue
        shown = value if not isinstance(value, (dict, list)) else "{...}" if isinstance(value, dict) else "[...]"
        if path.startswith("runtime.env"):
            shown = "{...}"
        lines.append(f"#   {path} = {shown}  (from: {req.sources[path]})")
    return lines


def annotated_yaml(objects: list[dict[str, Any]], resolution: Resolution) -> str:
    """The rendered objects as a multi-document YAML stream with source comments."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt", pure=True)
    yaml.default_flow_style = False
    yaml.width = 4096
    buf = io.StringIO()
    buf.write("\n".join(_header(resolution)) + "\n")
    for i, obj in enumerate(objects):
        buf.write("---\n")
        yaml.dump(_annotate(obj, resolution), buf)
        if i == len(objects) - 1:
            break
    return buf.getvalue()
