"""Resolution with visible sources: target + config + flags + environment + workspace + workload
profile -> a :class:`tau_core.rendering.RenderRequest` in which every value records its source.

Sources are one of :data:`SOURCES`.  Cluster-facing steps go through the plugin host's
resolvers (``host.resolve(kind, request)``, kinds ``project``, ``workspace-connection``,
``workspace-defaults``, ``workload-profile``), so a connected backend plugs in without changing
this module.  The built-in answers are offline: the repository's descriptor is read (never
activated), workspace defaults are unknown, and a workload profile comes only from
``policy.workload_profile_snapshot``.  With ``--dry-run=client`` unknown cluster values become
``<unresolved-...>`` placeholders and a warning says why; otherwise they are errors.

:func:`resolve_run` is a pipeline of named steps (:data:`STEPS`: config kind, connection, workspace,
namespace, workload profile, GPU cardinality, queue, workspace values, unresolved).  Each step
reads what earlier ones decided from a small state object and records every value it decides with
its source; ``Resolution.trail`` keeps (step, key, source) in order, and the render request's
``sources`` keep the source of every config path and ``context.<key>``.

Resolver contracts (each receives a :class:`ResolveRequest`, returns ``None`` to pass):

* ``project`` -> a :class:`tau_core.config.targets.Target` (replaces target discovery);
* ``workspace-connection`` -> a :class:`tau_core.config.workspace.WorkspaceConnection` (or a mapping
  with any of its keys: ``workspace``, ``context``, ``namespace``, ``system_namespace``, ``descriptor``,
  ``kubeconfig`` (path of an isolated kubeconfig), ...; converted at this edge); it may activate
  credentials. Later resolvers see it typed as ``request.connection``;
* ``workspace-defaults`` -> a mapping with any of ``namespace``, ``queue``, ``priority_tier``,
  ``service_account``, ``workload_identity``, ``output_root``, ``workspace_uid``, ``result_pvc``;
* ``workload-profile`` -> a :class:`tau_core.config.profiles.ProfileCatalog` (a ready revision;
  selection and its fail-closed rules stay here).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from tau_core.config.issues import ConfigIssue, ConfigValidationError
from tau_core.config.targets import Target, resolve_target
from tau_core.config.validate import ValidatedConfig, get_path, set_path, validate_document
from tau_core.config.workspace import WorkspaceConnection, WorkspaceDefaults
from tau_core.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from tau_core.config.profiles import ProfileCatalog
    from tau_core.plugins import Host
    from tau_core.rendering import RenderContext, RenderRequest

SOURCE_CONFIG = "config"
SOURCE_WORKSPACE = "workspace default"
SOURCE_PROFILE = "workload profile"
SOURCE_FLAG = "flag"
SOURCE_ENV = "env"
SOURCE_DEFAULT = "default"
SOURCE_CONNECTION = "workspace connection"
SOURCE_UNRESOLVED = "cluster (unresolved)"
SOURCES = (SOURCE_CONFIG, SOURCE_WORKSPACE, SOURCE_PROFILE, SOURCE_FLAG, SOURCE_ENV, SOURCE_DEFAULT,
           SOURCE_CONNECTION, SOURCE_UNRESOLVED)

DRY_RUN_MODES = ("client", "server", "none")
PASSED_ENV_PREFIXES = ("TAU_",)


@dataclass(frozen=True)
class Resolved:
    value: Any
    source: str


@dataclass
class RunOptions:
    """The command line of ``tau run`` (and of verbs that re-resolve a config, such as resume)."""

    target: str | None = None
    config: str | Path | None = None
    project: str | None = None
    namespace: str | None = None
    context: str | None = None
    workspace: str | None = None
    service_account: str | None = None
    dry_run: str | None = None  # client | server | None
    local: bool = False
    cwd: Path | None = None
    argv: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    submission_id: str | None = None


@dataclass
class ResolveRequest:
    """What a resolver sees."""

    kind: str
    options: RunOptions
    target: Target | None = None
    validated: ValidatedConfig | None = None
    connection: WorkspaceConnection | None = None
    workspace: str | None = None
    selection: Any = None
    values: Mapping[str, Resolved] = field(default_factory=dict)


@dataclass
class Resolution:
    target: Target
    validated: ValidatedConfig
    request: RenderRequest
    values: dict[str, Resolved]
    warnings: list[str]
    offline: bool
    local: bool = False
    trail: list[tuple[str, str, str]] = field(default_factory=list)
    """(step, key or config path, source) for every value a resolution step decided, in order."""

    @property
    def config_issues(self) -> list[ConfigIssue]:
        return self.validated.warnings


def _host(host: Host | None) -> Host:
    if host is not None:
        return host
    from tau_core.plugins import get_host

    return get_host()


def _ask(host: Host, kind: str, request: ResolveRequest) -> Any:
    try:
        return host.resolve(kind, request)
    except (ConfigError, UsageError):
        raise
    except Exception as exc:
        from tau_core.errors import TauError

        if isinstance(exc, TauError):
            raise
        raise ConfigError(f"{kind} resolver failed: {type(exc).__name__}: {exc}",
                          hint="check the installed plugins with tau version") from exc


def read_descriptor(path: Path) -> WorkspaceConnection:
    """The offline facts of a workspace connection descriptor (checked in full, never activated)."""
    from tau_core.workspace.descriptor import load_descriptor

    descriptor = load_descriptor(path)
    return WorkspaceConnection.from_mapping({
        "workspace": descriptor.workspace, "context": descriptor.context_name,
        "system_namespace": descriptor.system_namespace, "descriptor": str(path),
        "access": descriptor.access_method, "local": descriptor.is_local})


def code_sha(start: Path) -> str | None:
    """``git rev-parse HEAD`` without a subprocess (see :func:`tau_core.gitrepo.head_sha`)."""
    from tau_core.gitrepo import head_sha

    return head_sha(start)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """The argv with secret flag values redacted (:func:`tau_core.rendering.redact_argv`, the one rule)."""
    from tau_core.rendering import redact_argv as redact

    return redact(argv)


def load_target_config(target: Target) -> ValidatedConfig:
    from tau_core.config.loader import display_path, load_yaml_file

    doc = load_yaml_file(target.config_path, display=display_path(target.config_path))
    from tau_core.config.validate import is_managed_manifest

    if is_managed_manifest(doc.data):
        from tau_core.config.managed import validate_managed

        managed: ValidatedConfig = validate_managed(doc, name_override=target.name_override,
                                                    base_dir=target.config_path.resolve().parent)
        return managed
    return validate_document(doc, name_override=target.name_override,
                             base_dir=target.config_path.resolve().parent)


def resolve_offline(options: RunOptions, *, host: Host | None = None) -> Resolution:
    """Resolve for ``--dry-run=client``: nothing is submitted, unknown cluster values are placeholders."""
    opts = copy.copy(options)
    opts.dry_run = "client"
    return resolve_run(opts, host=host)


def resolve_run(options: RunOptions, *, host: Host | None = None) -> Resolution:
    """Resolve a run for rendering and submission: the named :data:`STEPS` in order (see the module docstring)."""
    state = _State.start(options, _host(host))
    for step in STEPS:
        state.step = step.__name__.lstrip("_")
        step(state)
    return _finish(state)


@attrs.define
class _State:
    """A resolution in progress; each step reads what earlier steps set and records its values' sources."""

    options: RunOptions
    host: Host
    env: dict[str, str]
    dry_run: str | None
    target: Target
    validated: ValidatedConfig
    values: dict[str, Resolved] = attrs.field(factory=dict)
    warnings: list[str] = attrs.field(factory=list)
    trail: list[tuple[str, str, str]] = attrs.field(factory=list)
    step: str = "target"
    local: bool = False
    offline_only: bool = False
    connection: WorkspaceConnection | None = None
    workspace: str | None = None
    defaults: WorkspaceDefaults = attrs.field(factory=WorkspaceDefaults)
    catalog: ProfileCatalog | None = None
    profile: dict[str, Any] | None = None
    resolved_cfg: dict[str, Any] = attrs.field(factory=dict)
    sources: dict[str, str] = attrs.field(factory=dict)

    @classmethod
    def start(cls, options: RunOptions, host: Host) -> _State:
        env = dict(os.environ if options.env is None else options.env)
        dry_run = None if options.dry_run in (None, "", "none") else options.dry_run
        if dry_run not in (None, "client", "server"):
            raise UsageError(f"--dry-run must be one of: client, server, none (got {options.dry_run!r})")
        target = _ask(host, "project", ResolveRequest(kind="project", options=options)) or resolve_target(
            options.target, config=options.config, project=options.project, cwd=options.cwd)
        validated = load_target_config(target)
        state = cls(options, host, env, dry_run, target, validated)
        state.resolved_cfg = copy.deepcopy(validated.normalized)
        state.sources = dict(validated.sources)
        return state

    @property
    def cfg(self) -> dict[str, Any]:
        """The normalized config as validated (before workload-profile values are applied)."""
        return self.validated.normalized

    @property
    def client(self) -> bool:
        return self.dry_run == "client"

    def set(self, key: str, value: Any, source: str) -> None:
        """Resolve ``key`` and record where it came from (and which step decided it)."""
        self.values[key] = Resolved(value, source)
        self.trail.append((self.step, key, source))

    def set_config(self, path: str, value: Any, source: str) -> None:
        """Override a config path (a workload profile's or workspace's authoritative value) with its source."""
        set_path(self.resolved_cfg, path, value)
        self.sources[path] = source
        self.trail.append((self.step, path, source))

    def get(self, key: str) -> Any:
        return self.values[key].value if key in self.values else None

    def ask(self, kind: str, **fields: Any) -> Any:
        request = ResolveRequest(kind, self.options, self.target, self.validated, values=self.values, **fields)
        return _ask(self.host, kind, request)


