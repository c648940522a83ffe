"""The typed serve intent (:class:`ServeSpec`) and the request the RayService/Deployment renderers read.

A :class:`ServeRenderRequest` pairs the serve intent with the same typed
:class:`~tau_core.rendering.RenderContext` that the Job and RayJob renderers read (namespace, queue,
the selected workload profile and its stamps, the dry-run mode).  Renderers read nothing else: no
cluster, no clock.  The small value types here are parsed from the command line by
:mod:`tau_serve.options`; every parser raises :class:`~tau_core.errors.UsageError` naming the flag.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

import attrs

from tau_core.errors import UsageError
from tau_core.rendering import RenderContext

KINDS = ("rayservice", "deployment")
KIND_NAMES = {"rayservice": "RayService", "deployment": "Deployment"}
DATA_MOUNT = "/data"
DATA_VOLUME = "tau-data"
CHECKPOINTS_DIR = "/data/checkpoints"
DEFAULT_CHECKPOINT_PVC = "blob-training"
DEFAULT_IMPORT_PATH = "serve:app"
DEFAULT_RAY_VERSION = "2.40.0"
DEFAULT_SERVE_PORT = 8000
DEFAULT_TARGET_QPS = 5
DEFAULT_SCALE_DOWN_DELAY = 300
MODEL_PATH_ENV = "TAU_MODEL_PATH"
VOLUME_KINDS = ("pvc", "emptyDir", "configMap", "secret")


@attrs.frozen
class SecretEnv:
    """``--env-secret KEY=SECRET:KEY``: an env var read from a Secret key (never a value)."""

    name: str
    secret: str
    key: str


@attrs.frozen
class Volume:
    """``--volume NAME=KIND[:source]``."""

    name: str
    kind: str
    source: str = ""


@attrs.frozen
class Mount:
    """``--mount NAME:PATH[:ro|rw]``."""

    name: str
    path: str
    read_only: bool = False


@attrs.frozen
class NamedImage:
    """``--init`` / ``--sidecar NAME=IMAGE``."""

    name: str
    image: str


@attrs.frozen(kw_only=True)
class Autoscaling:
    """Serving-replica autoscaling (``--max-replicas`` > 0)."""

    min_replicas: int = 1
    max_replicas: int = 0
    target_qps: int = 0
    scale_down_delay: int = DEFAULT_SCALE_DOWN_DELAY


@attrs.frozen(kw_only=True)
class Probes:
    readiness_path: str | None = None
    startup_path: str | None = None
    liveness_path: str | None = None
    startup_failure_threshold: int = 0


@attrs.frozen(kw_only=True)
class ServeSpec:
    """Everything ``tau serve deploy`` asks for, validated; the renderers' input besides the context."""

    name: str
    kind: str = "rayservice"
    image: str = ""
    replicas: int = 1
    autoscaling: Autoscaling | None = None
    import_path: str = DEFAULT_IMPORT_PATH
    app_args: Mapping[str, Any] | None = None
    port: int = DEFAULT_SERVE_PORT
    deployment_ports: tuple[int, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    env_secrets: tuple[SecretEnv, ...] = ()
    runtime_pip: tuple[str, ...] = ()
    inits: tuple[NamedImage, ...] = ()
    sidecars: tuple[NamedImage, ...] = ()
    volumes: tuple[Volume, ...] = ()
    mounts: tuple[Mount, ...] = ()
    model_path: str | None = None
    """The resolved ``TAU_MODEL_PATH`` (from ``--checkpoint`` or a resolved reference)."""
    checkpoint_pvc: str = DEFAULT_CHECKPOINT_PVC
    probes: Probes = Probes()
    service_port: int = 0
    service_target_port: int = 0
    ray_version: str = DEFAULT_RAY_VERSION
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    gpus: int = 0
    """GPUs per worker (from the profile)."""
    nodes: int = 1
    """Ray worker count (from the profile)."""
    shm_size: str | None = None

    @property
    def kind_name(self) -> str:
        return KIND_NAMES[self.kind]


@attrs.frozen(kw_only=True)
class ServeRenderRequest:
    """What a serving renderer reads: the intent plus the typed render context."""

    spec: ServeSpec
    context: RenderContext = attrs.field(factory=RenderContext)

    @property
    def kind(self) -> str:
        return self.spec.kind_name

    @property
    def redact(self) -> bool:
        flag = self.context.redact_secrets
        return self.context.dry_run == "client" if flag is None else bool(flag)


# -- parsers (command line -> typed values) ------------------------------------------------------------


def checkpoint_path(value: str, flag: str = "--checkpoint") -> str:
    """``TAU_MODEL_PATH`` for a checkpoint: absolute under ``/data``; ``projects/...`` under ``/data``;
    any other relative path under ``/data/checkpoints``; ``..`` is refused."""
    raw = value.strip()
    if not raw:
        raise UsageError(f"{flag} must not be empty")
    if ".." in raw.split("/"):
        raise UsageError(f'{flag} "{raw}" contains "..": checkpoint paths cannot leave the checkpoint volume',
                         hint="pass a path under /data, projects/..., or relative to /data/checkpoints")
    if raw.startswith("/"):
        path = posixpath.normpath(raw)
        if path != DATA_MOUNT and not path.startswith(DATA_MOUNT + "/"):
            raise UsageError(f'{flag} "{raw}" is outside {DATA_MOUNT}, where the checkpoint PVC is mounted',
                             hint="pass a path under /data, projects/..., or relative to /data/checkpoints")
        return path
    rel = posixpath.normpath(raw)
    base = DATA_MOUNT if rel == "projects" or rel.startswith("projects/") else CHECKPOINTS_DIR
    return posixpath.join(base, rel)


def parse_env(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, val = item.partition("=")
        if not sep or not _env_name(key):
            raise UsageError(f'--env "{item.partition("=")[0]}=..." must be KEY=VALUE with a valid variable name')
        out[key] = val
    return tuple(out.items())


def parse_env_secrets(values: tuple[str, ...]) -> tuple[SecretEnv, ...]:
    out: list[SecretEnv] = []
    for item in values:
        key, sep, ref = item.partition("=")
        secret, sep2, skey = ref.partition(":")
        if not sep or not sep2 or not _env_name(key) or not secret or not skey:
            raise UsageError(f'--env-secret "{key}" must be KEY=SECRET:KEY',
                             hint="the value is read from the Secret at run time, never from the command line")
        out.append(SecretEnv(key, secret, skey))
    return tuple(out)


def parse_named_images(values: tuple[str, ...], flag: str) -> tuple[NamedImage, ...]:
    out: list[NamedImage] = []
    for item in values:
        name, sep, image = item.partition("=")
        if not sep or not _dns_label(name) or not image.strip():
            raise UsageError(f'{flag} "{item}" must be NAME=IMAGE with a DNS-1123 container name')
        out.append(NamedImage(name, image.strip()))
    return tuple(out)


def parse_volumes(values: tuple[str, ...]) -> tuple[Volume, ...]:
    out: list[Volume] = []
    for item in values:
        name, sep, rest = item.partition("=")
        kind, _, source = rest.partition(":")
        if not sep or not _dns_label(name):
            raise UsageError(f'--volume "{item}" must be NAME=KIND[:source] with a DNS-1123 volume name')
        if name == DATA_VOLUME:
            raise UsageError(f'--volume name "{DATA_VOLUME}" is reserved for the checkpoint PVC mounted at /data',
                             hint="choose another volume name (use --checkpoint-pvc to change the /data PVC)")
        if kind not in VOLUME_KINDS:
            raise UsageError(f'--volume "{name}" has kind "{kind}"; use one of: pvc:<claim>, emptyDir, '
                             "configMap:<name>, secret:<name>")
        if (kind == "emptyDir") == bool(source):
            need = "takes no source" if kind == "emptyDir" else f"needs a source ({kind}:<name>)"
            raise UsageError(f'--volume "{name}" of kind {kind} {need}')
        out.append(Volume(name, kind, source))
    if len({v.name for v in out}) != len(out):
        raise UsageError("--volume names must be unique")
    return tuple(out)


def parse_mounts(values: tuple[str, ...], volumes: tuple[Volume, ...]) -> tuple[Mount, ...]:
    names = {v.name for v in volumes}
    out: list[Mount] = []
    for item in values:
        parts = item.split(":")
        if len(parts) not in (2, 3) or not parts[0] or not parts[1].startswith("/"):
            raise UsageError(f'--mount "{item}" must be NAME:/ABSOLUTE/PATH[:ro|rw]')
        name, path = parts[0], posixpath.normpath(parts[1])
        mode = parts[2] if len(parts) == 3 else "rw"
        if mode not in ("ro", "rw"):
            raise UsageError(f'--mount "{item}" mode must be ro or rw')
        if name == DATA_VOLUME:
            raise UsageError(f'--mount name "{DATA_VOLUME}" is reserved for the checkpoint PVC mounted at /data')
        if name not in names:
            raise UsageError(f'--mount "{name}" does not match any --volume NAME',
                             hint="declare the volume with --volume " + name + "=KIND[:source]")
        if path == DATA_MOUNT or path.startswith(DATA_MOUNT + "/"):
            raise UsageError(f'--mount "{name}" path {path} is inside /data, where the checkpoint PVC is mounted')
        out.append(Mount(name, path, mode == "ro"))
    return tuple(out)


def _env_name(name: str) -> bool:
    return bool(name) and (name[0].isalpha() or name[0] == "_") and all(c.isalnum() or c == "_" for c in name)


def _dns_label(name: str) -> bool:
    return (0 < len(name) <= 63 and name[0].isalnum() and name[-1].isalnum()
            and all(c.islower() or c.isdigit() or c == "-" for c in name))
