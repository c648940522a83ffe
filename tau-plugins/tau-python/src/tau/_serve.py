"""``tau.serve(...)``: a serving deployment of a checkpoint, deployed with ``tau serve deploy``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tau._errors import TauCLIError, TauSDKError
from tau._secrets import SecretRef, SecretSource
from tau._workflow import TrainHandle

if TYPE_CHECKING:
    from tau._submit import SubmitOutcome

KINDS = ("rayservice", "deployment")
SOURCES = ("from_finetune", "checkpoint_ref", "from_model", "model_ref", "checkpoint")


@dataclass
class ServeHandle:
    """A serving deployment; ``.submit()``/``.deploy()`` run ``tau serve deploy`` with :meth:`deploy_args`."""

    name: str
    profile: str
    kind: str = "rayservice"
    source: tuple[str, str] | None = None
    checkpoint_pvc: str = "blob-training"
    namespace: str | None = None
    image: str | None = None
    replicas: int | None = None
    import_path: str | None = None
    env: dict[str, Any] = field(default_factory=dict)
    runtime_pip: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    profiles_dir: str | None = None
    port: int | None = None
    volumes: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)

    def spec(self) -> dict[str, Any]:
        """The deployment request as data (what the golden files record; secrets shown as references)."""
        env: dict[str, str] = {}
        for key, value in sorted(self.env.items()):
            if isinstance(value, SecretRef):
                env[key] = f"secret:{value.name}:{value.key}"
            elif isinstance(value, SecretSource):
                env[key] = "<secret>"
            else:
                env[key] = str(value)
        doc: dict[str, Any] = {"kind": "TauServe", "name": self.name, "profile": self.profile,
                               "workload_kind": self.kind, "checkpoint_pvc": self.checkpoint_pvc}
        if self.source:
            doc["source"] = {self.source[0]: self.source[1]}
        optional = {"namespace": self.namespace, "image": self.image, "replicas": self.replicas,
                    "import_path": self.import_path, "port": self.port, "profiles_dir": self.profiles_dir,
                    "env": env or None, "runtime_pip": self.runtime_pip or None, "args": self.args or None,
                    "volumes": self.volumes or None, "mounts": self.mounts or None}
        doc.update({k: v for k, v in optional.items() if v is not None})
        return doc

    def deploy_args(self, *, dry_run: str | None = None, context: str | None = None,
                    namespace: str | None = None, workload_profile_snapshot: str | None = None) -> list[str]:
        """The ``tau serve deploy`` command line of this handle (what :meth:`submit` runs)."""
        argv = ["serve", "deploy", self.name, "--kind", self.kind, "--profile", self.profile]
        if self.source:
            argv += [f"--{self.source[0].replace('_', '-')}", self.source[1]]
        argv += ["--checkpoint-pvc", self.checkpoint_pvc]
        for flag, value in (("--image", self.image), ("--replicas", self.replicas),
                            ("--import-path", self.import_path), ("--port", self.port),
                            ("--profiles-dir", self.profiles_dir)):
            if value is not None:
                argv += [flag, str(value)]
        for v in self.volumes:
            argv += ["--volume", v]
        for m in self.mounts:
            argv += ["--mount", m]
        argv += self._env_args()
        for pkg in self.runtime_pip:
            argv += ["--runtime-pip", pkg]
        for a in self.args:  # literal words: never whitespace-split again
            argv += ["--arg", a]
        ns = namespace or self.namespace
        if ns:
            argv += ["-n", ns]
        if dry_run:
            argv.append(f"--dry-run={dry_run}")
        if context:
            argv += ["--context", context]
        if workload_profile_snapshot:
            argv += ["--workload-profile-snapshot", workload_profile_snapshot]
        return argv

    def _env_args(self) -> list[str]:
        argv: list[str] = []
        for key, value in sorted(self.env.items()):
            if isinstance(value, SecretRef):
                argv += ["--env-secret", f"{key}={value.name}:{value.key}"]
            elif isinstance(value, SecretSource):
                raise TauSDKError(f"tau-py: tau.serve env[{key!r}]: use tau.secret_ref(name, key) for serving; "
                                  "inline secret values are for train/eval workloads")
            else:
                argv += ["--env", f"{key}={value}"]
        return argv

    def submit(self, *, dry_run: str | None = None, context: str | None = None, namespace: str | None = None,
               capture: bool = False, workload_profile_snapshot: str | None = None) -> SubmitOutcome:
        """Deploy with ``tau serve deploy``, in-process through the ``serve`` command root that tau-serve
        registers in tau_core's root registry (``TAU_BINARY`` selects another environment's CLI).

        ``dry_run``: ``"client"`` prints the rendered objects (secret references redacted), ``"server"``
        validates them on the API server.  ``namespace`` overrides the handle's.  An offline client
        dry-run reads the profiles from ``workload_profile_snapshot`` (``tau cluster profiles export``).
        Returns a :class:`tau._submit.SubmitOutcome`; a failing CLI raises :class:`TauCLIError` with its
        exit code (2 for a usage error).
        """
        from tau._submit import SubmitOutcome, cli_reason, refuse_inside_job, require_root, run_tau

        refuse_inside_job()
        if dry_run not in (None, "client", "server"):
            raise TauSDKError(f"tau-py: dry_run must be 'client' or 'server' (got {dry_run!r})")
        argv = self.deploy_args(dry_run=dry_run, context=context, namespace=namespace,
                                workload_profile_snapshot=workload_profile_snapshot)
        require_root("serve", "tau-serve")
        code, out, err = run_tau(argv, capture=capture, stamp_argv=True)
        if code != 0:
            raise TauCLIError(f"tau-py: tau serve deploy failed for {self.name!r} (exit={code})" + cli_reason(err),
                              code)
        return SubmitOutcome(code, out, err, self.name)

    deploy = submit


def serve(name: str, profile: str, *, from_finetune: TrainHandle | str | None = None,
          checkpoint_ref: str | None = None, from_model: str | None = None, model_ref: str | None = None,
          checkpoint: str | None = None, checkpoint_pvc: str = "blob-training", namespace: str | None = None,
          kind: str = "rayservice", image: str | None = None, replicas: int | None = None,
          import_path: str | None = None, env: Mapping[str, Any] | None = None,
          runtime_pip: Sequence[str] | None = None, args: Sequence[str] | None = None,
          profiles_dir: str | None = None, port: int | None = None, volumes: Sequence[str] | None = None,
          mounts: Sequence[str] | None = None) -> ServeHandle:
    """Describe a serving deployment of a checkpoint (at most one checkpoint source)."""
    if not name or not profile:
        raise TauSDKError("tau-py: tau.serve requires name= and profile=")
    if kind not in KINDS:
        raise TauSDKError(f"tau-py: tau.serve kind must be one of {', '.join(KINDS)} (got {kind!r})")
    if runtime_pip and kind != "rayservice":
        raise TauSDKError("tau-py: tau.serve runtime_pip applies to kind='rayservice' only")
    if profiles_dir is not None:
        raise TauSDKError("tau-py: tau.serve profiles_dir is not supported: serving profiles come from the "
                          "TauCluster's published set; for an offline client dry-run pass "
                          ".submit(dry_run='client', workload_profile_snapshot=FILE) (tau cluster profiles export)")
    if args and kind != "deployment":
        raise TauSDKError("tau-py: tau.serve args applies to kind='deployment' only; a RayService runs import_path")
    finetune = from_finetune.name if isinstance(from_finetune, TrainHandle) else from_finetune
    given = [(k, v) for k, v in zip(SOURCES, (finetune, checkpoint_ref, from_model, model_ref, checkpoint),
                                    strict=True) if v]
    if len(given) > 1:
        raise TauSDKError("tau-py: tau.serve takes at most one checkpoint source (" + ", ".join(SOURCES) + "); got "
                          + ", ".join(k for k, _ in given))
    return ServeHandle(name=name, profile=profile, kind=kind, source=given[0] if given else None,
                       checkpoint_pvc=checkpoint_pvc, namespace=namespace, image=image, replicas=replicas,
                       import_path=import_path, env=dict(env or {}), runtime_pip=list(runtime_pip or []),
                       args=list(args or []), profiles_dir=profiles_dir, port=port, volumes=list(volumes or []),
                       mounts=list(mounts or []))