def _config_kind(s: _State) -> None:
    """A direct config only; a workload-profile snapshot only for client dry-runs (and local runs)."""
    cfg, options = s.cfg, s.options
    if cfg["workflow"]["file"]:
        raise ConfigError(f"{s.validated.document.display} delegates to a managed workflow manifest (workflow.file); "
                          "managed workflows are rendered by the Python SDK path, not by direct tau run",
                          hint="run it with tau python, or remove workflow.file to submit a direct config")
    # a local run places nothing through the workload profile, so a snapshot is no obstacle to --local
    if cfg["policy"]["workload_profile_snapshot"] and not s.client and not options.local:
        raise ConfigError("policy.workload_profile_snapshot requires --dry-run=client; snapshots cannot be used for "
                          "server dry-run or apply",
                          hint="remove the snapshot to resolve the live workload profile, or add --dry-run=client")


def _connection(s: _State) -> None:
    """Kube context (flag, env) and the workspace connection (descriptor, then the connected resolver)."""
    options = s.options
    descriptor = s.target.connection_path()
    if options.context:
        s.set("context", options.context, SOURCE_FLAG)
    elif s.env.get("TAU_CONTEXT"):
        s.set("context", s.env["TAU_CONTEXT"], SOURCE_ENV)
    s.local = options.local
    offline_facts = read_descriptor(descriptor) if descriptor is not None and not options.local else None
    if offline_facts is not None and offline_facts.local and "context" not in s.values:
        s.local = True  # a local workspace (access.method: local): the run executes on this machine
        s.connection = offline_facts
    s.offline_only = bool(s.cfg["policy"]["workload_profile_snapshot"]) or s.local
    if not s.offline_only:
        answer = s.ask("workspace-connection")
        s.connection = None if answer is None else WorkspaceConnection.from_mapping(answer)
    if s.connection is None and offline_facts is not None:
        s.connection = offline_facts
        if not s.offline_only and not s.client:
            s.warnings.append(f"the workspace connection {descriptor} was read but not activated: no connected "
                              "resolver is installed")
    if s.connection and s.connection.context and "context" not in s.values:
        s.set("context", s.connection.context, SOURCE_CONNECTION)


