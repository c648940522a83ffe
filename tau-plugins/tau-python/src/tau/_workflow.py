"""``@tau.train`` and ``@tau.eval``: a function becomes a handle that runs locally or submits a manifest."""

from __future__ import annotations

import abc
import copy
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau._ctx import Ctx
from tau._errors import TauSDKError
from tau._secrets import SecretRef, SecretSource

if TYPE_CHECKING:
    from tau._submit import SubmitOutcome

RESERVED_KEYS = ("schema_version", "name", "compute", "eval", "entrypoint")
DEFAULT_NAMESPACE = "ray"
UPSTREAM_ROOT = "/data/checkpoints/finetunes"

EnvValue = str | SecretSource | SecretRef


@dataclass
class Placement:
    """Where and how a workload is scheduled (the generated ``policy`` block)."""

    namespace: str | None = None
    team: str | None = None
    preset: str | None = None
    lane: str | None = None
    queue: str | None = None
    gpu_class: str | None = None
    gpu_resource_mode: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    data_pvc: str | None = None
    disable_default_priorities: bool = False


@dataclass
class Resources:
    cpu_request: str | None = None
    memory_request: str | None = None
    cpu_limit: str | None = None
    memory_limit: str | None = None
    worker_cpu_request: str | None = None
    worker_memory_request: str | None = None
    worker_cpu_limit: str | None = None
    worker_memory_limit: str | None = None

    def compute(self) -> dict[str, str]:
        pairs = {"cpus": self.cpu_request, "cpu_limit": self.cpu_limit or self.cpu_request,
                 "memory": self.memory_request, "memory_limit": self.memory_limit or self.memory_request,
                 "worker_cpus": self.worker_cpu_request,
                 "worker_cpu_limit": self.worker_cpu_limit or self.worker_cpu_request,
                 "worker_memory": self.worker_memory_request,
                 "worker_memory_limit": self.worker_memory_limit or self.worker_memory_request}
        return {k: str(v) for k, v in pairs.items() if v is not None}


