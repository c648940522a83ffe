"""Pieces shared by the RayService and Deployment renderers: metadata, env, volumes, security."""

from __future__ import annotations

import json
from typing import Any

from tau_core import keys
from tau_core import rendering as r
from tau_core.errors import ConfigError
from tau_serve.spec import DATA_MOUNT, DATA_VOLUME, MODEL_PATH_ENV, ServeRenderRequest, Volume

Obj = dict[str, Any]


def profile(request: ServeRenderRequest) -> Obj:
    value = request.context.workload_profile
    if not value:
        raise ConfigError(f"render {request.kind}: no TauCluster workload profile was selected for rendering",
                          hint="pass --profile with a ready serving profile")
    return dict(value)


def queue(request: ServeRenderRequest) -> str:
    value = request.context.queue
    if not value:
        raise ConfigError(f"render {request.kind}: Kueue LocalQueue is required",
                          hint="the namespace's default LocalQueue is stamped by tau serve deploy")
    return str(value)


def namespace(request: ServeRenderRequest) -> str:
    value = request.context.namespace
    if not value:
        raise ConfigError(f"render {request.kind}: a namespace is required", hint="pass -n/--namespace")
    return str(value)


def labels(request: ServeRenderRequest) -> dict[str, str]:
    prof = profile(request)
    out = {keys.SERVICE: request.spec.name, keys.PROFILE: str(prof.get("name", "")),
           keys.KUEUE_QUEUE_NAME: queue(request), keys.MANAGED_BY: keys.MANAGED_BY_VALUE}
    return dict(sorted(out.items()))


def stamps(request: ServeRenderRequest) -> dict[str, str]:
    """Profile stamps, placement and the checkpoint; never a secret (env secrets are not annotated)."""
    ctx = request.context
    prof = profile(request)
    out: dict[str, str] = {keys.WORKLOAD_PROFILE: str(prof.get("name", ""))}
    if ctx.profile_set_hash:
        out[keys.WORKLOAD_PROFILE_SET_HASH] = str(ctx.profile_set_hash)
    if ctx.tau_cluster_generation is not None:
        out[keys.TAU_CLUSTER_GENERATION] = str(ctx.tau_cluster_generation)
    spec = request.spec
    if spec.image:
        out[keys.IMAGE] = spec.image
        digest = r.image_digest(spec.image)
        if digest:
            out[keys.IMAGE_DIGEST] = digest
    if spec.model_path:
        out[keys.STORAGE_MOUNTS] = json.dumps([{"source": "pvc", "path": DATA_MOUNT,
                                                "source_ref": spec.checkpoint_pvc}], separators=(",", ":"))
    return dict(sorted(out.items()))


def env(request: ServeRenderRequest) -> list[Obj]:
    """Literal env (sorted), ``TAU_MODEL_PATH``, then ``--env-secret`` as secretKeyRef (redacted in dry-run)."""
    spec = request.spec
    literal = dict(spec.env)
    if spec.model_path:
        literal[MODEL_PATH_ENV] = spec.model_path
    if keys.ENV_CLUSTER_JOB in literal or keys.ENV_CLUSTER_JOB in {s.name for s in spec.env_secrets}:
        raise ConfigError(f"--env {keys.ENV_CLUSTER_JOB} is reserved: tau sets it to 1 in every cluster workload",
                          hint=f"remove {keys.ENV_CLUSTER_JOB} from --env/--env-secret")
    clash = sorted(set(literal) & {s.name for s in spec.env_secrets})
    if clash:
        raise ConfigError(f"--env-secret {clash[0]} conflicts with --env {clash[0]}; set each variable once")
    out: list[Obj] = [{"name": k, "value": literal[k]} for k in sorted(literal)]
    for item in sorted(spec.env_secrets, key=lambda s: s.name):
        secret, key = (r.REDACTED, r.REDACTED) if request.redact else (item.secret, item.key)
        out.append({"name": item.name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
    return out


def runtime_env_vars(request: ServeRenderRequest) -> dict[str, str]:
    """The literal env for Ray's ``runtime_env.env_vars`` (secrets stay container env only)."""
    out = dict(request.spec.env)
    if request.spec.model_path:
        out[MODEL_PATH_ENV] = request.spec.model_path
    return dict(sorted(out.items()))


def volumes(request: ServeRenderRequest) -> list[Obj]:
    spec = request.spec
    out: list[Obj] = []
    if spec.model_path:
        out.append({"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": spec.checkpoint_pvc,
                                                                   "readOnly": True}})
    out.extend(_volume(v) for v in spec.volumes)
    return out


def _volume(v: Volume) -> Obj:
    if v.kind == "pvc":
        return {"name": v.name, "persistentVolumeClaim": {"claimName": v.source}}
    if v.kind == "emptyDir":
        return {"name": v.name, "emptyDir": {}}
    if v.kind == "configMap":
        return {"name": v.name, "configMap": {"name": v.source}}
    return {"name": v.name, "secret": {"secretName": v.source}}


def mounts(request: ServeRenderRequest) -> list[Obj]:
    spec = request.spec
    out: list[Obj] = []
    if spec.model_path:
        out.append({"name": DATA_VOLUME, "mountPath": DATA_MOUNT, "readOnly": True})
    for m in spec.mounts:
        item: Obj = {"name": m.name, "mountPath": m.path}
        if m.read_only:
            item["readOnly"] = True
        out.append(item)
    return out


def gpu_scheduling(gpus: int) -> tuple[dict[str, str], list[dict[str, str]]]:
    """(limits, tolerations) for a container with ``gpus`` GPUs."""
    if gpus <= 0:
        return {}, []
    return {keys.NVIDIA_GPU: str(gpus)}, [dict(t) for t in r.GPU_TOLERATIONS]


def resources(cpu: str, memory: str, gpus: int = 0) -> Obj:
    gpu, _ = gpu_scheduling(gpus)
    requests = {"cpu": cpu, "memory": memory, **gpu}
    return {"limits": dict(sorted({"memory": memory, **gpu}.items())), "requests": dict(sorted(requests.items()))}


def pod_annotations(prof: Obj) -> dict[str, str]:
    return r.topology_annotations(prof.get("placement"))


def finish_pod(pod_spec: Obj, prof: Obj) -> Obj:
    """Priority class from the profile, Restricted security and the in-job marker on every container."""
    prio = prof.get("priorities") or {}
    if prio.get("podPriorityClassName") and not prio.get("disableDefaultPriorities"):
        pod_spec["priorityClassName"] = str(prio["podPriorityClassName"])
    r.apply_restricted(pod_spec, fs_group=r.RESTRICTED_UID)
    return r.mark_cluster_workload(pod_spec)