def _workspace(s: _State) -> None:
    """The TauWorkspace: flag, config, connection, then the project catalog's connection."""
    cfg, target, connection = s.cfg, s.target, s.connection
    project_ws = target.project.workspace if target.project is not None else None
    if s.options.workspace:
        s.set("workspace", s.options.workspace, SOURCE_FLAG)
    elif cfg["policy"]["workspace"]:
        s.set("workspace", cfg["policy"]["workspace"], SOURCE_CONFIG)
    elif connection and connection.workspace:
        s.set("workspace", connection.workspace, SOURCE_CONNECTION)
    elif project_ws:
        s.set("workspace", project_ws, SOURCE_CONNECTION)
    if project_ws and cfg["policy"]["workspace"] and cfg["policy"]["workspace"] != project_ws:
        raise ConfigError(f"run config policy.workspace {cfg['policy']['workspace']!r} conflicts with catalog "
                          f"connection workspace {project_ws!r} for project {target.project.name!r}")  # type: ignore[union-attr]
    s.workspace = s.get("workspace")
    if cfg["metrics"]["offload"]["enabled"] and not s.workspace and not s.local:
        message = ("metrics.offload.enabled requires a resolved TauWorkspace (the offloaded metrics are scoped to "
                   "it)")
        if not s.client:
            raise ConfigError(message, hint="pass --workspace, set policy.workspace, or connect the repository")
        s.warnings.append(message + "; pass --workspace or set policy.workspace before submitting")
    if s.workspace and not s.offline_only:
        answer = s.ask("workspace-defaults", connection=s.connection, workspace=s.workspace)
        s.defaults = WorkspaceDefaults.from_mapping(answer)


