"""The ``ray.io/v1`` RayService renderer (reference run-config-and-rendering §3.10).

``serveConfigV2`` holds one application ``default`` (route ``/``) built from ``--import-path``,
``--app-args``, ``--runtime-pip`` and the literal env, with one deployment ``default`` whose
``num_replicas`` (or ``autoscaling_config``) is the serving replica count.  The Ray cluster follows the
workload profile: one worker -> a single head that carries the profile's GPUs; more workers -> a CPU
head plus a fixed GPU worker group of ``workerCount`` pods with ``gpusPerWorker`` GPUs each and an
optional ``/dev/shm`` of ``--shm-size``.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from tau_serve.renderers import common as c
from tau_serve.spec import ServeRenderRequest, ServeSpec

API_VERSION = "ray.io/v1"
HEAD_CONTAINER = "ray-head"
WORKER_CONTAINER = "ray-worker"
WORKER_GROUP = "gpu-workers"
APP = "default"
DEPLOYMENT = "default"
HEAD_PORTS = (("gcs-server", 6379), ("dashboard", 8265), ("client", 10001))


def render_rayservice(request: ServeRenderRequest) -> list[dict[str, Any]]:
    """The RayService (one object)."""
    spec = request.spec
    prof = c.profile(request)
    cluster: dict[str, Any] = {"rayVersion": spec.ray_version, "headGroupSpec": _head(request, prof)}
    if spec.nodes > 1:
        cluster["workerGroupSpecs"] = [_workers(request, prof)]
    service = {
        "apiVersion": API_VERSION, "kind": "RayService",
        "metadata": {"name": spec.name, "namespace": c.namespace(request), "labels": c.labels(request),
                     "annotations": c.stamps(request)},
        "spec": {"serveConfigV2": dump_serve_config(serve_config(request)), "rayClusterConfig": cluster},
    }
    return [service]


def serve_config(request: ServeRenderRequest) -> dict[str, Any]:
    spec = request.spec
    app: dict[str, Any] = {"name": APP, "route_prefix": "/", "import_path": spec.import_path}
    if spec.app_args:
        app["args"] = dict(spec.app_args)
    runtime_env: dict[str, Any] = {}
    if spec.runtime_pip:
        runtime_env["pip"] = list(spec.runtime_pip)
    env_vars = c.runtime_env_vars(request)
    if env_vars:
        runtime_env["env_vars"] = env_vars
    if runtime_env:
        app["runtime_env"] = runtime_env
    app["deployments"] = [{"name": DEPLOYMENT, **replica_fields(spec)}]
    return {"http_options": {"host": "0.0.0.0", "port": spec.port}, "applications": [app]}


def replica_fields(spec: ServeSpec) -> dict[str, Any]:
    auto = spec.autoscaling
    if auto is None:
        return {"num_replicas": spec.replicas}
    return {"autoscaling_config": {
        "min_replicas": auto.min_replicas, "max_replicas": auto.max_replicas,
        "target_num_ongoing_requests_per_replica": auto.target_qps or 5,
        "downscale_delay_s": auto.scale_down_delay}}


def dump_serve_config(config: Mapping[str, Any]) -> str:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    out = io.StringIO()
    yaml.dump(dict(config), out)
    return out.getvalue()


def load_serve_config(text: str) -> dict[str, Any]:
    from ruamel.yaml import YAML

    data = YAML(typ="safe", pure=True).load(text or "{}")
    return dict(data) if isinstance(data, Mapping) else {}


def _head(request: ServeRenderRequest, prof: dict[str, Any]) -> dict[str, Any]:
    spec = request.spec
    gpus = spec.gpus if spec.nodes <= 1 else 0
    ports = [{"name": n, "containerPort": p} for n, p in HEAD_PORTS] + [{"name": "serve", "containerPort": spec.port}]
    shm = spec.nodes <= 1
    container = _container(request, HEAD_CONTAINER, gpus, cpu="2", memory="8Gi", shm=shm)
    container["ports"] = ports
    pod = _pod(request, prof, container, gpus, shm=shm)
    return {"rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": str(gpus)},
            "template": {"metadata": {"labels": c.labels(request), "annotations": c.pod_annotations(prof)},
                         "spec": pod}}


def _workers(request: ServeRenderRequest, prof: dict[str, Any]) -> dict[str, Any]:
    spec = request.spec
    container = _container(request, WORKER_CONTAINER, spec.gpus, cpu="8", memory="32Gi", shm=True)
    pod = _pod(request, prof, container, spec.gpus, shm=True)
    return {"groupName": WORKER_GROUP, "replicas": spec.nodes, "minReplicas": spec.nodes,
            "maxReplicas": spec.nodes, "rayStartParams": {"num-gpus": str(spec.gpus)},
            "template": {"metadata": {"labels": c.labels(request), "annotations": c.pod_annotations(prof)},
                         "spec": pod}}


def _container(request: ServeRenderRequest, name: str, gpus: int, *, cpu: str, memory: str,
               shm: bool) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": request.spec.image, "env": c.env(request),
                                 "resources": c.resources(cpu, memory, gpus)}
    mounts = c.mounts(request)
    if shm and request.spec.shm_size:
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    if mounts:
        container["volumeMounts"] = mounts
    return container


def _pod(request: ServeRenderRequest, prof: dict[str, Any], container: dict[str, Any], gpus: int, *,
         shm: bool) -> dict[str, Any]:
    volumes = c.volumes(request)
    if shm and request.spec.shm_size:
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": request.spec.shm_size}})
    pod: dict[str, Any] = {"containers": [container]}
    if volumes:
        pod["volumes"] = volumes
    _, tolerations = c.gpu_scheduling(gpus)
    if tolerations:
        pod["tolerations"] = tolerations
    return c.finish_pod(pod, prof)
