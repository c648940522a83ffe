"""Resolution with visible sources: target + config + flags + environment + workspace + workload
profile -> a :class:`tau_core.rendering.RenderRequest` in which every value records its source.

Sources are one of :data:`SOURCES`.  Cluster-facing steps go through the plugin host's
resolvers (``host.resolve(kind, request)``, kinds ``project``, ``workspace-connection``,
``workspace-defaults``, ``workload-profile``), so a connected backend plugs in without changing
this module.  The built-in answers are offline: the repository's descriptor is read (never
activated), workspace defaults are unknown, and a workload profile comes only from
``policy.workload_profile_snapshot``.  With ``--dry-run=client`` unknown cluster values become
``<unresolved-...>`` placeholders and a warning says why; otherwise they are errors.

Resolver contracts (each receives a :class:`ResolveRequest`, returns ``None`` to pass):

* ``project`` -> a :class:`tau_core.config.targets.Target` (replaces target discovery);
* ``workspace-connection`` -> a mapping with any of ``workspace``, ``context``, ``namespace``,
  ``system_namespace``, ``descriptor``, ``kubeconfig`` (path of an isolated kubeconfig); it may
  activate credentials;
* ``workspace-defaults`` -> a mapping with any of ``namespace``, ``queue``, ``priority_tier``,
  ``service_account``, ``workload_identity``, ``output_root``, ``workspace_uid``, ``result_pvc``;
* ``workload-profile`` -> a :class:`tau_core.config.profiles.ProfileCatalog` (a ready revision;
  selection and its fail-closed rules stay here).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau_core.config.issues import ConfigIssue, ConfigValidationError
from tau_core.config.targets import Target, resolve_target
from tau_core.config.validate import ValidatedConfig, get_path, set_path, validate_document
from tau_core.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from tau_core.plugins import Host
    from tau_core.rendering import RenderRequest

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
    connection: Mapping[str, Any] | None = None
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


def read_descriptor(path: Path) -> dict[str, Any]:
    """The offline facts of a workspace connection descriptor (checked in full, never activated)."""
    from tau_core.workspace.descriptor import load_descriptor

    descriptor = load_descriptor(path)
    return {"workspace": descriptor.workspace, "context": descriptor.context_name,
            "system_namespace": descriptor.system_namespace, "descriptor": str(path),
            "access": descriptor.access_method, "local": descriptor.is_local}


def code_sha(start: Path) -> str | None:
    """``git rev-parse HEAD`` without a subprocess (see :func:`tau_core.gitrepo.head_sha`)."""
    from tau_core.gitrepo import head_sha

    return head_sha(start)


_SECRET_FLAGS = ("--token", "--password", "--secret", "--client-secret", "--key")


def redact_argv(argv: Sequence[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("<redacted>")
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        if name in _SECRET_FLAGS:
            if eq:
                out.append(f"{name}=<redacted>")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return out


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
    """Resolve a run for rendering and submission; see the module docstring."""
    from tau_core import rendering

    env = dict(os.environ if options.env is None else options.env)
    dry_run = None if options.dry_run in (None, "", "none") else options.dry_run
    if dry_run not in (None, "client", "server"):
        raise UsageError(f"--dry-run must be one of: client, server, none (got {options.dry_run!r})")
    h = _host(host)
    warnings: list[str] = []
    values: dict[str, Resolved] = {}

    base = ResolveRequest(kind="project", options=options)
    target = _ask(h, "project", base) or resolve_target(options.target, config=options.config,
                                                        project=options.project, cwd=options.cwd)
    validated = load_target_config(target)
    cfg = validated.normalized
    if cfg["workflow"]["file"]:
        raise ConfigError(f"{validated.document.display} delegates to a managed workflow manifest (workflow.file); "
                          "managed workflows are rendered by the Python SDK path, not by direct tau run",
                          hint="run it with tau python, or remove workflow.file to submit a direct config")
    snapshot = cfg["policy"]["workload_profile_snapshot"]
    # a local run places nothing through the workload profile, so a snapshot is no obstacle to --local
    if snapshot and dry_run != "client" and not options.local:
        raise ConfigError("policy.workload_profile_snapshot requires --dry-run=client; snapshots cannot be used for "
                          "server dry-run or apply",
                          hint="remove the snapshot to resolve the live workload profile, or add --dry-run=client")
    # -- kube context and workspace connection -------------------------------------------------
    connection: Mapping[str, Any] | None = None
    descriptor = target.connection_path()
    if options.context:
        values["context"] = Resolved(options.context, SOURCE_FLAG)
    elif env.get("TAU_CONTEXT"):
        values["context"] = Resolved(env["TAU_CONTEXT"], SOURCE_ENV)
    local = options.local
    offline_facts = read_descriptor(descriptor) if descriptor is not None and not options.local else None
    if offline_facts is not None and offline_facts.get("local") and "context" not in values:
        local = True  # a local workspace (access.method: local): the run executes on this machine
        connection = offline_facts
    offline_only = bool(snapshot) or local
    if not offline_only:
        connection = _ask(h, "workspace-connection", ResolveRequest("workspace-connection", options, target,
                                                                     validated, values=values))
    if connection is None and offline_facts is not None:
        connection = offline_facts
        if not offline_only and dry_run != "client":
            warnings.append(f"the workspace connection {descriptor} was read but not activated: no connected "
                            "resolver is installed")
    if connection and connection.get("context") and "context" not in values:
        values["context"] = Resolved(connection["context"], SOURCE_CONNECTION)
    kubeconfig = connection.get("kubeconfig") if connection else None

    # -- workspace ----------------------------------------------------------------------------
    if options.workspace:
        values["workspace"] = Resolved(options.workspace, SOURCE_FLAG)
    elif cfg["policy"]["workspace"]:
        values["workspace"] = Resolved(cfg["policy"]["workspace"], SOURCE_CONFIG)
    elif connection and connection.get("workspace"):
        values["workspace"] = Resolved(connection["workspace"], SOURCE_CONNECTION)
    elif target.project is not None and target.project.workspace:
        values["workspace"] = Resolved(target.project.workspace, SOURCE_CONNECTION)
    if (target.project is not None and target.project.workspace and cfg["policy"]["workspace"]
            and cfg["policy"]["workspace"] != target.project.workspace):
        raise ConfigError(f"run config policy.workspace {cfg['policy']['workspace']!r} conflicts with catalog "
                          f"connection workspace {target.project.workspace!r} for project {target.project.name!r}")
    workspace = values["workspace"].value if "workspace" in values else None
    if cfg["metrics"]["offload"]["enabled"] and not workspace and not local:
        message = ("metrics.offload.enabled requires a resolved TauWorkspace (the offloaded metrics are scoped to "
                   "it)")
        if dry_run == "client":
            warnings.append(message + "; pass --workspace or set policy.workspace before submitting")
        else:
            raise ConfigError(message, hint="pass --workspace, set policy.workspace, or connect the repository")

    defaults: Mapping[str, Any] = {}
    if workspace and not offline_only:
        answer = _ask(h, "workspace-defaults", ResolveRequest("workspace-defaults", options, target, validated,
                                                              connection, workspace, values=values))
        defaults = answer or {}

    # -- namespace ----------------------------------------------------------------------------
    ws_ns = defaults.get("namespace")
    if options.namespace:
        values["namespace"] = Resolved(options.namespace, SOURCE_FLAG)
    elif cfg["policy"]["namespace"]:
        values["namespace"] = Resolved(cfg["policy"]["namespace"], SOURCE_CONFIG)
    elif ws_ns:
        values["namespace"] = Resolved(ws_ns, SOURCE_WORKSPACE)
    elif connection and connection.get("namespace"):
        values["namespace"] = Resolved(connection["namespace"], SOURCE_CONNECTION)
    elif local:
        values["namespace"] = Resolved("local", SOURCE_DEFAULT)
    if ws_ns and "namespace" in values and values["namespace"].value != ws_ns:
        raise ConfigError(f"namespace {values['namespace'].value!r} conflicts with TauWorkspace {workspace!r} "
                          f"target namespace {ws_ns!r}", hint="drop the explicit namespace or pick another workspace")

    # -- workload profile ---------------------------------------------------------------------
    from tau_core.config import profiles as prof

    policy = cfg["policy"]
    ns_for_selection = values["namespace"].value if "namespace" in values else None
    selection = prof.SelectionRequest(policy["profile"], ns_for_selection, policy["team"] or env.get("TAU_TEAM"),
                                      policy["lane"])
    catalog: prof.ProfileCatalog | None = None
    if snapshot:
        base_dir = target.config_path.resolve().parent
        snap_path = Path(snapshot) if Path(snapshot).is_absolute() else base_dir / snapshot
        catalog = prof.load_snapshot(snap_path)
    elif not local:
        answer = _ask(h, "workload-profile", ResolveRequest("workload-profile", options, target, validated,
                                                            connection, workspace, selection, values))
        if answer is not None:
            if not isinstance(answer, prof.ProfileCatalog):
                raise ConfigError("the workload-profile resolver returned an unexpected value",
                                  hint="the resolver must return a tau_core.config.profiles.ProfileCatalog")
            catalog = answer
    profile: dict[str, Any] | None = None
    resolved_cfg = copy.deepcopy(cfg)
    sources = dict(validated.sources)
    if catalog is not None:
        profile = prof.select_profile(catalog, selection)
        explicit = {p: get_path(cfg, p) for p in validated.origins}
        conflicts = prof.profile_conflicts(profile, validated.engine, explicit)
        if conflicts:
            doc = validated.document
            issues = [doc.issue(validated.origins.get(p, ()), p, message,
                                "remove the value from the config; the workload profile decides it")
                      for p, message in conflicts]
            raise ConfigValidationError(issues)
        for path, value in prof.authoritative_values(profile, validated.engine).items():
            set_path(resolved_cfg, path, value)
            sources[path] = SOURCE_PROFILE
        values["workload_profile"] = Resolved(profile["name"], SOURCE_PROFILE)
    elif policy["profile"]:
        if dry_run == "client" or local:
            warnings.append(f"workload profile {policy['profile']!r} is not resolved offline; its queue, placement "
                            "and cardinality are applied at submit (set policy.workload_profile_snapshot to render "
                            "them offline)")
        else:
            raise ConfigError(f"no TauCluster workload profile was selected for rendering (policy.profile "
                              f"{policy['profile']!r} needs a connected cluster)",
                              hint="connect the repository's workspace, or use --dry-run=client with "
                              "policy.workload_profile_snapshot")
    if validated.engine == "job" and resolved_cfg["compute"]["gpus"] is None and not resolved_cfg["policy"]["shape"]:
        if dry_run == "client" or local:
            if not local:
                warnings.append("no GPU count is resolved (compute.gpus or a workload profile); rendering a CPU Job")
        else:
            raise ConfigError("the Job has no resolved GPU cardinality",
                              hint="select a ready TauCluster workload profile or set compute.gpus")

    # -- queue, priorities, service account, output ---------------------------------------------
    if cfg["policy"]["queue"]:
        values["queue"] = Resolved(cfg["policy"]["queue"], SOURCE_CONFIG)
    elif profile and profile.get("defaultLocalQueue"):
        values["queue"] = Resolved(profile["defaultLocalQueue"], SOURCE_PROFILE)
    elif defaults.get("queue"):
        values["queue"] = Resolved(defaults["queue"], SOURCE_WORKSPACE)
    elif local:
        values["queue"] = Resolved("local", SOURCE_DEFAULT)
    ws_queue = defaults.get("queue")
    if ws_queue and "queue" in values and values["queue"].source == SOURCE_CONFIG and values["queue"].value != ws_queue:
        raise ConfigError(f"queue {values['queue'].value!r} conflicts with TauWorkspace {workspace!r} LocalQueue "
                          f"{ws_queue!r}")
    if not resolved_cfg["policy"]["priority_tier"] and defaults.get("priority_tier"):
        tier = "default" if defaults["priority_tier"] == "normal" else defaults["priority_tier"]
        resolved_cfg["policy"]["priority_tier"] = tier
        sources["policy.priority_tier"] = SOURCE_WORKSPACE
    if options.service_account:
        values["service_account"] = Resolved(options.service_account, SOURCE_FLAG)
    elif defaults.get("service_account"):
        values["service_account"] = Resolved(defaults["service_account"], SOURCE_WORKSPACE)
    output_root = defaults.get("output_root")
    if output_root:
        values["output_root"] = Resolved(output_root, SOURCE_WORKSPACE)
        explicit_out = cfg["storage"]["output"]
        if explicit_out and not (explicit_out == output_root or explicit_out.startswith(output_root.rstrip("/") + "/")):
            doc = validated.document
            raise ConfigValidationError([doc.issue(validated.origins.get("storage.output", ()), "storage.output",
                                                   f"storage.output {explicit_out!r} is outside the workspace output "
                                                   f"root {output_root!r}", f"put it under {output_root}")])
    for key in ("workspace_uid", "result_pvc", "workload_identity"):
        if defaults.get(key) is not None:
            values[key] = Resolved(defaults[key], SOURCE_WORKSPACE)

    # -- unresolved cluster values --------------------------------------------------------------
    unresolved = [k for k in ("namespace", "queue") if k not in values]
    connected_repo = connection is not None or workspace is not None
    if connected_repo and "service_account" not in values and not local and dry_run == "client":
        unresolved.append("service_account")
    if connected_repo and workspace is None and not local:
        unresolved.append("workspace")
    placeholders = {"namespace": rendering.PLACEHOLDER_NAMESPACE, "queue": rendering.PLACEHOLDER_QUEUE,
                    "workspace": rendering.PLACEHOLDER_WORKSPACE,
                    "service_account": rendering.PLACEHOLDER_SERVICE_ACCOUNT}
    if unresolved:
        if dry_run == "client":
            for key in unresolved:
                values[key] = Resolved(placeholders[key], SOURCE_UNRESOLVED)
            names = [k.replace("_", " ") for k in unresolved]
            listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            shown = "shown as a placeholder" if len(names) == 1 else "shown as placeholders"
            warnings.append(f"client dry-run does not contact the cluster: {listed} {shown} and resolved at "
                            "submit; use --dry-run=server to see the real values")
        elif "namespace" in unresolved:
            raise ConfigError("no namespace resolved for this workload: connect a workspace (see `tau workspace "
                              "list`) or pass --namespace", hint="or set policy.namespace in the config")
        elif "queue" in unresolved:
            raise ConfigError("no Kueue LocalQueue resolved for this workload",
                              hint="set policy.queue, connect a workspace, or select a workload profile")

    # -- the render request ---------------------------------------------------------------------
    for path, source in validated.sources.items():
        sources.setdefault(path, source)
    context: dict[str, Any] = {k: v.value for k, v in values.items() if k not in ("workload_profile",)}
    for key, value in values.items():
        sources[f"context.{key}"] = value.source
    if profile is not None and catalog is not None:
        context["workload_profile"] = {**profile, "stamps": _stamps(profile, catalog)}
        context["profile_set_hash"] = catalog.set_hash
        context["tau_cluster_generation"] = catalog.generation
        context["workload_profile_source"] = catalog.source
        context["topology"] = profile.get("placement")
    else:
        context["workload_profile"] = None
    context["dry_run"] = dry_run
    context["redact_secrets"] = dry_run == "client"
    context["code_sha"] = code_sha(options.cwd or Path.cwd())
    context["tau_command"] = redact_argv(options.argv) if options.argv else None
    context["local"] = local
    if validated.document.extra.get("managed") is not None:
        if local:
            raise ConfigError(f"{validated.document.display} is a managed workflow manifest; the local backend "
                              "runs direct configs only",
                              hint="run the Python module on this machine with tau python submit MODULE --local")
        context["managed"] = validated.document.extra["managed"]
    context["config_dir"] = str(target.config_path.resolve().parent)
    if kubeconfig:
        context["kubeconfig"] = str(kubeconfig)
    submission_id = options.submission_id or ("" if dry_run else _token())
    request = rendering.RenderRequest(
        name=str(resolved_cfg["name"]),
        config=resolved_cfg,
        context=context,
        sources=sources,
        config_hash=validated.config_hash,
        submission_id=submission_id,
        config_dir=target.config_path.resolve().parent,
        env={k: v for k, v in env.items() if k.startswith(PASSED_ENV_PREFIXES)},
    )
    return Resolution(target, validated, request, values, warnings, offline=offline_only or dry_run == "client",
                      local=local)


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
