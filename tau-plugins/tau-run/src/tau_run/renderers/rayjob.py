"""The ``ray.io/v1`` RayJob renderer (engine ``rayjob``).

One CPU-only head on the system pool plus one fixed-size worker group.  The driver's
files travel as one gzip envelope in ``TAU_PAYLOAD_B64`` (see :mod:`.ray_payload`).

:meth:`_RayJobRenderer.render` is a short pipeline of steps; each step reads the request and
the results of earlier steps and returns a small frozen value, in the order the checks must
fail (name, namespace, shape, env, payload, driver, head, metadata, workers).
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from tau_core import keys
from tau_core import render_scripts as rs
from tau_core import rendering as r
from tau_core.config.reserved import RAY_TRAIN_SECTIONS, RAYJOB_NAME_MAX
from tau_core.errors import ConfigError
from tau_run.renderers._common import image_of, resources
from tau_run.renderers.managed import finish_managed, managed_env
from tau_run.renderers.ray_payload import (
    _PAYLOAD_DECODER as _PAYLOAD_DECODER,
)
from tau_run.renderers.ray_payload import (
    PROJECT_ARCHIVE,
    SCRIPT_DIR,
    TUNE_DRIVER,
    RayPayload,
    build_payload,
    payload_init,
)
from tau_run.renderers.ray_payload import (
    payload_envelope as payload_envelope,
)
from tau_run.renderers.ray_payload import (
    project_archive as project_archive,
)

DEFAULT_GPU_IMAGE = "mcr.microsoft.com/aks/ai-runtime/ray:py3.12-ray2.56.0-cuda13.0"
DEFAULT_CPU_IMAGE = "mcr.microsoft.com/aks/ai-runtime/ray:py3.12-ray2.54.0"
DEFAULT_RAY_VERSION = "2.56.0"
MAX_NAME = RAYJOB_NAME_MAX
COMPLETION_FILE = "/tmp/ray/tau-driver-complete"
RAY_HEALTH_PORT = 52365
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RAY_TAG = re.compile(r"-ray(\d+\.\d+\.\d+)")
_PIP_PRELUDE = (
    "if [ -f /script/requirements.txt ]; then",
    "  python3 -m pip install -r /script/requirements.txt || python3 -m pip install --user -r /script/requirements.txt",
    "fi",
    'export PATH="$(python3 -m site --user-base)/bin:$PATH"',
)
_HEAD_PORTS = (("metrics", 8080), ("gcs-server", 6379), ("dashboard", 8265), ("client", 10001))
_SYSTEM_POOL_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": keys.AKS_NODE_MODE, "operator": "In", "values": ["system"]}]},
                {"matchExpressions": [{"key": keys.AKS_NODE_MODE, "operator": "DoesNotExist"}]},
            ]
        }
    }
}

_LOG_OFFLOAD = """\
f=""
while [ -z "$f" ]; do
  for c in /tmp/ray/session_*/logs/job-driver-*.log; do [ -e "$c" ] && f="$c" && break; done
  if [ -z "$f" ]; then [ -e "$TAU_RAY_LOG_COMPLETION_FILE" ] && exit 0; sleep 1; fi
done
tail -n +1 -F "$f" & t=$!
while [ ! -e "$TAU_RAY_LOG_COMPLETION_FILE" ]; do sleep 1; done
sleep "$TAU_RAY_LOG_DRAIN_SECONDS"
kill "$t" 2>/dev/null || true
"""




def render_rayjob(request: r.RenderRequest) -> list[dict[str, Any]]:
    """Render the RayJob for ``request`` (a managed manifest adds its mounts, secret and eval GPU group)."""
    objects = _RayJobRenderer(request).render()
    managed = request.context.managed
    if managed is not None:
        objects = finish_managed(objects, request, managed)
    return objects


def ray_version(image: str) -> str:
    match = _RAY_TAG.search(image.split("@", 1)[0].rsplit("/", 1)[-1])
    return match.group(1) if match else DEFAULT_RAY_VERSION


@attrs.frozen
class _Shape:
    """Cardinality and image: worker count, GPUs per worker, launcher, GPU resource name."""

    workers: int
    gpw: int
    image: str
    launcher: str
    gpu_resource: str
    restricted: bool


@attrs.frozen
class _Driver:
    """The driver's environment and entrypoint, plus what the publication step adds to the head."""

    common_env: list[dict[str, Any]]
    head_env: list[dict[str, Any]]
    annotations: dict[str, str | None]
    metrics: rs.MetricsOffload | None
    script: str
    runtime_env: dict[str, Any]