def _namespace(s: _State) -> None:
    """Flag, config, the workspace's target namespace, the connection, or ``local``; never two disagreeing."""
    ws_ns = s.defaults.namespace
    if s.options.namespace:
        s.set("namespace", s.options.namespace, SOURCE_FLAG)
    elif s.cfg["policy"]["namespace"]:
        s.set("namespace", s.cfg["policy"]["namespace"], SOURCE_CONFIG)
    elif ws_ns:
        s.set("namespace", ws_ns, SOURCE_WORKSPACE)
    elif s.connection and s.connection.namespace:
        s.set("namespace", s.connection.namespace, SOURCE_CONNECTION)
    elif s.local:
        s.set("namespace", "local", SOURCE_DEFAULT)
    if ws_ns and "namespace" in s.values and s.get("namespace") != ws_ns:
        raise ConfigError(f"namespace {s.get('namespace')!r} conflicts with TauWorkspace {s.workspace!r} "
                          f"target namespace {ws_ns!r}", hint="drop the explicit namespace or pick another workspace")


def _workload_profile(s: _State) -> None:
    """Select the TauCluster workload profile (a snapshot, or the resolver) and apply its authoritative values."""
    from tau_core.config import profiles as prof

    policy = s.cfg["policy"]
    selection = prof.SelectionRequest(policy["profile"], s.get("namespace"), policy["team"] or s.env.get("TAU_TEAM"),
                                      policy["lane"])
    snapshot = policy["workload_profile_snapshot"]
    if snapshot:
        base_dir = s.target.config_path.resolve().parent
        s.catalog = prof.load_snapshot(Path(snapshot) if Path(snapshot).is_absolute() else base_dir / snapshot)
    elif not s.local:
        answer = s.ask("workload-profile", connection=s.connection, workspace=s.workspace, selection=selection)
        if answer is not None and not isinstance(answer, prof.ProfileCatalog):
            raise ConfigError("the workload-profile resolver returned an unexpected value",
                              hint="the resolver must return a tau_core.config.profiles.ProfileCatalog")
        s.catalog = answer
    if s.catalog is not None:
        _apply_profile(s, prof.select_profile(s.catalog, selection))
    elif policy["profile"]:
        if not (s.client or s.local):
            raise ConfigError(f"no TauCluster workload profile was selected for rendering (policy.profile "
                              f"{policy['profile']!r} needs a connected cluster)",
                              hint="connect the repository's workspace, or use --dry-run=client with "
                              "policy.workload_profile_snapshot")
        s.warnings.append(f"workload profile {policy['profile']!r} is not resolved offline; its queue, placement "
                          "and cardinality are applied at submit (set policy.workload_profile_snapshot to render "
                          "them offline)")


