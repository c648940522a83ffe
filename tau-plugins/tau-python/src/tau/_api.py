"""The public decorators: ``@tau.train(...)`` and ``@tau.eval(...)``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

from tau._errors import TauSDKError
from tau._workflow import EnvValue, EvalHandle, Placement, Resources, TrainHandle, repo_root

TrainDecorator = Callable[[Callable[..., Any]], TrainHandle]
EvalDecorator = Callable[[Callable[..., Any]], EvalHandle]


def _check_entrypoint(entrypoint: str) -> None:
    """Staging rules: a local file must be inside the repository; a missing relative path is an error."""
    script = entrypoint.partition(":")[0]
    if not script:
        raise TauSDKError("tau-py: entrypoint must be 'path.py:function'")
    path = Path(script)
    if path.is_absolute() and not path.exists():
        return  # a path inside the pod's image
    local = (path if path.is_absolute() else Path.cwd() / path).resolve()
    if not local.exists():
        raise FileNotFoundError(f"tau-py: entrypoint {script!r} does not exist ({local})")
    root = repo_root(Path.cwd().resolve())
    if local != root and root not in local.parents:
        raise TauSDKError(f"tau-py: entrypoint {script!r} is outside the repository ({root}); move it into the "
                          "repository or use an absolute path that exists only in the image")


def _common(name: str | None, config: Mapping[str, Any] | None, decorator: str) -> str:
    resolved = name or (config or {}).get("name")
    if not resolved:
        raise TauSDKError(f"tau-py: {decorator} requires name=... or config['name']")
    return str(resolved)


H = TypeVar("H", TrainHandle, EvalHandle)


def _finish(make: Callable[[Callable[..., Any] | None, str | None], H], entrypoint: str | None,
            entry_extras: bool) -> H | Callable[[Callable[..., Any]], H]:
    if entrypoint is not None:
        _check_entrypoint(entrypoint)
        return make(None, None)
    if entry_extras:
        raise TauSDKError("tau-py: entrypoint_* and extra_scripts require entrypoint=...")

    def wrap(fn: Callable[..., Any]) -> H:
        module = sys.modules.get(getattr(fn, "__module__", ""), None)
        source = getattr(module, "__file__", None)
        return make(fn, source)

    return wrap


@overload
def train(name: str | None = None, *, gpus: int = 1, workers: int = 1, smoke_pairs: int = 0,
          namespace: str | None = None, workload_kind: str = "rayjob", team: str | None = None,
          preset: str | None = None, lane: str | None = None, queue: str | None = None,
          gpu_class: str | None = None, gpu_resource_mode: str | None = None,
          node_selector: Mapping[str, str] | None = None, data_pvc: str | None = None,
          cpu_request: str | None = None, memory_request: str | None = None, cpu_limit: str | None = None,
          memory_limit: str | None = None, worker_cpu_request: str | None = None,
          worker_memory_request: str | None = None, worker_cpu_limit: str | None = None,
          worker_memory_limit: str | None = None, checkpoint_artifact: str | None = None,
          model: str | None = None, base_model: str | None = None, task: str | None = None,
          tags: Sequence[str] | None = None, primary_metric: str | None = None,
          metric_direction: str | None = None, config: Mapping[str, Any] | None = None,
          runtime_pip: Sequence[str] | None = None, env: Mapping[str, EnvValue] | None = None,
          mounts: Sequence[Mapping[str, Any]] | None = None, extra_manifest: Mapping[str, Any] | None = None,
          entrypoint: str, entrypoint_args: Sequence[Any] | None = None,
          entrypoint_kwargs: Mapping[str, Any] | None = None, entrypoint_pass_ctx: bool = True,
          extra_scripts: Sequence[str] | None = None, profiler: str | None = None,
          profile_rank: int | str = 0, profile_duration: str | None = None) -> TrainHandle: ...


@overload
def train(name: str | None = None, *, gpus: int = 1, workers: int = 1, smoke_pairs: int = 0,
          namespace: str | None = None, workload_kind: str = "rayjob", team: str | None = None,
          preset: str | None = None, lane: str | None = None, queue: str | None = None,
          gpu_class: str | None = None, gpu_resource_mode: str | None = None,
          node_selector: Mapping[str, str] | None = None, data_pvc: str | None = None,
          cpu_request: str | None = None, memory_request: str | None = None, cpu_limit: str | None = None,
          memory_limit: str | None = None, worker_cpu_request: str | None = None,
          worker_memory_request: str | None = None, worker_cpu_limit: str | None = None,
          worker_memory_limit: str | None = None, checkpoint_artifact: str | None = None,
          model: str | None = None, base_model: str | None = None, task: str | None = None,
          tags: Sequence[str] | None = None, primary_metric: str | None = None,
          metric_direction: str | None = None, config: Mapping[str, Any] | None = None,
          runtime_pip: Sequence[str] | None = None, env: Mapping[str, EnvValue] | None = None,
          mounts: Sequence[Mapping[str, Any]] | None = None, extra_manifest: Mapping[str, Any] | None = None,
          entrypoint: None = None, entrypoint_args: Sequence[Any] | None = None,
          entrypoint_kwargs: Mapping[str, Any] | None = None, entrypoint_pass_ctx: bool = True,
          extra_scripts: Sequence[str] | None = None, profiler: str | None = None,
          profile_rank: int | str = 0, profile_duration: str | None = None) -> TrainDecorator: ...


def train(name: str | None = None, *, gpus: int = 1, workers: int = 1, smoke_pairs: int = 0,
          namespace: str | None = None, workload_kind: str = "rayjob", team: str | None = None,
          preset: str | None = None, lane: str | None = None, queue: str | None = None,
          gpu_class: str | None = None, gpu_resource_mode: str | None = None,
          node_selector: Mapping[str, str] | None = None, data_pvc: str | None = None,
          cpu_request: str | None = None, memory_request: str | None = None, cpu_limit: str | None = None,
          memory_limit: str | None = None, worker_cpu_request: str | None = None,
          worker_memory_request: str | None = None, worker_cpu_limit: str | None = None,
          worker_memory_limit: str | None = None, checkpoint_artifact: str | None = None,
          model: str | None = None, base_model: str | None = None, task: str | None = None,
          tags: Sequence[str] | None = None, primary_metric: str | None = None,
          metric_direction: str | None = None, config: Mapping[str, Any] | None = None,
          runtime_pip: Sequence[str] | None = None, env: Mapping[str, EnvValue] | None = None,
          mounts: Sequence[Mapping[str, Any]] | None = None, extra_manifest: Mapping[str, Any] | None = None,
          entrypoint: str | None = None, entrypoint_args: Sequence[Any] | None = None,
          entrypoint_kwargs: Mapping[str, Any] | None = None, entrypoint_pass_ctx: bool = True,
          extra_scripts: Sequence[str] | None = None, profiler: str | None = None,
          profile_rank: int | str = 0, profile_duration: str | None = None) -> TrainHandle | TrainDecorator:
    """Turn a function into a train workload (a managed RayJob); see the package docs for every parameter.

    With ``entrypoint="path.py:function"`` the call returns the handle directly.
    """
    cfg = dict(config or {})
    resolved = _common(name, cfg, "@tau.train")
    workers = int(cfg.get("workers", workers))
    gpus = int(cfg.get("gpus", gpus))
    if workers < 1:
        raise TauSDKError("tau-py: workers must be >= 1")
    if lane == "eval":
        raise TauSDKError('tau-py: @tau.train cannot use lane="eval"; use @tau.eval for eval workloads.')
    if workload_kind != "rayjob":
        raise TauSDKError(f"tau-py: @tau.train workload_kind must be 'rayjob' (got {workload_kind!r})")
    if metric_direction not in (None, "lower", "higher"):
        raise TauSDKError("tau-py: metric_direction must be 'lower' or 'higher'")
    placement = Placement(namespace, team, preset, lane, queue, gpu_class, gpu_resource_mode,
                          dict(node_selector or {}), data_pvc)
    resources = Resources(cpu_request, memory_request, cpu_limit, memory_limit, worker_cpu_request,
                          worker_memory_request, worker_cpu_limit, worker_memory_limit)
    prof = None
    if profiler is not None:
        if profiler != "nsys":
            raise TauSDKError("tau-py: profiler must be 'nsys'")
        prof = {"mode": profiler, "rank": str(profile_rank),
                **({"duration": profile_duration} if profile_duration else {})}
    meta = {"name": model, "base": base_model, "task": task, "tags": list(tags) if tags else None,
            "primary_metric": primary_metric, "metric_direction": metric_direction}
    pip = runtime_pip if runtime_pip is not None else cfg.get("runtime_pip")

    def make(fn: Callable[..., Any] | None, source: str | None) -> TrainHandle:
        return TrainHandle(fn, name=resolved, gpus=gpus, workers=workers, placement=placement,
                           resources=resources, runtime_pip=pip, env=env, mounts=mounts,
                           extra_manifest=extra_manifest, entrypoint=entrypoint,
                           entrypoint_args=entrypoint_args or (), entrypoint_kwargs=entrypoint_kwargs,
                           entrypoint_pass_ctx=entrypoint_pass_ctx, extra_scripts=extra_scripts or (),
                           smoke_pairs=smoke_pairs, source_file=source, checkpoint_artifact=checkpoint_artifact,
                           model_meta=meta, profiler=prof)

    extras = bool(entrypoint_args or entrypoint_kwargs or extra_scripts or not entrypoint_pass_ctx)
    return _finish(make, entrypoint, extras)


@overload
def eval(name: str | None = None, *, after: str | None = None, gpus: int = 1, cpu_workers: int = 1,
         gpu_class: str | None = None, gpu_resource_mode: str | None = None,
         node_selector: Mapping[str, str] | None = None, data_pvc: str | None = None,
         cpu_request: str | None = None, memory_request: str | None = None, cpu_limit: str | None = None,
         memory_limit: str | None = None, worker_cpu_request: str | None = None,
         worker_memory_request: str | None = None, worker_cpu_limit: str | None = None,
         worker_memory_limit: str | None = None, namespace: str | None = None, team: str | None = None,
         preset: str | None = None, queue: str | None = None, runtime_pip: Sequence[str] | None = None,
         env: Mapping[str, EnvValue] | None = None, mounts: Sequence[Mapping[str, Any]] | None = None,
         extra_manifest: Mapping[str, Any] | None = None, config: Mapping[str, Any] | None = None,
         entrypoint: str) -> EvalHandle: ...


@overload
def eval(name: str | None = None, *, after: str | None = None, gpus: int = 1, cpu_workers: int = 1,
         gpu_class: str | None = None, gpu_resource_mode: str | None = None,
         node_selector: Mapping[str, str] | None = None, data_pvc: str | None = None,
         cpu_request: str | None = None, memory_request: str | None = None, cpu_limit: str | None = None,
         memory_limit: str | None = None, worker_cpu_request: str | None = None,
         worker_memory_request: str | None = None, worker_cpu_limit: str | None = None,
         worker_memory_limit: str | None = None, namespace: str | None = None, team: str | None = None,
         preset: str | None = None, queue: str | None = None, runtime_pip: Sequence[str] | None = None,
         env: Mapping[str, EnvValue] | None = None, mounts: Sequence[Mapping[str, Any]] | None = None,
         extra_manifest: Mapping[str, Any] | None = None, config: Mapping[str, Any] | None = None,
         entrypoint: None = None) -> EvalDecorator: ...


def eval(name: str | None = None, *, after: str | None = None, gpus: int = 1, cpu_workers: int = 1,
         gpu_class: str | None = None, gpu_resource_mode: str | None = None,
         node_selector: Mapping[str, str] | None = None, data_pvc: str | None = None,
         cpu_request: str | None = None, memory_request: str | None = None, cpu_limit: str | None = None,
         memory_limit: str | None = None, worker_cpu_request: str | None = None,
         worker_memory_request: str | None = None, worker_cpu_limit: str | None = None,
         worker_memory_limit: str | None = None, namespace: str | None = None, team: str | None = None,
         preset: str | None = None, queue: str | None = None, runtime_pip: Sequence[str] | None = None,
         env: Mapping[str, EnvValue] | None = None, mounts: Sequence[Mapping[str, Any]] | None = None,
         extra_manifest: Mapping[str, Any] | None = None, config: Mapping[str, Any] | None = None,
         entrypoint: str | None = None) -> EvalHandle | EvalDecorator:
    """Turn a function into an eval workload: one GPU actor plus ``cpu_workers`` CPU workers (lane eval)."""
    cfg = dict(config or {})
    resolved = _common(name, cfg, "@tau.eval")
    if int(cpu_workers) < 1:
        raise TauSDKError("tau-py: @tau.eval cpu_workers must be >= 1; an eval fans out to CPU workers "
                          "(use @tau.train instead)")
    if int(gpus) < 1:
        raise TauSDKError("tau-py: @tau.eval gpus must be >= 1")
    placement = Placement(namespace, team, preset, "eval", queue, gpu_class, gpu_resource_mode,
                          dict(node_selector or {}), data_pvc)
    resources = Resources(cpu_request, memory_request, cpu_limit, memory_limit, worker_cpu_request,
                          worker_memory_request, worker_cpu_limit, worker_memory_limit)
    pip = runtime_pip if runtime_pip is not None else cfg.get("runtime_pip")

    def make(fn: Callable[..., Any] | None, source: str | None) -> EvalHandle:
        return EvalHandle(fn, name=resolved, gpus=gpus, workers=1, placement=placement, resources=resources,
                          runtime_pip=pip, env=env, mounts=mounts, extra_manifest=extra_manifest,
                          entrypoint=entrypoint, source_file=source, after=after, cpu_workers=cpu_workers)

    return _finish(make, entrypoint, False)