@attrs.frozen
class _Storage:
    """The ``data`` volume (the result PVC, or scratch) and the mounts every Ray pod shares."""

    pvc: str | None
    output: str | None
    volumes: list[dict[str, Any]]
    mounts: list[dict[str, Any]]


@attrs.frozen
class _Meta:
    labels: dict[str, str]
    annotations: dict[str, str]
    pod_labels: dict[str, str]
    head_annotations: dict[str, str]
    worker_annotations: dict[str, str]
    pod_priority: str | None
    service_account: Any


_SCRIPT_MOUNT = {"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True}


class _RayJobRenderer:
    def __init__(self, request: r.RenderRequest) -> None:
        self.req = request
        self.cfg = request.config
        self.name = request.name
        self.profile = r.workload_profile(request) or {}

    def render(self) -> list[dict[str, Any]]:
        self._check_name()
        ns = r.namespace(self.req)
        shape = self._shape()
        self._check_user_env()
        payload = build_payload(self.req, shape.launcher)
        storage = self._storage()
        driver = self._driver(shape, payload, storage)
        head_pod = self._head_pod(shape, payload, driver, storage)
        meta = self._metadata(shape, payload, driver)
        head_spec = self._pod_spec(head_pod, meta, "head")
        worker_spec = self._pod_spec(self._worker_pod(shape, payload, driver, storage), meta, "workers")
        return [{
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": self.name, "namespace": ns, "labels": meta.labels, "annotations": meta.annotations},
            "spec": self._spec(shape, driver, meta, head_spec, worker_spec),
        }]

    # -- steps ------------------------------------------------------------------------------------
    def _check_name(self) -> None:
        name = self.name
        if not _NAME.match(name):
            raise ConfigError(f'RayJob name "{name}" must be a lowercase DNS label (a-z, 0-9 and -)',
                              hint="rename the run (name: or the positional NAME)")
        if len(name) > MAX_NAME:
            raise ConfigError(f'RayJob name "{name}" is too long ({len(name)} chars; KubeRay limit is {MAX_NAME})',
                              hint="choose a shorter run name")

    def _shape(self) -> _Shape:
        cfg = self.cfg
        workers = cfg.compute.workers
        workers = max(1, int(self.profile.get("workerCount", 1) if workers is None else workers))
        gpw = cfg.compute.gpus_per_worker
        gpw = int(self.profile.get("gpusPerWorker", 1) if gpw is None else gpw)
        if not 0 <= gpw <= 8:
            raise ConfigError(f"gpus per worker must be 0..8, got {gpw}",
                              hint="set compute.gpus_per_worker between 0 and 8")
        managed_gpus = getattr(self.req.context.managed, "gpus", 0)  # an eval's GPU actor group needs the GPU image
        image = image_of(cfg) or (DEFAULT_GPU_IMAGE if gpw > 0 or managed_gpus > 0 else DEFAULT_CPU_IMAGE)
        mig = cfg.compute.mig_profile
        mode = str(cfg.compute.gpu_resource_mode or ("mig" if mig else "device-plugin"))
        if mode not in ("device-plugin", "mig"):
            raise ConfigError(
                f'gpu-resource-mode "{mode}" is not supported by the RayJob engine (supported: device-plugin, mig)',
                hint="use compute.gpu_resource_mode: device-plugin or mig",
            )
        gpu_resource = f"nvidia.com/mig-{mig}" if mode == "mig" and mig else keys.NVIDIA_GPU
        return _Shape(workers, gpw, image, str(cfg.execution.launcher or "ray-train"), gpu_resource,
                      r.restricted_mode(cfg))

    def _check_user_env(self) -> None:
        cfg = self.cfg
        names = [*(cfg.runtime.env or {}), *(cfg.runtime.env_secret or {})]
        r.check_reserved_env({k: "" for k in names}, allow_nccl=bool(cfg.execution.allow_nccl_override))

    def _storage(self) -> _Storage:
        pvc = r.result_pvc(self.req)
        data: dict[str, Any] = ({"name": "data", "persistentVolumeClaim": {"claimName": pvc}} if pvc is not None
                                else {"name": "data", "emptyDir": {}})
        volumes = [data, {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
                   {"name": "script", "emptyDir": {}}, {"name": "tau-hot", "emptyDir": {}}]
        mounts = [{"name": "data", "mountPath": "/data"}, {"name": "dshm", "mountPath": "/dev/shm"},
                  {"name": "tau-hot", "mountPath": "/mnt"}]
        return _Storage(pvc, r.resolved_output(self.req), volumes, mounts)

    def _tau_env(self, shape: _Shape, payload: RayPayload, output: str | None) -> list[dict[str, Any]]:
        """The ``TAU_*`` env every Ray container gets (distribution, launcher config, retry, managed)."""
        cfg, gpw, workers = self.cfg, shape.gpw, shape.workers
        env = rs.env_list({"TAU_DATA_DIR": "/data", "TAU_HOT_DIR": "/mnt"})
        if output:
            env.append({"name": "TAU_OUTPUT_DIR", "value": output})
        env += rs.env_list({"TAU_DIST_BACKEND": "nccl" if gpw > 0 else "gloo", "TAU_NUM_WORKERS": str(workers),
                            "TAU_WORLD_SIZE": str(workers * gpw if gpw > 0 else workers)})
        configs = cfg.execution.configs or {}
        if shape.launcher == "ray-train" and configs:
            bad = sorted(set(configs) - set(RAY_TRAIN_SECTIONS))
            if bad:
                raise ConfigError(f"execution.configs section {bad[0]} is not supported with launcher ray-train",
                                  hint="use only " + ", ".join(RAY_TRAIN_SECTIONS))
            env.append({"name": "TAU_RAY_TRAIN_CONFIG_JSON", "value": r.canonical_json(configs)})
        if shape.launcher == "ray-tune":
            env += self._tune_env(payload, configs)
        env += r.retry_env(self.req)
        if self.req.context.managed is not None:
            env += managed_env(self.req.context.managed, gpw)
        return env

    def _tune_env(self, payload: RayPayload, configs: Any) -> list[dict[str, str]]:
        cfg = self.cfg
        env = rs.env_list({
            "TAU_TUNE_TRAIN_PATH": payload.script_path or "",
            "TAU_TUNE_TRAIN_MODULE": payload.module or "",
            "TAU_TUNE_METRIC": str(cfg.execution.metric or ""),
            "TAU_TUNE_MODE": str(cfg.execution.mode or "min"),
            "TAU_TUNE_NUM_SAMPLES": str(cfg.execution.num_samples or 1),
            "TAU_TUNE_MAX_CONCURRENT_TRIALS": str(cfg.execution.max_concurrent_trials or 1),
            "TAU_TUNE_PARAM_SPACE": r.canonical_json(configs),
        })
        return [e for e in env if e["value"] != "" or not e["name"].startswith("TAU_TUNE_TRAIN_")]

    def _driver(self, shape: _Shape, payload: RayPayload, storage: _Storage) -> _Driver:
        defaults = rs.env_list({"HF_HOME": "/tmp/hf", "NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "eth0"})
        tau_env = self._tau_env(shape, payload, storage.output)
        common_env = r.merge_env(defaults, r.user_env(self.req), tau_env)
        prelude = list(_PIP_PRELUDE)
        pip = [str(p) for p in self.cfg.runtime.pip or []]
        if pip:
            pkgs = " ".join(rs.q(p) for p in pip)
            prelude.append(f"python3 -m pip install {pkgs} || python3 -m pip install --user {pkgs}")
        prelude.append("cd /data")
        if shape.launcher == "ray-tune":
            core = f"python3 {SCRIPT_DIR}/{TUNE_DRIVER}"
        elif payload.module:
            core = f"python3 -m {payload.module}"
        elif payload.script_path:
            core = f"python3 {payload.script_path}"
        else:
            raise ConfigError("RayJob runs require entrypoint", hint="set entrypoint: to the driver script (train.py)")
        wrappers = rs.Wrappers(output=storage.output, completion_file=COMPLETION_FILE)
        pub = rs.publication(self.req, wrappers, output=storage.output, durable=storage.pvc is not None)
        head_env = list(pub.env)
        if storage.pvc is not None and storage.output:  # logs/<head pod>-driver.log under the output
            wrappers.log_container = "driver"
            head_env.append(rs.log_archive_env())
        script = rs.compose(prelude, core, wrappers)
        r.check_env_limits(common_env + pub.env + list(payload.env))
        runtime_env: dict[str, Any] = {}
        if payload.module:
            runtime_env["working_dir"] = f"file://{SCRIPT_DIR}/{PROJECT_ARCHIVE}"
        if pip:
            runtime_env["pip"] = pip
        return _Driver(common_env, head_env, dict(pub.annotations), pub.metrics, script, runtime_env)

    def _head_pod(self, shape: _Shape, payload: RayPayload, driver: _Driver, storage: _Storage) -> dict[str, Any]:
        image = shape.image
        head: dict[str, Any] = {
            "name": "ray-head",
            "image": image,
            "env": r.merge_env(driver.common_env, driver.head_env),
            "ports": [{"containerPort": port, "name": name, "protocol": "TCP"} for name, port in _HEAD_PORTS],
            "resources": self._resources("head", 0, shape.gpu_resource),
            "volumeMounts": [*storage.mounts, {"name": "ray-tmp", "mountPath": "/tmp/ray"}, _SCRIPT_MOUNT],
        }
        containers = [head, _log_offload(image)]
        volumes = [*storage.volumes, {"name": "ray-tmp", "emptyDir": {}}]
        if driver.metrics:
            containers.append(driver.metrics.container)
            head["volumeMounts"].append(rs.metrics_runtime_mount())
            volumes.append(rs.metrics_runtime_volume())
        init: list[dict[str, Any]] = []
        if not shape.restricted:
            init.append({
                "name": "prepare-ray-tmp",
                "image": image,
                "command": ["/bin/sh", "-c", "mkdir -p /tmp/ray && chmod 1777 /tmp/ray"],
                "securityContext": r.hardened_container_security(),
                "volumeMounts": [{"name": "ray-tmp", "mountPath": "/tmp/ray"}],
            })
        if payload.env:
            init.append(payload_init(image, payload.env))
        spec: dict[str, Any] = {
            "affinity": _SYSTEM_POOL_AFFINITY,
            "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"}],
        }
        if init:
            spec["initContainers"] = init
        spec["containers"] = containers
        spec["volumes"] = volumes
        return spec

    def _metadata(self, shape: _Shape, payload: RayPayload, driver: _Driver) -> _Meta:
        req = self.req
        labels = r.workload_labels(req, workload_kind="rayjob", default_queue=r.DEFAULT_QUEUE)
        annotations = r.workload_annotations(req, image=shape.image, gpu_count=shape.workers * shape.gpw,
                                             payload=payload.annotations, execution={"launcher": shape.launcher},
                                             extra=driver.annotations)
        pod_labels = r.pod_labels(req, labels)
        correlation = r.pod_correlation_annotations(annotations)
        monitoring = {keys.ADX_SCRAPE: "true", keys.ADX_PORT: "8080"}
        topology = r.topology_annotations(r.resolved_topology(req))
        head_ann = dict(sorted({**correlation, **monitoring, keys.ADX_LOG_DESTINATION: "Logs:ContainerLogs"}.items()))
        worker_ann = dict(sorted({**correlation, **monitoring, **topology}.items()))
        _, pod_priority = r.priority_classes(req)
        return _Meta(labels, annotations, pod_labels, head_ann, worker_ann, pod_priority, req.context.service_account)

    def _pod_spec(self, spec: dict[str, Any], meta: _Meta, role: str) -> dict[str, Any]:
        """Service account, priority and (in restricted mode) the Restricted profile of one pod template."""
        if meta.service_account:
            spec["serviceAccountName"] = str(meta.service_account)
        if meta.pod_priority:
            spec["priorityClassName"] = meta.pod_priority
        if r.restricted_mode(self.cfg):
            r.apply_restricted(spec, fs_group=r.RESTRICTED_UID, owner=f'RayJob "{self.name}" {role}')
        return r.mark_cluster_workload(spec)

    def _worker_pod(self, shape: _Shape, payload: RayPayload, driver: _Driver, storage: _Storage) -> dict[str, Any]:
        gets_payload = bool(payload.module) or shape.launcher == "ray-tune"
        probe = {"tcpSocket": {"port": RAY_HEALTH_PORT}, "periodSeconds": 5, "timeoutSeconds": 2}
        container: dict[str, Any] = {
            "name": "ray-worker",
            "image": shape.image,
            "env": driver.common_env,
            "ports": [{"containerPort": 8080, "name": "metrics", "protocol": "TCP"}],
            "resources": self._resources("worker", shape.gpw, shape.gpu_resource),
            "startupProbe": {
                "httpGet": {"path": self._health_path(shape.image), "port": RAY_HEALTH_PORT},
                "periodSeconds": 5,
                "timeoutSeconds": 2,
                "failureThreshold": 60,
            },
            "readinessProbe": probe,
            "livenessProbe": dict(probe),
            "volumeMounts": [*storage.mounts] + ([_SCRIPT_MOUNT] if gets_payload else []),
        }
        selector, tolerations = r.node_selector(self.req, shape.gpw)
        spec: dict[str, Any] = {}
        if selector:
            spec["nodeSelector"] = selector
        if tolerations:
            spec["tolerations"] = tolerations
        if gets_payload and payload.env:
            spec["initContainers"] = [payload_init(shape.image, payload.env)]
        spec["containers"] = [container]
        spec["volumes"] = [v for v in storage.volumes if v["name"] != "script" or gets_payload]
        return spec

    def _spec(self, shape: _Shape, driver: _Driver, meta: _Meta, head: dict[str, Any],
              worker: dict[str, Any]) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "suspend": True,
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": r.ttl_seconds(self.cfg, "RayJob"),
            "submissionMode": "HTTPMode",
            "entrypoint": "bash -c " + rs.q(driver.script),
        }
        if driver.runtime_env:
            spec["runtimeEnvYAML"] = _runtime_env_yaml(driver.runtime_env)
        workers = shape.workers
        spec["rayClusterSpec"] = {
            "rayVersion": ray_version(shape.image),
            "headGroupSpec": {
                "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "0", "num-gpus": "0"},
                "template": {"metadata": {"labels": meta.pod_labels, "annotations": meta.head_annotations},
                             "spec": head},
            },
            "workerGroupSpecs": [{
                "groupName": f"{self.name}-w",
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": {"num-gpus": str(shape.gpw)},
                "template": {"metadata": {"labels": meta.pod_labels, "annotations": meta.worker_annotations},
                             "spec": worker},
            }],
        }
        return spec

    # -- pieces ---------------------------------------------------------------------------------
    def _resources(self, role: str, gpus: int, gpu_resource: str) -> dict[str, Any]:
        cfg = self.cfg
        if role == "worker" and gpus > 0:
            defaults = {"cpu": ("8", "16"), "memory": ("64Gi", "128Gi")}
        else:
            defaults = {"cpu": ("2", "4"), "memory": ("8Gi", "16Gi")}
        requests: dict[str, Any] = {}
        limits: dict[str, Any] = {}
        for res in ("cpu", "memory"):
            compute = cfg.compute
            req = getattr(compute, f"{role}_{res}_request") or getattr(compute, f"{res}_request")
            lim = getattr(compute, f"{role}_{res}_limit") or getattr(compute, f"{res}_limit")
            requests[res] = req or defaults[res][0]
            limits[res] = lim or (req if req else defaults[res][1])
            if lim and not req:
                # only a limit was given: a default request above it would be rejected, so cap it
                req_value, lim_value = r.quantity_value(requests[res]), r.quantity_value(lim)
                if req_value is not None and lim_value is not None and req_value > lim_value:
                    requests[res] = lim
            r.check_request_within_limit(f"{role} {res}", requests[res], limits[res])
        if gpus > 0:
            requests[gpu_resource] = str(gpus)
            limits[gpu_resource] = str(gpus)
        return resources(requests, limits, limit_follows_request=True)

    @staticmethod
    def _health_path(image: str) -> str:
        major, minor, _ = (int(p) for p in ray_version(image).split("."))
        return "/api/healthz" if (major, minor) >= (2, 53) else "/api/local_raylet_healthz"



def _log_offload(image: str) -> dict[str, Any]:
    """The sidecar that tails the Ray driver log to stdout until the driver's completion file appears."""
    return {
        "name": "ray-driver-log-offload",
        "image": image,
        "command": ["/bin/sh", "-c", _LOG_OFFLOAD],
        "env": rs.env_list({"TAU_RAY_LOG_COMPLETION_FILE": COMPLETION_FILE, "TAU_RAY_LOG_DRAIN_SECONDS": "5"}),
        "resources": {"limits": {"cpu": "100m", "memory": "128Mi"}, "requests": {"cpu": "10m", "memory": "32Mi"}},
        "securityContext": {
            **r.hardened_container_security(),
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": r.RESTRICTED_UID,
            "runAsGroup": r.RESTRICTED_UID,
        },
        "volumeMounts": [{"name": "ray-tmp", "mountPath": "/tmp/ray", "readOnly": True}],
    }


def _runtime_env_yaml(runtime_env: dict[str, Any]) -> str:
    lines: list[str] = []
    if "working_dir" in runtime_env:
        lines.append(f"working_dir: {json.dumps(runtime_env['working_dir'])}")
    if "pip" in runtime_env:
        lines.append("pip:")
        lines += [f"  - {json.dumps(p)}" for p in runtime_env["pip"]]
    return "\n".join(lines) + "\n"
