"""The ``batch/v1`` Job renderer (engine ``job``), including multi-node torchrun.

A single-pod Job is one document.  ``execution.nodes > 1`` renders an Indexed Job plus the
headless Service ``<name>-headless`` that torchrun's c10d rendezvous resolves.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import attrs

from tau_core import keys
from tau_core import render_scripts as rs
from tau_core import rendering as r
from tau_core.config.reserved import RESERVED_PATHS
from tau_core.errors import ConfigError
from tau_run.renderers._common import entrypoint_of, explicit, image_of, local_file, resources

SOURCE_DIR = "/tau/source"
TORCHRUN_PORT = 29500
SHM_SIZE = "16Gi"
RESERVED_ASSET_PATHS = RESERVED_PATHS
_DURABLE_ENV = {
    "TAU_DATA_DIR": "/data",
    "TAU_HOT_DIR": "/mnt",
    "TAU_DATASETS_DIR": "/mnt/datasets",
    "TAU_CHECKPOINTS_DIR": "/mnt/checkpoints",
    "TAU_DURABLE_DATASETS_DIR": "/data/datasets",
    "TAU_DURABLE_CHECKPOINTS_DIR": "/data/checkpoints",
}


def render_job(request: r.RenderRequest) -> list[dict[str, Any]]:
    """Render the Job (and, for multi-node torchrun, its headless Service)."""
    objects: list[dict[str, Any]] = r.detached(_JobRenderer(request).render())
    return objects


@attrs.frozen
class _Shape:
    image: str
    gpus: int
    nodes: int
    launcher: str
    nproc: int

    @property
    def multi(self) -> bool:
        return self.nodes > 1


@attrs.define
class _Pod:
    """What the steps accumulate for the one pod template: volumes, mounts, init containers, env, stamps."""

    pvc: str | None
    output: str | None
    volumes: list[dict[str, Any]] = attrs.field(factory=list)
    mounts: list[dict[str, Any]] = attrs.field(factory=list)
    init: list[dict[str, Any]] = attrs.field(factory=list)
    env: list[dict[str, Any]] = attrs.field(factory=list)
    annotations: dict[str, str | None] = attrs.field(factory=dict)
    payload: dict[str, str] = attrs.field(factory=dict)

    @property
    def durable(self) -> bool:
        return self.pvc is not None


@attrs.frozen
class _Command:
    entry: str | None
    core: str | None
    prelude: list[str]
    from_image: bool


@attrs.frozen
class _Meta:
    labels: dict[str, str]
    annotations: dict[str, str]
    pod_labels: dict[str, str]
    pod_annotations: dict[str, str]


class _JobRenderer:
    def __init__(self, request: r.RenderRequest) -> None:
        self.req = request
        self.cfg = request.config
        self.name = request.name
        self.profile = r.workload_profile(request) or {}

    # -- cardinality ------------------------------------------------------------------------
    def _gpus(self) -> int:
        gpus: Any = self.cfg.compute.gpus
        if gpus is None:
            gpus = self.profile.get("gpusPerWorker")
        if gpus is None:
            raise ConfigError(
                f"engine=job run {self.name} has no resolved GPU cardinality",
                hint="select a ready TauCluster workload profile or set compute.gpus (0 for a CPU Job)",
            )
        return int(gpus)

    def _nodes(self) -> int:
        nodes: Any = self.cfg.execution.nodes
        if nodes is None:
            nodes = self.profile.get("workerCount", 1)
        return max(1, int(nodes))

    # -- render -------------------------------------------------------------------------------
    def render(self) -> list[dict[str, Any]]:
        ns = r.namespace(self.req)
        shape = self._shape()
        pod = _Pod(pvc=r.result_pvc(self.req), output=r.resolved_output(self.req))
        self._volumes(shape, pod)
        self._base_env(pod)
        command = self._command(shape, pod)
        wrappers, metrics = self._wrappers(shape, pod, command)
        main = self._main(shape, pod, command, wrappers)
        meta = self._metadata(shape, pod)
        if metrics:  # a native sidecar: the pod ends with main (an OOM-killed main fails the pod, not hangs it)
            pod.init.append({**metrics.container, "restartPolicy": "Always"})
        pod_spec = self._pod_spec(shape, pod, [main])
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": self.name, "namespace": ns, "labels": meta.labels, "annotations": meta.annotations},
            "spec": self._job_spec(shape, meta, pod_spec),
        }
        return [job, self._headless_service(ns)] if shape.multi else [job]

    # -- steps ------------------------------------------------------------------------------------
    def _shape(self) -> _Shape:
        cfg, name = self.cfg, self.name
        image = image_of(cfg)
        if not image:
            raise ConfigError(
                f'no image: profile "{r.profile_name(self.req) or "none"}" declares no runtime image and runtime.image is not set',  # noqa: E501
                hint="set runtime.image (pin it by digest for reproducible runs)",
            )
        gpus, nodes = self._gpus(), self._nodes()
        launcher = str(cfg.execution.launcher or "python")
        multi = nodes > 1
        if multi and launcher != "torchrun":
            raise ConfigError("execution.nodes > 1 requires execution.launcher: torchrun",
                              hint="set execution.launcher: torchrun or use engine: rayjob")
        if multi and len(name) + len("-headless") > 63:
            raise ConfigError(
                f'run name "{name}" is too long for a multi-node Job (name plus "-headless" must fit 63 characters)',
                hint="choose a shorter run name",
            )
        names = [*(cfg.runtime.env or {}), *(cfg.runtime.env_secret or {})]
        r.check_reserved_env({k: "" for k in names}, allow_nccl=bool(cfg.execution.allow_nccl_override),
                             extra=("JOB_COMPLETION_INDEX",) if multi else ())
        return _Shape(image, gpus, nodes, launcher, int(cfg.execution.processes_per_node or 1))

    def _volumes(self, shape: _Shape, pod: _Pod) -> None:
        if pod.durable:
            pod.volumes += [{"name": "data", "persistentVolumeClaim": {"claimName": pod.pvc}},
                            {"name": "tau-hot", "emptyDir": {}}]
            pod.mounts += [{"name": "data", "mountPath": "/data"}, {"name": "tau-hot", "mountPath": "/mnt"}]
        self._extra_volumes(pod.volumes, pod.mounts, pod.pvc)
        if shape.launcher == "torchrun" and (shape.nproc > 1 or shape.multi):
            pod.volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}})
            pod.mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
        self._image_assets(pod.init, pod.volumes, pod.mounts)

    def _base_env(self, pod: _Pod) -> None:
        profile = r.profile_name(self.req)
        if profile:
            pod.env.append({"name": "TAU_PROFILE", "value": profile})
        if pod.durable:
            pod.env += rs.env_list(_DURABLE_ENV)
        if pod.output:
            pod.env.append({"name": "TAU_OUTPUT_DIR", "value": pod.output})

    def _command(self, shape: _Shape, pod: _Pod) -> _Command:
        """The main container's command: a source image, a path inside the image, or an embedded script."""
        cfg, launcher, nproc, nodes = self.cfg, shape.launcher, shape.nproc, shape.nodes
        entry = entrypoint_of(cfg)
        source = cfg.run.source
        prelude: list[str] = []
        core: str | None = None
        flags = r.config_flags(cfg.execution.configs)
        from_image = bool(source and source.image)
        if from_image:
            core, source_payload = self._source(pod.init, pod.volumes, pod.mounts, entry, launcher, nproc, nodes,
                                                flags)
            pod.payload.update(source_payload)
        elif entry and PurePosixPath(entry).is_absolute():
            # an absolute entrypoint names a file inside the pod (the image provides it): nothing is embedded
            python = entry.endswith(".py") or launcher in ("python", "torchrun")
            core = self._launch(rs.q(entry), python, launcher, nproc, nodes, flags)
        elif entry:
            data = local_file(self.req, entry, "entrypoint").read_bytes()
            pod.payload.update(r.script_payload_digest(data))
            pod.env += [{"name": "TAU_SCRIPT_B64", "value": r.b64(data)},
                        {"name": "TAU_SCRIPT_SRC", "value": PurePosixPath(entry).name}]
            target, python = self._script_kind(entry, data, launcher)
            prelude.append(f'printf %s "$TAU_SCRIPT_B64" | base64 -d > {target}')
            if not python:
                prelude.append(f"chmod +x {target}")
            core = self._launch(target, python, launcher, nproc, nodes, flags)
        if launcher == "torchrun":
            pod.env += self._torchrun_env(nproc, shape.multi)
        return _Command(entry, core, prelude, from_image)

    def _wrappers(self, shape: _Shape, pod: _Pod, command: _Command) -> tuple[rs.Wrappers, rs.MetricsOffload | None]:
        """Profiler, publication, checkpoint and metrics offload around the command."""
        req, output, durable = self.req, pod.output, pod.durable
        wrappers = rs.Wrappers(preflight=durable, output=output)
        prof_env, prof_prefix, prof_ann = rs.profiler_setup(req, output if durable else None)
        if prof_prefix and shape.launcher == "torchrun":
            raise ConfigError("profiler is incompatible with execution.launcher: torchrun",
                              hint="profile a python-launcher run, or remove profiler")
        pod.env += prof_env
        wrappers.profiler_prefix = prof_prefix
        pod.annotations.update(prof_ann)
        pub = rs.publication(req, wrappers, output=output, durable=durable, multi_pod=shape.multi)
        pod.env += pub.env
        pod.annotations.update(pub.annotations)
        if pub.metrics:
            if not command.entry:
                raise ConfigError("metrics.offload.enabled requires run.entrypoint",
                                  hint="set entrypoint: to your training script")
            pod.volumes.append(rs.metrics_runtime_volume())
            pod.mounts.append(rs.metrics_runtime_mount())
        if durable and output and command.core is not None:  # logs/<pod>-main.log under the output
            wrappers.log_container = "main"
            pod.env.append(rs.log_archive_env())
        if command.core is None and (pub.staged or pub.checkpoint or prof_prefix):
            raise ConfigError("storage.publish, storage.checkpoint and profiler need a command to wrap",
                              hint="set entrypoint: to your script")
        pod.env += r.retry_env(req)
        pod.env = r.merge_env(r.user_env(req), pod.env)
        r.check_env_limits(pod.env)
        return wrappers, pub.metrics

    def _main(self, shape: _Shape, pod: _Pod, command: _Command, wrappers: rs.Wrappers) -> dict[str, Any]:
        cfg = self.cfg
        main: dict[str, Any] = {"name": "main", "image": shape.image}
        if command.core is not None:
            main["command"] = ["bash", "-c", rs.compose(command.prelude, command.core, wrappers)]
        if pod.env:
            main["env"] = pod.env
        res = self._resources(shape.gpus)
        if res:
            main["resources"] = res
        if pod.mounts:
            main["volumeMounts"] = pod.mounts
        working_dir = cfg.runtime.working_dir
        if working_dir:
            main["workingDir"] = str(working_dir)
        elif command.from_image:
            main["workingDir"] = SOURCE_DIR
        elif pod.durable:
            main["workingDir"] = "/data"
        return main

    def _resources(self, gpus: int) -> dict[str, Any]:
        cfg = self.cfg
        res_req = {"cpu": cfg.compute.cpu_request, "memory": cfg.compute.memory_request}
        res_lim = {"cpu": cfg.compute.cpu_limit, "memory": cfg.compute.memory_limit}
        if gpus > 0:
            res_req[keys.NVIDIA_GPU] = str(gpus)
            res_lim[keys.NVIDIA_GPU] = str(gpus)
        for res_name in ("cpu", "memory"):
            r.check_request_within_limit(f"compute.{res_name}", res_req[res_name], res_lim[res_name])
        return resources(res_req, res_lim, limit_follows_request=False)

    def _metadata(self, shape: _Shape, pod: _Pod) -> _Meta:
        req = self.req
        execution = None
        if shape.launcher == "torchrun":
            execution = {"launcher": "torchrun", "nodes": shape.nodes, "processes_per_node": shape.nproc}
        labels = r.workload_labels(req, workload_kind="job")
        annotations = r.workload_annotations(req, image=shape.image, gpu_count=shape.gpus, payload=pod.payload,
                                             execution=execution, extra=pod.annotations)
        topology = r.topology_annotations(r.resolved_topology(req))
        pod_annotations = dict(sorted({**r.pod_correlation_annotations(annotations), **topology}.items()))
        return _Meta(labels, annotations, r.pod_labels(req, labels), pod_annotations)

    def _pod_spec(self, shape: _Shape, pod: _Pod, containers: list[dict[str, Any]]) -> dict[str, Any]:
        cfg, req = self.cfg, self.req
        selector, tolerations = r.node_selector(req, shape.gpus)
        if cfg.policy.clear_node_selector:
            selector = r.selector_map(cfg.policy.node_selector)
        _, pod_priority = r.priority_classes(req)
        spec: dict[str, Any] = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 600}
        sa = req.context.service_account
        optional = {"serviceAccountName": str(sa) if sa else None, "priorityClassName": pod_priority,
                    "nodeSelector": selector, "tolerations": tolerations,
                    "subdomain": f"{self.name}-headless" if shape.multi else None, "initContainers": pod.init}
        spec.update({k: v for k, v in optional.items() if v})
        spec["containers"] = containers
        if pod.volumes:
            spec["volumes"] = pod.volumes
        if r.restricted_mode(cfg):
            r.apply_restricted(spec, owner=f'Job "{self.name}"')
        return r.mark_cluster_workload(spec)

    def _job_spec(self, shape: _Shape, meta: _Meta, pod_spec: dict[str, Any]) -> dict[str, Any]:
        ttl = r.ttl_seconds(self.cfg, "Job")
        spec: dict[str, Any] = {"suspend": True, "backoffLimit": 0, "ttlSecondsAfterFinished": ttl}
        deadline = self.profile.get("activeDeadlineSeconds")
        if deadline:
            spec["activeDeadlineSeconds"] = int(deadline)
        if shape.multi:
            spec.update({"completionMode": "Indexed", "completions": shape.nodes, "parallelism": shape.nodes})
        template_meta: dict[str, Any] = {"labels": meta.pod_labels}
        if meta.pod_annotations:
            template_meta["annotations"] = meta.pod_annotations
        spec["template"] = {"metadata": template_meta, "spec": pod_spec}
        return spec

    # -- pieces -------------------------------------------------------------------------------
    def _script_kind(self, entry: str, data: bytes, launcher: str) -> tuple[str, bool]:
        first = data.split(b"\n", 1)[0]
        shebang = first.startswith(b"#!")
        python = (
            entry.endswith(".py")
            or (shebang and b"python" in first)
            or (launcher == "python" and explicit(self.req, "execution.launcher"))
            or launcher == "torchrun"
        )
        if launcher == "torchrun" and not entry.endswith(".py"):
            raise ConfigError(
                f'run.entrypoint "{entry}" must be a .py file with execution.launcher: torchrun',
                hint="torchrun starts Python programs; point entrypoint at a .py file",
            )
        if not python and not shebang:
            raise ConfigError(
                f'script "{entry}" has no shebang and is not a .py file',
                hint="add a shebang or set execution.launcher: python",
            )
        return ("/tmp/tau-entrypoint.py" if python else "/tmp/run.sh"), python

    def _launch(self, target: str, python: bool, launcher: str, nproc: int, nodes: int, flags: list[str]) -> str:
        flag_text = "".join(" " + rs.q(f) for f in flags)
        if launcher == "torchrun":
            if nodes > 1:
                rdzv = f"{self.name}-0.{self.name}-headless:{TORCHRUN_PORT}"
                head = (
                    f'python3 -m torch.distributed.run --nnodes={nodes} --node_rank="$JOB_COMPLETION_INDEX" '
                    f"--rdzv-backend=c10d --rdzv-endpoint={rdzv} --rdzv-id={self.name} --nproc_per_node={nproc}"
                )
            else:
                head = f"python3 -m torch.distributed.run --standalone --nproc_per_node={nproc}"
            return f"{head}{flag_text} {target}"
        if python:
            return f"python3 {target}{flag_text}"
        return f"{target}{flag_text}"

    def _torchrun_env(self, nproc: int, multi: bool) -> list[dict[str, str]]:
        addr = f"{self.name}-0.{self.name}-headless" if multi else "localhost"
        env = [{"name": "MASTER_ADDR", "value": addr}, {"name": "MASTER_PORT", "value": str(TORCHRUN_PORT)}]
        if nproc > 1 or multi:
            env.append({"name": "OMP_NUM_THREADS", "value": "1"})
        return env

    def _source(
        self,
        init: list[dict[str, Any]],
        volumes: list[dict[str, Any]],
        mounts: list[dict[str, Any]],
        entry: str | None,
        launcher: str,
        nproc: int,
        nodes: int,
        flags: list[str],
    ) -> tuple[str, dict[str, str]]:
        source = self.cfg.run.source
        image, path = (str(source.image or ""), str(source.path or "")) if source else ("", "")
        r.require_pinned(image, "run.source.image")
        if not entry:
            raise ConfigError("run.source requires entrypoint", hint="set entrypoint: relative to run.source.path")
        if entry.startswith("/") or any(p in ("", ".", "..") for p in entry.split("/")):
            raise ConfigError(
                f'entrypoint "{entry}" must be a clean relative path inside run.source',
                hint="name the script relative to run.source.path",
            )
        if (
            not path.startswith("/")
            or path != str(PurePosixPath(path))
            or path == "/tau-source"
            or path.startswith("/tau-source/")
        ):
            raise ConfigError(
                f'run.source.path "{path}" must be a clean absolute path outside /tau-source',
                hint="use the directory inside the source image that holds your tree",
            )
        if any(v["name"] == "tau-source" for v in volumes):
            raise ConfigError(
                'run.source generates volume name "tau-source" already used by storage',
                hint="rename the storage volume",
            )
        init.append(
            {
                "name": "tau-source",
                "image": image,
                "command": [
                    "/bin/sh",
                    "-c",
                    'cp -R -- "$1"/. /tau-source/ && chmod -R a+rwX /tau-source && chmod a+x "/tau-source/$2"',
                    "tau-source",
                    path,
                    entry,
                ],
                "securityContext": r.hardened_container_security(),
                "volumeMounts": [{"name": "tau-source", "mountPath": "/tau-source"}],
            }
        )
        volumes.append({"name": "tau-source", "emptyDir": {}})
        mounts.append({"name": "tau-source", "mountPath": SOURCE_DIR})
        target = f"{SOURCE_DIR}/{entry}"
        python = entry.endswith(".py") or launcher == "torchrun"
        return self._launch(target, python, launcher, nproc, nodes, flags), r.source_payload_digest(image, path, entry)

    def _image_assets(
        self, init: list[dict[str, Any]], volumes: list[dict[str, Any]], mounts: list[dict[str, Any]]
    ) -> None:
        assets = self.cfg.storage.image_assets or []
        if len(assets) > 8:
            raise ConfigError("storage.image_assets supports at most 8 entries", hint="merge assets into fewer images")
        seen_paths: list[str] = []
        for i, asset in enumerate(assets):
            name = str(asset.name or "")
            image = str(asset.image or "")
            src = str(asset.source_path or "")
            dest = str(asset.mount_path or "")
            r.require_pinned(image, f"storage.image_assets[{i}].image")
            for reserved in RESERVED_ASSET_PATHS:
                if dest == reserved or dest.startswith(reserved + "/") or reserved.startswith(dest.rstrip("/") + "/"):
                    raise ConfigError(
                        f'storage.image_assets[{i}].mount_path "{dest}" overlaps Tau-reserved path {reserved}',
                        hint="mount the asset somewhere else, for example /opt/<name>",
                    )
            for other in seen_paths:
                if dest == other or dest.startswith(other + "/") or other.startswith(dest + "/"):
                    raise ConfigError(
                        f'storage.image_assets mount paths "{other}" and "{dest}" overlap',
                        hint="give each asset its own directory",
                    )
            seen_paths.append(dest)
            vol = f"tau-asset-{name}"
            init.append(
                {
                    "name": vol,
                    "image": image,
                    "command": ["/bin/cp"],
                    "args": ["-a", "--", f"{src}/.", "/tau-asset/"],
                    # cp -a as root needs CAP_CHOWN to keep ownership, so capabilities are only
                    # dropped in restricted mode (where the copy runs as a non-root user)
                    "securityContext": {"allowPrivilegeEscalation": False},
                    "volumeMounts": [{"name": vol, "mountPath": "/tau-asset"}],
                }
            )
            volumes.append({"name": vol, "emptyDir": {}})
            mounts.append({"name": vol, "mountPath": dest, "readOnly": True})

    def _extra_volumes(self, volumes: list[dict[str, Any]], mounts: list[dict[str, Any]], data_pvc: str | None) -> None:
        specs = [str(v) for v in self.cfg.storage.volumes or []]
        mount_specs = [str(m) for m in self.cfg.storage.mounts or []]
        if not specs:
            return
        claims: dict[str, str] = {}
        for spec in specs:
            vname, _, rest = spec.partition("=")
            kind, _, src = rest.partition(":")
            if kind != "pvc" or not src:
                raise ConfigError(
                    f'--volume currently supports pvc volumes only; "{vname}" is not pvc-backed',
                    hint="declare volumes as NAME=pvc:CLAIM",
                )
            claims[vname] = src
        if not mount_specs:
            return  # a single volume without mounts is the /data PVC (see result_pvc)
        reserved = {"data", "tau-hot", "dshm", "tau-source", "tau-metrics-runtime", "script", "ray-tmp"}
        for spec in mount_specs:
            parts = spec.split(":")
            vname, path = parts[0], parts[1] if len(parts) > 1 else ""
            mode = parts[2] if len(parts) > 2 else "rw"
            if vname not in claims:
                raise ConfigError(
                    f'storage.mounts "{spec}" names an unknown volume', hint="declare it in storage.volumes"
                )
            if path == "/data" and claims[vname] == data_pvc and any(v["name"] == "data" for v in volumes):
                continue
            if vname in reserved or vname.startswith("tau-asset-"):
                raise ConfigError(f'storage volume name "{vname}" is reserved by Tau', hint="rename the volume")
            if not any(v["name"] == vname for v in volumes):
                volumes.append({"name": vname, "persistentVolumeClaim": {"claimName": claims[vname]}})
            mount: dict[str, Any] = {"name": vname, "mountPath": path}
            if mode == "ro":
                mount["readOnly"] = True
            mounts.append(mount)

    def _headless_service(self, ns: str) -> dict[str, Any]:
        annotations = {keys.SUBMISSION_ID: self.req.submission_id} if self.req.submission_id else {}
        meta: dict[str, Any] = {
            "name": f"{self.name}-headless",
            "namespace": ns,
            "labels": {keys.MANAGED_BY: keys.MANAGED_BY_VALUE, keys.RUN_ID: self.name},
        }
        if annotations:
            meta["annotations"] = annotations
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": {keys.JOB_NAME: self.name},
                "ports": [{"name": "c10d", "port": TORCHRUN_PORT, "protocol": "TCP", "targetPort": TORCHRUN_PORT}],
            },
        }