def _apply_profile(s: _State, profile: dict[str, Any]) -> None:
    from tau_core.config import profiles as prof

    validated = s.validated
    explicit = {p: get_path(s.cfg, p) for p in validated.origins}
    conflicts = prof.profile_conflicts(profile, validated.engine, explicit)
    if conflicts:
        doc = validated.document
        raise ConfigValidationError([doc.issue(validated.origins.get(p, ()), p, message,
                                               "remove the value from the config; the workload profile decides it")
                                     for p, message in conflicts])
    for path, value in prof.authoritative_values(profile, validated.engine).items():
        s.set_config(path, value, SOURCE_PROFILE)
    s.profile = profile
    s.set("workload_profile", profile["name"], SOURCE_PROFILE)


def _gpu_cardinality(s: _State) -> None:
    """A Job needs a GPU count (``compute.gpus``, a profile or a shape); offline it renders a CPU Job."""
    cfg = s.resolved_cfg
    if s.validated.engine != "job" or cfg["compute"]["gpus"] is not None or cfg["policy"]["shape"]:
        return
    if not (s.client or s.local):
        raise ConfigError("the Job has no resolved GPU cardinality",
                          hint="select a ready TauCluster workload profile or set compute.gpus")
    if not s.local:
        s.warnings.append("no GPU count is resolved (compute.gpus or a workload profile); rendering a CPU Job")


def _queue(s: _State) -> None:
    """Config, the profile's default LocalQueue, the workspace's, or ``local``; config may not contradict it."""
    ws_queue = s.defaults.queue
    if s.cfg["policy"]["queue"]:
        s.set("queue", s.cfg["policy"]["queue"], SOURCE_CONFIG)
    elif s.profile and s.profile.get("defaultLocalQueue"):
        s.set("queue", s.profile["defaultLocalQueue"], SOURCE_PROFILE)
    elif ws_queue:
        s.set("queue", ws_queue, SOURCE_WORKSPACE)
    elif s.local:
        s.set("queue", "local", SOURCE_DEFAULT)
    queue = s.values.get("queue")
    if ws_queue and queue is not None and queue.source == SOURCE_CONFIG and queue.value != ws_queue:
        raise ConfigError(f"queue {queue.value!r} conflicts with TauWorkspace {s.workspace!r} LocalQueue "
                          f"{ws_queue!r}")


def _workspace_values(s: _State) -> None:
    """Priority tier, service account, output root, uid, result PVC and workload identity from the workspace."""
    defaults = s.defaults
    if not s.resolved_cfg["policy"]["priority_tier"] and defaults.priority_tier:
        tier = "default" if defaults.priority_tier == "normal" else defaults.priority_tier
        s.set_config("policy.priority_tier", tier, SOURCE_WORKSPACE)
    if s.options.service_account:
        s.set("service_account", s.options.service_account, SOURCE_FLAG)
    elif defaults.service_account:
        s.set("service_account", defaults.service_account, SOURCE_WORKSPACE)
    output_root = defaults.output_root
    if output_root:
        s.set("output_root", output_root, SOURCE_WORKSPACE)
        explicit_out = s.cfg["storage"]["output"]
        if explicit_out and not (explicit_out == output_root or explicit_out.startswith(output_root.rstrip("/") + "/")):
            validated = s.validated
            raise ConfigValidationError([validated.document.issue(
                validated.origins.get("storage.output", ()), "storage.output",
                f"storage.output {explicit_out!r} is outside the workspace output root {output_root!r}",
                f"put it under {output_root}")])
    for key in ("workspace_uid", "result_pvc", "workload_identity"):
        if getattr(defaults, key) is not None:
            s.set(key, getattr(defaults, key), SOURCE_WORKSPACE)


