"""Turn a :class:`~tau_core.lifecycle.base.SubmitRequest` into a local execution plan.

The plan (``request.json`` in the run directory) is everything the supervisor needs, resolved once
at submit: the command line, the working directory, the environment that mirrors the cluster's
injected variables, the memory limit, the retry policy, the output/staging directories and the
metric history globs.  What cannot work on this machine fails here, before anything starts, with
a one-line error naming the field.

Path mapping (see :func:`tau_core.backends.local.paths.map_container_path`): ``/data/...`` is the local data
root (``TAU_DATA_DIR`` inside the run), ``/mnt/...`` the local hot root.

Defaults that differ from the cluster because local run ids are unique per submission:

* ``storage.output`` unset -> ``<data root>/checkpoints/workflows/<run-id>``;
* ``resilience.checkpoint_path`` unset (or the cluster default ``/data/checkpoints/finetunes/<name>``, which
  would make every local run of a target share one directory) -> ``<output>/checkpoints``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tau_core.backends.local import paths
from tau_core.backends.local.oom import parse_memory
from tau_core.config.run_model import normalized
from tau_core.errors import ConfigError
from tau_core.lifecycle.base import SubmitRequest

SETTABLE_TAU_ENV = ("TAU_RESUME_FROM", "TAU_RETRY_ATTEMPT", "TAU_RETRY_MAX", "TAU_RETRY_REASON")
DEFAULT_RETRY_ON = ("Preempted", "Evicted")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
RAY_INSTALL = "pip install 'tau[ray]'"
CLUSTER_CHECKPOINT_ROOT = "/data/checkpoints/finetunes"


def get(config: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping):
            return default
        node = node.get(part)
        if node is None:
            return default
    return node


def parse_duration(value: Any, field: str) -> float:
    """A Go duration string (``30s``, ``1m30s``, ``500ms``) or a number of seconds."""
    if isinstance(value, bool):
        raise ConfigError(f"{field}: invalid duration {value!r}", hint="use a Go duration such as 30s or 5m")
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    if text in ("0", ""):
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ConfigError(f"{field}: invalid duration {value!r}", hint="use a Go duration such as 30s or 5m")
    return total


def config_dir(request: SubmitRequest) -> Path:
    explicit = request.context.config_dir
    if explicit:
        return Path(str(explicit)).resolve()
    if request.config_path is not None:
        return Path(request.config_path).resolve().parent
    return Path.cwd()


def project_root(cfg_dir: Path) -> Path:
    """The repository a target belongs to: the parent of a ``tau/`` config directory, else the config dir."""
    return cfg_dir.parent if cfg_dir.name == "tau" else cfg_dir


def _entrypoint(config: Mapping[str, Any]) -> str | None:
    for key in ("run.entrypoint", "run.script", "entrypoint", "script"):
        value = get(config, key)
        if value:
            return str(value)
    return None


def _engine(config: Mapping[str, Any]) -> str:
    engine = str(get(config, "engine") or get(config, "run.engine") or get(config, "run.workload_kind")
                 or get(config, "compute.workload_kind") or "job").strip().lower()
    if engine in ("ray", "ray-train", "ray_train"):
        engine = "rayjob"
    if engine not in ("job", "rayjob"):
        raise ConfigError(f"engine {engine!r} is not valid; use job or rayjob")
    return engine


def _refuse(config: Mapping[str, Any]) -> None:
    """Config features that need a cluster: each gets a clear local error."""
    if get(config, "workflow.file") or (get(config, "schema_version") is not None and not get(config, "engine")):
        raise ConfigError("managed workflow configs (workflow.file / schema_version) cannot run locally",
                          hint="run a direct config (engine: job or rayjob) with --local, or submit to a cluster")
    secret = get(config, "runtime.env_secret") or {}
    if secret:
        names = ", ".join(sorted(str(k) for k in secret))
        raise ConfigError(
            f"runtime.env_secret ({names}) reads Kubernetes Secrets, which a local run cannot reach",
            hint="remove runtime.env_secret for local runs and export the variable in your shell instead: "
                 "local processes inherit your environment")
    if get(config, "runtime.env_kv"):
        raise ConfigError("runtime.env_kv reads Azure Key Vault through the cluster and cannot run locally",
                          hint="export the value in your shell; local processes inherit your environment")
    if get(config, "run.source"):
        raise ConfigError("run.source stages code from a container image, which a local run does not pull",
                          hint="remove run.source for local runs: the local backend runs your checkout")
    if get(config, "storage.image_assets"):
        raise ConfigError("storage.image_assets copies files out of container images, which a local run does not pull",
                          hint="point the script at local copies of the assets, or submit to a cluster")
    nodes = get(config, "execution.nodes") or 1
    if int(nodes) > 1:
        raise ConfigError(f"execution.nodes={nodes}: a local run uses one machine",
                          hint="set execution.nodes: 1 (or remove it) for --local")


def _argv(config: Mapping[str, Any], entry: Path, engine: str) -> list[str]:
    python = sys.executable or "python3"
    flags: list[str] = []
    launcher = str(get(config, "execution.launcher") or ("python" if engine == "job" else "ray-train"))
    configs = get(config, "execution.configs") or {}
    if launcher in ("python", "torchrun") and isinstance(configs, Mapping):
        for key, value in configs.items():
            flags.append(f"--{key}" if value in ("", None) else f"--{key}={_flag(value)}")
    if engine == "rayjob" and entry.suffix == ".py":
        return [python, str(entry)]
    if launcher == "torchrun":
        ppn = int(get(config, "execution.processes_per_node") or 1)
        return [python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ppn}", str(entry), *flags]
    if entry.suffix == ".py":
        return [python, str(entry), *flags]
    if os.access(entry, os.X_OK):
        return [str(entry), *flags]
    return ["/bin/sh", str(entry), *flags]


def _flag(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _working_dir(config: Mapping[str, Any], cfg_dir: Path, engine: str) -> Path:
    runtime_wd = get(config, "runtime.working_dir")
    if runtime_wd:
        path = paths.map_container_path(str(runtime_wd))
        if not path.is_dir():
            raise ConfigError(
                f"runtime.working_dir {runtime_wd!r} does not exist on this machine (local runs start there)",
                hint="create the directory, or remove runtime.working_dir to start in the project directory")
        return path
    ray_wd = get(config, "run.working_dir")
    if ray_wd and engine == "rayjob":
        path = (cfg_dir / str(ray_wd)).resolve()
        if not path.is_dir():
            raise ConfigError(f"run.working_dir {ray_wd!r} is not a directory ({path})",
                              hint="run.working_dir is relative to the config file's directory")
        return path
    return project_root(cfg_dir)


def _memory_limit(config: Mapping[str, Any]) -> int | None:
    for field in ("compute.memory_limit", "compute.memory_request", "compute.head_memory_limit"):
        value = get(config, field)
        if value not in (None, ""):
            return parse_memory(value, field)
    return None


def _history(config: Mapping[str, Any]) -> list[str]:
    history = get(config, "metrics.history") or get(config, "storage.metrics.history") or []
    if isinstance(history, str):
        history = [history]
    return [str(h) for h in history if str(h).strip()]


def _ray_plan(request: SubmitRequest, config: Mapping[str, Any], cfg_dir: Path, entry: Path,
              engine: str, env: Mapping[str, str]) -> dict[str, Any] | None:
    if engine != "rayjob":
        return None
    from tau_core.backends.local import ray as local_ray

    return local_ray.plan_ray(lambda field: get(config, field), target=str(request.name or "run"),
                              python=sys.executable or "python3", cwd=_working_dir(config, cfg_dir, engine),
                              argv=_argv(config, entry, engine), entry=entry,
                              address=local_ray.external_address(env))


def _local_entrypoint(config: Mapping[str, Any], cfg_dir: Path, engine: str) -> Path:
    """The entrypoint file (relative to the config's directory); Ray must be installed for a rayjob."""
    if engine == "rayjob":
        from tau_core.backends.local import ray as local_ray

        if not local_ray.ray_installed():
            raise ConfigError("engine: rayjob runs its driver on a local Ray head, and Ray is not installed",
                              hint=f"install the Ray extra: {RAY_INSTALL}")
    entry_text = _entrypoint(config)
    if not entry_text:
        raise ConfigError("entrypoint is required for a local run", hint="set entrypoint: train.py in the config")
    entry = Path(entry_text)
    if not entry.is_absolute():
        entry = (cfg_dir / entry).resolve()
    if not entry.is_file():
        raise ConfigError(f"entrypoint {entry_text!r} not found ({entry})",
                          hint="entrypoint is relative to the config file's directory")
    return entry


def _output_dirs(request: SubmitRequest, run_id: str, env: Mapping[str, str]) -> tuple[Path, Path]:
    """``(output, checkpoint)``: ``storage.output`` and ``resilience.checkpoint_path`` mapped onto this machine."""
    output_cfg = request.config.storage.output
    if output_cfg:
        output = paths.map_container_path(str(output_cfg), env)
    else:
        output = paths.data_root(env) / "checkpoints" / "workflows" / run_id
    checkpoint_cfg = request.config.resilience.checkpoint_path
    if checkpoint_cfg and str(checkpoint_cfg).rstrip("/") != f"{CLUSTER_CHECKPOINT_ROOT}/{request.name}":
        checkpoint = paths.map_container_path(str(checkpoint_cfg), env)
    else:  # unset, or the cluster default derived from the target name: use this run's own output
        checkpoint = output / "checkpoints"
    return output, checkpoint


def _run_env(request: SubmitRequest, engine: str, output: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The environment the entrypoint sees: ``runtime.env``, the TAU_* directories, then ``extra_env``."""
    data = paths.data_root(env)
    hot = paths.hot_root(env)
    injected: dict[str, str] = {}
    user_env = request.config.runtime.env or {}
    for key, value in dict(user_env).items():
        injected[str(key)] = "" if value is None else str(value)
    injected.update({
        "TAU_DATA_DIR": str(data),
        "TAU_HOT_DIR": str(hot),
        "TAU_DATASETS_DIR": str(hot / "datasets"),
        "TAU_CHECKPOINTS_DIR": str(hot / "checkpoints"),
        "TAU_DURABLE_DATASETS_DIR": str(data / "datasets"),
        "TAU_DURABLE_CHECKPOINTS_DIR": str(data / "checkpoints"),
        "TAU_OUTPUT_DIR": str(output),
    })
    injected.setdefault("PYTHONUNBUFFERED", "1")
    if engine == "rayjob":
        workers = int(request.config.compute.workers or 1)
        injected.update({"TAU_DIST_BACKEND": "gloo", "TAU_NUM_WORKERS": str(workers), "TAU_WORLD_SIZE": str(workers)})
    for key, value in (request.extra_env or {}).items():
        injected[str(key)] = str(value)
    return injected


def _retry_plan(config: Mapping[str, Any]) -> dict[str, Any]:
    max_retries = int(get(config, "resilience.max_retries") or 0)
    retry_on = get(config, "resilience.retry_on") or (list(DEFAULT_RETRY_ON) if max_retries > 0 else [])
    return {
        "max_retries": max_retries,
        "retry_on": [str(r) for r in retry_on],
        "backoff_initial": parse_duration(get(config, "resilience.backoff_initial") or "30s",
                                          "resilience.backoff_initial"),
        "backoff_max": parse_duration(get(config, "resilience.backoff_max") or "5m", "resilience.backoff_max"),
    }


def build_plan(request: SubmitRequest, run_id: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The supervisor's instructions for ``request``; raises :class:`ConfigError` for what cannot run here."""
    env = os.environ if env is None else env
    # the dotted-path readers below (entrypoint, engine, Ray and history plans) take the normalized mapping
    config = normalized(request.config)
    _refuse(config)
    engine = _engine(config)
    cfg_dir = config_dir(request)
    entry = _local_entrypoint(config, cfg_dir, engine)
    output, checkpoint = _output_dirs(request, run_id, env)
    experiment = {
        "project": str(get(config, "experiment.project") or paths.slug(project_root(cfg_dir).name)),
        "name": str(get(config, "experiment.name") or get(config, "experiment.group") or ""),
        "group": str(get(config, "experiment.group") or "default"),
    }
    return {
        "schema": "tau.local.request.v1",
        "run_id": run_id,
        "name": request.name,
        "engine": engine,
        "argv": _argv(config, entry, engine),
        "entrypoint": str(entry),
        "cwd": str(_working_dir(config, cfg_dir, engine)),
        "config_path": str(request.config_path) if request.config_path else None,
        "config_hash": request.config_hash,
        "submission_id": request.submission_id,
        "env": _run_env(request, engine, output, env),
        "memory_limit": _memory_limit(config),
        "output_dir": str(output),
        "checkpoint_path": str(checkpoint),
        "staged": str(get(config, "storage.publish") or "").strip().lower() == "staged",
        "staging_root": str(paths.hot_root(env) / "tau-output" / run_id),
        "history": _history(config),
        "experiment": experiment,
        "ray": _ray_plan(request, config, cfg_dir, entry, engine, env),
        "retry": _retry_plan(config),
    }
