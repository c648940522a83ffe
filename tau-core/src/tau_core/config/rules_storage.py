"""Cross-field rules: storage, profiler, metrics and experiment, execution and resilience."""

from __future__ import annotations

import posixpath
import re
from typing import Any

from tau_core.config.catalog import JOB, RAYJOB, RETRY_REASONS
from tau_core.config.reserved import (
    RAY_TRAIN_SECTIONS,
    RESERVED_PATHS,
    RESERVED_VOLUMES,
    TORCHRUN_MANAGED_FLAGS,
)
from tau_core.config.rule_context import (
    CONFIG_KEY,
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    MAX_IMAGE_ASSETS,
    PINNED_HINT,
    PINNED_MESSAGE,
    TELEMETRY_ID,
    RuleContext,
    clean_absolute,
    has_pvc,
    mount_roots,
    overlaps,
    pinned,
    rule,
    under,
)

# -- storage -----------------------------------------------------------------------------------

@rule
def storage_rules(ctx: RuleContext) -> None:
    _claims(ctx)
    names = _volumes(ctx)
    _mounts(ctx, names)
    _output(ctx)
    if ctx.get("storage.publish") == "staged":
        if not has_pvc(ctx):
            ctx.error("storage.publish", "staged publishing needs durable output: set storage.data_pvc")
        if ctx.engine == JOB and ctx.get("execution.nodes", 1) > 1:
            ctx.error("storage.publish", "staged publishing requires a single Job pod (execution.nodes: 1)")
    _image_assets(ctx)
    _checkpoint(ctx)


def _claims(ctx: RuleContext) -> None:
    data_pvc = ctx.get("storage.data_pvc")
    result_pvc = ctx.get("storage.result_pvc")
    for path, claim in (("storage.data_pvc", data_pvc), ("storage.result_pvc", result_pvc)):
        if claim is not None and (len(claim) > 253 or not DNS1123_SUBDOMAIN.match(claim)):
            ctx.error(path, f"{claim!r} is not a valid PersistentVolumeClaim name")
    if data_pvc and result_pvc and data_pvc != result_pvc:
        ctx.error("storage.result_pvc", f"storage.result_pvc cannot differ from storage.data_pvc for "
                  f"{'job' if ctx.engine == JOB else 'RayJob'} run configs")
    if ctx.get("storage.volumes") and data_pvc:
        ctx.error("storage.volumes", "storage.data_pvc cannot be combined with storage.volumes for job run configs",
                  "use one of them")


def _volumes(ctx: RuleContext) -> set[str]:
    """``storage.volumes`` entries (``NAME=pvc:CLAIM``); the declared names."""
    volumes = ctx.get("storage.volumes") or []
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
    return names


def _mounts(ctx: RuleContext, names: set[str]) -> None:
    """``storage.mounts`` entries (``NAME:PATH[:ro|rw]``): known volume, clean path, no reserved or overlapping path."""
    volumes = ctx.get("storage.volumes") or []
    mounts = ctx.get("storage.mounts") or []
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


def _output(ctx: RuleContext) -> None:
    output = ctx.get("storage.output")
    if output is None:
        return
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


def _checkpoint(ctx: RuleContext) -> None:
    checkpoint = ctx.get("storage.checkpoint")
    if checkpoint is None:
        return
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
            ctx.error("storage.image_assets", f"storage.image_assets[{i}].image {PINNED_MESSAGE}", PINNED_HINT,
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