def _json_or_fail(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TauSDKError(f"tau-py: {what} must be JSON-serializable: {exc}") from None


def deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _check_extra(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    if not extra:
        return {}
    bad = sorted(k for k in extra if k in RESERVED_KEYS)
    if bad:
        raise TauSDKError(f"tau-py: extra_manifest cannot override reserved keys {', '.join(bad)} "
                          f"(reserved: {', '.join(RESERVED_KEYS)}); use the decorator parameters instead")
    return dict(_json_or_fail(dict(extra), "extra_manifest"))


def repo_root(start: Path) -> Path:
    """The Git root above ``start`` (the directory itself when there is none)."""
    from tau_core.gitrepo import git_root

    return git_root(start) or start


class WorkloadHandle(abc.ABC):
    """Common behaviour of train and eval handles."""

    kind = "rayjob"
    decorator = "@tau.train"

    def __init__(self, fn: Callable[..., Any] | None, *, name: str, gpus: int, workers: int,
                 placement: Placement, resources: Resources, runtime_pip: Sequence[str] | None,
                 env: Mapping[str, EnvValue] | None, mounts: Sequence[Mapping[str, Any]] | None,
                 extra_manifest: Mapping[str, Any] | None, entrypoint: str | None = None,
                 entrypoint_args: Sequence[Any] = (), entrypoint_kwargs: Mapping[str, Any] | None = None,
                 entrypoint_pass_ctx: bool = True, extra_scripts: Sequence[str] = (), smoke_pairs: int = 0,
                 source_file: str | None = None) -> None:
        self.fn = fn
        self.name = name
        self.gpus = int(gpus)
        self.workers = int(workers)
        self.placement = placement
        self.resources = resources
        self.runtime_pip = list(runtime_pip or [])
        self.env: dict[str, EnvValue] = dict(env or {})
        self.mounts = [dict(m) for m in (mounts or [])]
        self.extra_manifest = _check_extra(extra_manifest)
        self.entrypoint_args = list(_json_or_fail(list(entrypoint_args), "entrypoint_args"))
        self.entrypoint_kwargs = dict(_json_or_fail(dict(entrypoint_kwargs or {}), "entrypoint_kwargs"))
        self.entrypoint_pass_ctx = entrypoint_pass_ctx
        self.extra_scripts = list(extra_scripts)
        self.smoke_pairs = int(smoke_pairs)
        self.script, self.function = self._entry(fn, entrypoint, source_file)
        for key, value in self.env.items():
            if not isinstance(value, str | SecretSource | SecretRef):
                raise TauSDKError(f"tau-py: env[{key!r}] must be a string, tau.secret(...) or tau.secret_ref(...)")

    # -- identity ---------------------------------------------------------------------------------
    @staticmethod
    def _entry(fn: Callable[..., Any] | None, entrypoint: str | None,
               source_file: str | None) -> tuple[str | None, str]:
        if entrypoint is not None:
            script, _, function = entrypoint.partition(":")
            return script, function or "main"
        assert fn is not None
        module_file = source_file or getattr(getattr(fn, "__code__", None), "co_filename", None)
        return module_file, fn.__name__

    @property
    def resource_name(self) -> str:
        return f"tau-{self.name}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} kind={self.kind}>"

    # -- the manifest -----------------------------------------------------------------------------
    @abc.abstractmethod
    def base_manifest(self) -> dict[str, Any]:
        """The kind-specific manifest body; TrainHandle and EvalHandle each define it."""

    def _runtime(self) -> dict[str, Any]:
        runtime: dict[str, Any] = {"pip": list(self.runtime_pip)}
        plain = [{"name": k, "value": v} for k, v in sorted(self.env.items()) if isinstance(v, str)]
        if plain:
            runtime["env"] = plain
        refs = {k: f"{v.name}:{v.key}" for k, v in sorted(self.env.items()) if isinstance(v, SecretRef)}
        if refs:
            runtime["env_secret"] = refs
        return runtime

    def secret_values(self) -> dict[str, str]:
        """The payload of the run's Secret (resolved now; never written into the manifest)."""
        return {k: v.resolve() for k, v in sorted(self.env.items()) if isinstance(v, SecretSource)}

    def _storage(self) -> dict[str, Any]:
        storage: dict[str, Any] = {}
        if self.placement.data_pvc:
            storage["data_pvc"] = self.placement.data_pvc
        if self.mounts:
            storage["mounts"] = [{"name": m["name"], "mountPath": m.get("mountPath") or m.get("mount_path"),
                                  "pvc": m["pvc"], "readOnly": bool(m.get("readOnly", m.get("read_only", True)))}
                                 for m in self.mounts]
        return storage

    def _entrypoint(self, script: str | None) -> dict[str, Any]:
        return {"script": script, "function": self.function, "args": list(self.entrypoint_args),
                "kwargs": dict(self.entrypoint_kwargs), "pass_ctx": self.entrypoint_pass_ctx}

    def manifest(self, *, script: str | None = None, generated: bool = False,
                 upstream_checkpoint: str | None = None, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The ``schema_version: 1`` manifest; ``generated`` adds what submit adds (run, policy, workflow)."""
        if not self.runtime_pip:
            raise TauSDKError(f"tau-py: {self.name!r} has no runtime.pip — declare runtime_pip=[...] (the per-pod "
                              "Python environment your function needs); tau ships no default pip list.")
        doc = self.base_manifest()
        doc["entrypoint"] = self._entrypoint(script if script is not None else self.script)
        doc = deep_merge(doc, self.extra_manifest)
        if generated:
            p = self.placement
            doc["run"] = {"workload_kind": self.kind, "smoke_pairs": self.smoke_pairs}
            policy = {"namespace": p.namespace or DEFAULT_NAMESPACE, "team": p.team, "preset": p.preset,
                      "lane": p.lane, "queue": p.queue, "gpu_class": p.gpu_class,
                      "node_selector": dict(p.node_selector) or None,
                      "disable_default_priorities": p.disable_default_priorities or None}
            doc["policy"] = {k: v for k, v in policy.items() if v is not None}
            if p.gpu_resource_mode:
                doc["compute"]["gpu_resource_mode"] = p.gpu_resource_mode
            workflow: dict[str, Any] = {}
            if self.extra_scripts:
                workflow["extra_scripts"] = list(self.extra_scripts)
            if upstream_checkpoint:
                workflow["upstream_checkpoint"] = upstream_checkpoint
            if workflow:
                doc["workflow"] = workflow
        if overrides:
            doc = deep_merge(doc, overrides)
        return doc

    # -- local execution ---------------------------------------------------------------------------
    def local_ctx(self, upstream_checkpoint: str | None = None) -> Ctx:
        from tau_core.backends.local import paths

        data, hot = paths.data_root(), paths.hot_root()
        out = data / "checkpoints" / "finetunes" / self.name
        for d in (data / "datasets", hot / "datasets", hot / "checkpoints", out):
            d.mkdir(parents=True, exist_ok=True)
        return Ctx(name=self.name, gpus=self.gpus, workers=self.workers, smoke_pairs=self.smoke_pairs,
                   manifest=self.base_manifest(), data_dir=str(data), hot_dir=str(hot),
                   datasets_dir=str(hot / "datasets"), checkpoints_dir=str(hot / "checkpoints"),
                   durable_datasets_dir=str(data / "datasets"), durable_checkpoints_dir=str(out),
                   upstream_checkpoint=upstream_checkpoint, resume_from=os.environ.get("TAU_RESUME_FROM") or None,
                   storage_hot_status="local", is_remote=False)

    def _callable(self) -> Callable[..., Any]:
        if self.fn is not None:
            return self.fn
        from tau._staging import load_function

        return load_function(Path(self.script or ""), self.function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function here, on this workstation, with a local ``Ctx`` (nothing is scheduled)."""
        upstream = kwargs.pop("upstream_checkpoint", None)
        fn = self._callable()
        call_args = list(args) if args else list(self.entrypoint_args)
        call_kwargs = kwargs if kwargs else dict(self.entrypoint_kwargs)
        if self.entrypoint_pass_ctx:
            return fn(self.local_ctx(upstream), *call_args, **call_kwargs)
        return fn(*call_args, **call_kwargs)

    # -- submission --------------------------------------------------------------------------------
    def submit(self, *, dry_run: str | None = None, context: str | None = None, namespace: str | None = None,
               upstream_checkpoint: str | None = None, capture: bool = False) -> SubmitOutcome:
        """Submit to the cluster through the tau CLI, in-process (``TAU_BINARY`` selects another CLI)."""
        from tau._submit import refuse_inside_job, submit_handle

        refuse_inside_job()

        return submit_handle(self, dry_run=dry_run, context=context, namespace=namespace,
                             upstream_checkpoint=upstream_checkpoint, capture=capture)


class TrainHandle(WorkloadHandle):
    kind = "rayjob"
    decorator = "@tau.train"

    def __init__(self, fn: Callable[..., Any] | None, *, checkpoint_artifact: str | None = None,
                 model_meta: dict[str, Any] | None = None, profiler: dict[str, Any] | None = None,
                 **kw: Any) -> None:
        super().__init__(fn, **kw)
        self.checkpoint_artifact = checkpoint_artifact
        self.model_meta = {k: v for k, v in (model_meta or {}).items() if v is not None}
        self.profiler = profiler

    def base_manifest(self) -> dict[str, Any]:
        compute: dict[str, Any] = {"gpus": self.gpus}
        if self.workers != 1:
            compute["workers"] = self.workers
        compute.update(self.resources.compute())
        doc: dict[str, Any] = {"schema_version": 1, "name": self.name, "workload_kind": "rayjob",
                               "compute": compute, "eval": {}, "runtime": self._runtime()}
        storage = self._storage()
        if storage:
            doc["storage"] = storage
        if self.model_meta:
            doc["model"] = dict(self.model_meta)
        if self.checkpoint_artifact:
            doc["artifacts"] = {"checkpoint": self.checkpoint_artifact}
        if self.profiler:
            doc["profiler"] = dict(self.profiler)
        return doc

    def upstream_path(self) -> str:
        """Where an eval finds this run's checkpoint in the pod."""
        artifact = self.checkpoint_artifact or ""
        return f"{UPSTREAM_ROOT}/{self.name}/artifacts/{artifact}".rstrip("/")


class EvalHandle(WorkloadHandle):
    kind = "rayjob-eval"
    decorator = "@tau.eval"

    def __init__(self, fn: Callable[..., Any] | None, *, after: str | None = None, cpu_workers: int = 1,
                 **kw: Any) -> None:
        super().__init__(fn, **kw)
        self.after = after
        self.cpu_workers = int(cpu_workers)

    def base_manifest(self) -> dict[str, Any]:
        compute: dict[str, Any] = {"gpus": self.gpus, **self.resources.compute()}
        ev: dict[str, Any] = {"cpu_workers": self.cpu_workers}
        if self.after:
            ev["upstream"] = self.after
        doc: dict[str, Any] = {"schema_version": 1, "name": self.name, "workload_kind": "rayjob-eval",
                               "compute": compute, "eval": ev, "runtime": self._runtime()}
        storage = self._storage()
        if storage:
            doc["storage"] = storage
        return doc

    def submit(self, *, dry_run: str | None = None, context: str | None = None, namespace: str | None = None,
               upstream_checkpoint: str | None = None, capture: bool = False) -> SubmitOutcome:
        if not upstream_checkpoint or not str(upstream_checkpoint).startswith("/"):
            raise TauSDKError("tau-py: @tau.eval .submit() requires upstream_checkpoint= (an absolute in-pod path "
                              "such as /data/checkpoints/finetunes/my-train/artifacts/<checkpoint_artifact>)")
        return super().submit(dry_run=dry_run, context=context, namespace=namespace,
                              upstream_checkpoint=upstream_checkpoint, capture=capture)
