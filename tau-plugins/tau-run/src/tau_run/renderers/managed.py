"""What a managed workflow manifest (``schema_version: 1``) adds to the rendered RayJob.

The manifest reaches the RayJob renderer as a direct config plus a
:class:`tau_core.config.managed.ManagedPayload` (render context ``managed``): the wrapper and the
staged module travel in the usual script payload; this module adds the manifest-only parts:
``TAU_MANAGED_*`` and ``TAU_UPSTREAM_CHECKPOINT``, ``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO`` on GPU
workloads, the extra (model-cache) PVC mounts, the Secret behind ``secretKeyRef`` env (values
redacted in a client dry-run), and the eval GPU actor group of a ``rayjob-eval``.
"""

from __future__ import annotations

import copy
from typing import Any

from tau_core import keys
from tau_core import rendering as r

RAY_ACCEL_OVERRIDE = "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"
EVAL_GPU_GROUP = "gpu"


def managed_env(managed: Any, gpus_per_worker: int) -> list[dict[str, str]]:
    """Tau-owned env of a managed workload (appended to the RayJob's TAU_ env)."""
    return [{"name": name, "value": value} for name, value in managed.env]


def _containers(obj: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    cluster = obj["spec"]["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"]["spec"]]
    pods += [g["template"]["spec"] for g in cluster["workerGroupSpecs"]]
    out = []
    for pod in pods:
        for c in pod["containers"]:
            if c["name"] in ("ray-head", "ray-worker"):
                out.append((pod, c))
    return out


def finish_managed(objects: list[dict[str, Any]], request: r.RenderRequest, managed: Any) -> list[dict[str, Any]]:
    rayjob = objects[0]
    spec = rayjob["spec"]
    cluster = spec["rayClusterSpec"]
    ann = rayjob["metadata"]["annotations"]
    ann[keys.MANAGED_MANIFEST_DIGEST] = managed.manifest_digest
    rayjob["metadata"]["labels"][keys.MANAGED_WORKFLOW_KIND] = managed.kind
    if managed.kind == "rayjob-eval":
        _eval_gpu_group(cluster, request)
    gpu = any(int(g["rayStartParams"].get("num-gpus", "0")) > 0 for g in cluster["workerGroupSpecs"])
    secret_env = [{"name": key, "valueFrom": {"secretKeyRef": {"name": managed.secret_name, "key": key}}}
                  for key in managed.secret_data]
    for pod, container in _containers(rayjob):
        env = container.setdefault("env", [])
        names = {e["name"] for e in env}
        if gpu and RAY_ACCEL_OVERRIDE not in names:
            env.append({"name": RAY_ACCEL_OVERRIDE, "value": "0"})
        env.extend(e for e in secret_env if e["name"] not in names)
        for m in managed.mounts:
            container.setdefault("volumeMounts", []).append(
                {"name": m.name, "mountPath": m.mount_path, "readOnly": m.read_only})
            volumes = pod.setdefault("volumes", [])
            if not any(v["name"] == m.name for v in volumes):
                volumes.append({"name": m.name, "persistentVolumeClaim": {"claimName": m.pvc,
                                                                          "readOnly": m.read_only}})
    if managed.secret_name:
        redact = r.redact_secrets(request)
        objects.append({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": managed.secret_name, "namespace": rayjob["metadata"]["namespace"],
                         "labels": {keys.MANAGED_BY: keys.MANAGED_BY_VALUE, keys.RUN_ID: rayjob["metadata"]["name"]}},
            "type": "Opaque",
            "stringData": {k: (r.REDACTED if redact else v) for k, v in managed.secret_data.items()},
        })
    return objects


def _eval_gpu_group(cluster: dict[str, Any], request: r.RenderRequest) -> None:
    """rayjob-eval: one GPU pod for the model actor next to the CPU workers."""
    cpu_group = cluster["workerGroupSpecs"][0]
    gpus = max(1, int(request.context.managed.gpus))
    group = copy.deepcopy(cpu_group)
    group["groupName"] = f"{cpu_group['groupName']}-{EVAL_GPU_GROUP}"
    group["replicas"] = group["minReplicas"] = group["maxReplicas"] = 1
    group["rayStartParams"] = {"num-gpus": str(gpus)}
    worker = group["template"]["spec"]["containers"][0]
    res = worker.setdefault("resources", {})
    for side in ("requests", "limits"):
        res.setdefault(side, {})[keys.NVIDIA_GPU] = str(gpus)
    selector, tolerations = r.node_selector(request, gpus)
    pod = group["template"]["spec"]
    if selector:
        pod["nodeSelector"] = selector
    if tolerations:
        pod["tolerations"] = tolerations
    cluster["workerGroupSpecs"].append(group)

