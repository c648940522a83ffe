"""``tau serve deploy`` flags -> a validated :class:`~tau_serve.spec.ServeSpec` (reference cli-surface §8.1).

:class:`DeployArgs` holds the flags as given (``None`` = not passed).  :func:`check_flags` reports every
conflict and requirement that needs no cluster as a :class:`~tau_core.errors.UsageError` (exit 2) naming
the flag; :func:`build_spec` completes the spec once the workload profile is known.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from tau_core.errors import UsageError
from tau_core.rendering import is_pinned_image
from tau_serve import spec as s

AUTOSCALE_FLAGS = (("min_replicas", "--min-replicas"), ("target_qps", "--target-qps"),
                   ("scale_down_delay", "--scale-down-delay"))
RAYSERVICE_ONLY = (("import_path", "--import-path"), ("app_args", "--app-args"), ("port", "--port"),
                   ("runtime_pip", "--runtime-pip"), ("nodes", "--nodes"), ("ray_version", "--ray-version"))
DEPLOYMENT_ONLY = (("deployment_ports", "--deployment-port"), ("inits", "--init"), ("sidecars", "--sidecar"),
                   ("readiness_path", "--readiness-path"), ("startup_path", "--startup-path"),
                   ("liveness_path", "--liveness-path"), ("startup_failure_threshold", "--startup-failure-threshold"),
                   ("service_port", "--service-port"), ("service_target_port", "--service-target-port"))
FINETUNE_REFS = "--from-finetune/--checkpoint-ref"
MODEL_REFS = "--from-model/--model-ref"


@attrs.define(kw_only=True)
class DeployArgs:
    """The ``deploy`` flags as typed on the command line."""

    name: str
    profile: str = ""
    kind: str = "rayservice"
    image: str | None = None
    replicas: int | None = None
    import_path: str | None = None
    app_args: str | None = None
    port: int | None = None
    deployment_ports: tuple[int, ...] = ()
    env: tuple[str, ...] = ()
    env_secrets: tuple[str, ...] = ()
    runtime_pip: tuple[str, ...] = ()
    inits: tuple[str, ...] = ()
    sidecars: tuple[str, ...] = ()
    volumes: tuple[str, ...] = ()
    mounts: tuple[str, ...] = ()
    checkpoint: str | None = None
    checkpoint_pvc: str = s.DEFAULT_CHECKPOINT_PVC
    from_finetune: str | None = None
    checkpoint_ref: str | None = None
    from_model: str | None = None
    model_ref: str | None = None
    readiness_path: str | None = None
    startup_path: str | None = None
    liveness_path: str | None = None
    startup_failure_threshold: int | None = None
    service_port: int | None = None
    service_target_port: int | None = None
    ray_version: str | None = None
    legacy_args: str | None = None
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    gpus: int | None = None
    nodes: int | None = None
    shm_size: str | None = None
    snapshot: str | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    target_qps: int | None = None
    scale_down_delay: int | None = None
    namespace: str | None = None
    context: str | None = None
    dry_run: str | None = None
    local: bool = False

    @property
    def finetune_ref(self) -> str | None:
        return self.from_finetune or self.checkpoint_ref

    @property
    def model(self) -> str | None:
        return self.from_model or self.model_ref


def _given(a: DeployArgs, field: str) -> bool:
    value = getattr(a, field)
    return value not in (None, (), "")


def check_flags(a: DeployArgs) -> None:
    """Every conflict and requirement that needs no cluster (exit 2, the flag named)."""
    if not a.profile and not a.local:
        raise UsageError("--profile is required: name a ready serving profile of the TauCluster",
                         hint="tau cluster profiles export lists them")
    _check_replicas(a)
    _check_sources(a)
    _check_kind(a)
    if a.snapshot and a.dry_run != "client":
        raise UsageError("--workload-profile-snapshot requires --dry-run=client; snapshots cannot authorize "
                         "server dry-run or apply")
    if a.snapshot and not a.namespace:
        raise UsageError("--workload-profile-snapshot requires --namespace so offline profile selection has an "
                         "explicit authorization scope")
    if a.nodes is not None and a.nodes < 2:
        raise UsageError(f"--nodes must be at least 2 (got {a.nodes}); omit it for a single-worker profile")
    for flag, value in (("--port", a.port), ("--service-port", a.service_port),
                        ("--service-target-port", a.service_target_port)):
        if value is not None and not 0 <= value <= 65535:
            raise UsageError(f"{flag} must be a port number between 1 and 65535")
    for value in a.deployment_ports:
        if not 0 < value <= 65535:
            raise UsageError(f"--deployment-port {value} must be between 1 and 65535")
    if not a.local:
        _check_images(a)
    s.parse_mounts(a.mounts, s.parse_volumes(a.volumes))
    s.parse_env(a.env)
    s.parse_env_secrets(a.env_secrets)
    s.parse_named_images(a.inits, "--init")
    s.parse_named_images(a.sidecars, "--sidecar")


def _check_replicas(a: DeployArgs) -> None:
    if a.replicas is not None and a.replicas < 0:
        raise UsageError("--replicas must be >= 0")
    if a.max_replicas is not None and a.max_replicas > 0:
        if a.replicas is not None:
            raise UsageError("--max-replicas and --replicas are mutually exclusive; use --min-replicas to set a floor")
        if (a.min_replicas or 1) > a.max_replicas:
            raise UsageError("--min-replicas must not exceed --max-replicas")
        return
    for field, flag in AUTOSCALE_FLAGS:
        if getattr(a, field) is not None:
            raise UsageError(f"{flag} requires --max-replicas to enable autoscaling")


def _check_sources(a: DeployArgs) -> None:
    if a.from_finetune and a.checkpoint_ref and a.from_finetune != a.checkpoint_ref:
        raise UsageError("--from-finetune and --checkpoint-ref name different runs; pass one of them")
    if a.from_model and a.model_ref and a.from_model != a.model_ref:
        raise UsageError("--from-model and --model-ref name different models; pass one of them")
    if a.checkpoint and (a.finetune_ref or a.model):
        raise UsageError(f"--checkpoint conflicts with {FINETUNE_REFS}/{MODEL_REFS}")
    if a.finetune_ref and a.model:
        raise UsageError("finetune checkpoint refs conflict with model refs")
    if a.checkpoint:
        s.checkpoint_path(a.checkpoint)
    if a.dry_run == "client" and a.finetune_ref:
        raise UsageError(f"{FINETUNE_REFS} require reading artifacts.json from Kubernetes; use --dry-run=server, "
                         "omit --dry-run, or pass a resolved --checkpoint path")
    if a.dry_run == "client" and a.model:
        raise UsageError(f"{MODEL_REFS} require reading the model registry from Kubernetes; use --dry-run=server, "
                         "omit --dry-run, or pass a resolved --checkpoint path")
    if a.checkpoint_ref and not a.checkpoint_ref.startswith("finetune/"):
        raise UsageError(f'--checkpoint-ref "{a.checkpoint_ref}" is not supported; only finetune/RUN[:artifact]')


def _check_kind(a: DeployArgs) -> None:
    if a.legacy_args is not None and a.args:
        raise UsageError("--arg conflicts with --args; pass literal arguments with repeated --arg")
    if a.kind != "deployment" and (a.command or a.args or a.legacy_args is not None):
        raise UsageError("--command and --arg require --kind=deployment; a RayService runs --import-path")
    if a.kind != "rayservice" and a.shm_size:
        raise UsageError("--shm-size requires --kind=rayservice")
    wrong = RAYSERVICE_ONLY if a.kind == "deployment" else DEPLOYMENT_ONLY
    other = "rayservice" if a.kind == "deployment" else "deployment"
    for field, flag in wrong:
        if _given(a, field):
            raise UsageError(f"{flag} requires --kind={other}")
    if a.kind == "deployment" and (a.readiness_path or a.startup_path or a.liveness_path):
        if not (a.service_port or a.service_target_port or a.deployment_ports):
            raise UsageError("--readiness-path/--startup-path/--liveness-path need a port from --service-port, "
                             "--service-target-port or --deployment-port")


def _check_images(a: DeployArgs) -> None:
    images = [("--image", a.image)] + [(flag, item.partition("=")[2]) for flag, items in
                                       (("--init", a.inits), ("--sidecar", a.sidecars)) for item in items]
    for flag, image in images:
        if image and not is_pinned_image(image):
            raise UsageError(f'{flag} "{image}" is not pinned by digest; serving images must be immutable',
                             hint="use IMAGE@sha256:<digest> (docker buildx imagetools inspect shows it)")


def app_args(path: str | None) -> Mapping[str, Any] | None:
    """``--app-args FILE``: a JSON or YAML object for the Ray Serve application builder."""
    if not path:
        return None
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--app-args {path}: cannot read the file ({exc.strerror})") from exc
    try:
        data = json.loads(text) if file.suffix == ".json" else _yaml(text)
    except ValueError as exc:
        raise UsageError(f"--app-args {path} is not valid JSON/YAML: {exc}") from exc
    if not isinstance(data, Mapping):
        raise UsageError(f"--app-args {path} must hold an object (mapping) of application arguments")
    return dict(data)


def _yaml(text: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        return YAML(typ="safe", pure=True).load(text)
    except YAMLError as exc:
        raise ValueError(str(exc).splitlines()[0]) from exc


def build_spec(a: DeployArgs, profile: Mapping[str, Any], model_path: str | None) -> s.ServeSpec:
    """The spec for ``profile`` (its GPUs and worker count are authoritative)."""
    gpus, workers = int(profile.get("gpusPerWorker") or 0), int(profile.get("workerCount") or 1)
    name = profile.get("name")
    if a.gpus is not None and a.gpus != gpus:
        raise UsageError(f'--gpus={a.gpus} conflicts with workload profile "{name}" gpusPerWorker {gpus}')
    if a.nodes is not None and a.nodes != workers:
        raise UsageError(f'--nodes={a.nodes} conflicts with workload profile "{name}" workerCount {workers}')
    image = a.image or str(profile.get("image") or "")
    if not image:
        raise UsageError(f'--image is required: workload profile "{name}" names no image')
    autoscaling = None
    if a.max_replicas:
        autoscaling = s.Autoscaling(min_replicas=a.min_replicas if a.min_replicas is not None else 1,
                                    max_replicas=a.max_replicas, target_qps=a.target_qps or 0,
                                    scale_down_delay=a.scale_down_delay if a.scale_down_delay is not None
                                    else s.DEFAULT_SCALE_DOWN_DELAY)
    volumes = s.parse_volumes(a.volumes)
    args = tuple(shlex.split(a.legacy_args)) if a.legacy_args else a.args
    return s.ServeSpec(
        name=a.name, kind=a.kind, image=image, replicas=1 if a.replicas is None else a.replicas,
        autoscaling=autoscaling, import_path=a.import_path or s.DEFAULT_IMPORT_PATH, app_args=app_args(a.app_args),
        port=a.port or s.DEFAULT_SERVE_PORT, deployment_ports=a.deployment_ports, env=s.parse_env(a.env),
        env_secrets=s.parse_env_secrets(a.env_secrets), runtime_pip=a.runtime_pip,
        inits=s.parse_named_images(a.inits, "--init"), sidecars=s.parse_named_images(a.sidecars, "--sidecar"),
        volumes=volumes, mounts=s.parse_mounts(a.mounts, volumes), model_path=model_path,
        checkpoint_pvc=a.checkpoint_pvc,
        probes=s.Probes(readiness_path=a.readiness_path, startup_path=a.startup_path, liveness_path=a.liveness_path,
                        startup_failure_threshold=a.startup_failure_threshold or 0),
        service_port=a.service_port or 0, service_target_port=a.service_target_port or 0,
        ray_version=a.ray_version or s.DEFAULT_RAY_VERSION, command=a.command, args=args, gpus=gpus, nodes=workers,
        shm_size=a.shm_size)