def _unresolved(s: _State) -> None:
    """Cluster values nobody answered: placeholders (and a warning) in a client dry-run, else an error."""
    unresolved = [k for k in ("namespace", "queue") if k not in s.values]
    connected_repo = s.connection is not None or s.workspace is not None
    if connected_repo and "service_account" not in s.values and not s.local and s.client:
        unresolved.append("service_account")
    if connected_repo and s.workspace is None and not s.local:
        unresolved.append("workspace")
    if not unresolved:
        return
    if s.client:
        from tau_core.rendering import constants as rc

        placeholders = {"namespace": rc.PLACEHOLDER_NAMESPACE, "queue": rc.PLACEHOLDER_QUEUE,
                        "workspace": rc.PLACEHOLDER_WORKSPACE, "service_account": rc.PLACEHOLDER_SERVICE_ACCOUNT}
        for key in unresolved:
            s.set(key, placeholders[key], SOURCE_UNRESOLVED)
        names = [k.replace("_", " ") for k in unresolved]
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        shown = "shown as a placeholder" if len(names) == 1 else "shown as placeholders"
        s.warnings.append(f"client dry-run does not contact the cluster: {listed} {shown} and resolved at "
                          "submit; use --dry-run=server to see the real values")
    elif "namespace" in unresolved:
        raise ConfigError("no namespace resolved for this workload: connect a workspace (see `tau workspace "
                          "list`) or pass --namespace", hint="or set policy.namespace in the config")
    elif "queue" in unresolved:
        raise ConfigError("no Kueue LocalQueue resolved for this workload",
                          hint="set policy.queue, connect a workspace, or select a workload profile")


#: The resolution pipeline, in order; each step's name is recorded next to the values it decides.
STEPS: tuple[Callable[[_State], None], ...] = (_config_kind, _connection, _workspace, _namespace, _workload_profile,
                                               _gpu_cardinality, _queue, _workspace_values, _unresolved)


def _context(s: _State) -> RenderContext:
    """The typed render context: every resolved value, the profile stamps and the invocation facts."""
    from tau_core.rendering import RenderContext

    fields: dict[str, Any] = {k: v.value for k, v in s.values.items() if k != "workload_profile"}
    if s.profile is not None and s.catalog is not None:
        fields.update(workload_profile={**s.profile, "stamps": _stamps(s.profile, s.catalog)},
                      profile_set_hash=s.catalog.set_hash, tau_cluster_generation=s.catalog.generation,
                      workload_profile_source=s.catalog.source, topology=s.profile.get("placement"))
    managed = s.validated.document.extra.get("managed")
    if managed is not None and s.local:
        raise ConfigError(f"{s.validated.document.display} is a managed workflow manifest; the local backend "
                          "runs direct configs only",
                          hint="run the Python module on this machine with tau python submit MODULE --local")
    kubeconfig = s.connection.kubeconfig if s.connection else None
    fields.update(dry_run=s.dry_run, redact_secrets=s.client, code_sha=code_sha(s.options.cwd or Path.cwd()),
                  tau_command=redact_argv(s.options.argv) if s.options.argv else None, local=s.local,
                  managed=managed, config_dir=str(s.target.config_path.resolve().parent),
                  kubeconfig=str(kubeconfig) if kubeconfig else None)
    return RenderContext.from_mapping(fields)


def _finish(s: _State) -> Resolution:
    from tau_core.rendering import RenderRequest

    validated, options = s.validated, s.options
    for path, source in validated.sources.items():
        s.sources.setdefault(path, source)
    for key, value in s.values.items():
        s.sources[f"context.{key}"] = value.source
    request = RenderRequest(
        name=str(s.resolved_cfg["name"]),
        config=s.resolved_cfg,
        context=_context(s),
        sources=s.sources,
        config_hash=validated.config_hash,
        submission_id=options.submission_id or ("" if s.dry_run else _token()),
        config_dir=s.target.config_path.resolve().parent,
        env={k: v for k, v in s.env.items() if k.startswith(PASSED_ENV_PREFIXES)},
    )
    return Resolution(s.target, validated, request, s.values, s.warnings, offline=s.offline_only or s.client,
                      local=s.local, trail=s.trail)


def _stamps(profile: Mapping[str, Any], catalog: Any) -> dict[str, str]:
    from tau_core import keys

    return {
        keys.WORKLOAD_PROFILE: str(profile.get("name")),
        keys.WORKLOAD_PROFILE_SET_HASH: str(catalog.set_hash),
        keys.TAU_CLUSTER_GENERATION: str(catalog.generation),
    }


def _token() -> str:
    import secrets  # submissions only: a dry run has no submission id

    return secrets.token_hex(12)
