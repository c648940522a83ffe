"""The whole TauGrid plugin API, in one file.

Every hook hands the plugin a ``register`` callback instead of asking for a return value
(the model is simonw/llm), so one plugin can contribute many items and the host knows
which distribution contributed each one.  The callback always has the shape::

    register(name, target, **meta)

``target`` is either the object itself or a ``"package.module:attribute"`` string.  A
string is imported only when the entry is used, which keeps ``tau --help`` free of heavy
imports: plugin modules should register strings and keep their own imports light.

``meta`` may carry ``priority`` (an int, default 0).  When two plugins register the same
name in one family the higher priority wins; equal priorities are an error that names both
distributions.  Built-in implementations register through exactly these hooks.

Each hook is called once per plugin when its family is first needed.
"""

from __future__ import annotations

from typing import Any, Protocol

import pluggy

PROJECT_NAME = "tau"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


class Register(Protocol):
    """The callback handed to every ``tau_register_*`` hook."""

    def __call__(self, name: str, target: Any, **meta: Any) -> None: ...


@hookspec
def tau_register_roots(register: Register) -> None:
    """Register command roots of the ``tau`` CLI.

    Call ``register(name, "pkg.cli:command", help="one line")`` once per root.  ``help`` is
    shown by ``tau --help`` without importing ``target``; ``target`` must resolve to a
    :class:`click.Command` and is imported only when the root is invoked.  Root names are
    unique across all installed distributions.
    """


@hookspec
def tau_register_resolvers(register: Register) -> None:
    """Register resolvers for one step of config resolution.

    ``register(name, resolver, kind=KIND, priority=N)``; ``kind`` is one of
    :data:`tau_core.plugins.RESOLVER_KINDS` (``project``, ``workspace-connection``,
    ``workspace-defaults``, ``workload-profile``, ``reference``).  A resolver is a callable
    ``resolver(request) -> result | None``; resolvers of a kind are consulted from the highest
    priority down and the first non-``None`` answer wins.
    """


@hookspec
def tau_register_renderers(register: Register) -> None:
    """Register a renderer for one Kubernetes workload kind.

    ``register(kind, renderer)`` where ``kind`` is one of ``Job``, ``RayJob``, ``RayService``
    or ``Deployment`` (:data:`tau_core.plugins.RENDER_KINDS`).  A renderer is a callable
    ``renderer(request: tau_core.rendering.RenderRequest) -> list[dict]`` returning the
    Kubernetes objects to submit, the workload first.  Renderers never talk to a cluster.
    (tau-serve's ``RayService``/``Deployment`` renderers take its ``ServeRenderRequest``: the serve
    intent plus the same typed :class:`~tau_core.rendering.RenderContext`.)
    """


@hookspec
def tau_register_storage_backends(register: Register) -> None:
    """Register a storage backend for artifacts, checkpoints, registries or experiment stores.

    ``register(name, factory)``; ``factory(**options)`` returns an object that stores and
    reads bytes under keys relative to its root and never lets a key escape that root.
    """


@hookspec
def tau_register_telemetry_sinks(register: Register) -> None:
    """Register a telemetry sink that receives run metrics, run records and status changes.

    ``register(name, factory)``; ``factory(**options)`` returns a
    :class:`tau_core.telemetry.TelemetrySink`:

    * ``write(records)`` (required): a list of :class:`tau_core.telemetry.ScalarRecord` in the
      ``tau.metrics.scalar.v2`` layout (third-party writers may pass dicts of the same fields);
      a run's last record is the terminal ``tau/run_status`` marker (``tau_core.telemetry``).
      Sinks must be idempotent for repeated records.
    * ``close()`` (required).
    * ``register_run(run)``: record a :class:`~tau_core.telemetry.RunRegistration` (identity,
      owner, config, output URI, tags) before its first metric; idempotent by
      ``run.idempotency_key``.
    * ``update_status(update)``: apply a :class:`~tau_core.telemetry.RunStatusUpdate`; a run in a
      final state keeps it.
    * ``render_evidence(run_id, out)``: write the run's self-contained evidence (Stellar) page to
      ``out`` atomically and return its path.

    The last three are optional (a metrics-only sink omits them); the local backend records whole
    runs through them, in-process.
    """


@hookspec
def tau_register_gpu_class_rules(register: Register) -> None:
    """Register GPU-class rules: how VM sizes and legacy names map to canonical GPU classes.

    ``register(name, table)``; ``table`` is a rule table in the TauCluster
    ``spec.nodes.labelRules`` shape (a list of ``{"match": {"vmSizes": [...]}, "labels": {...}}``),
    read by the CLI (``policy.gpu_class`` normalisation) and the controller (node labels), and
    checked for conflicts with every other table (``tau_core.gpu_catalog.find_conflicts``).
    ``table`` may also be a callable ``rule(value) -> str | None`` that returns the canonical GPU
    class for a VM size or alias, or ``None``.  Tables and rules are consulted from the highest
    priority down; the built-in catalog is registered as ``builtin`` at priority -100.
    """


@hookspec
def tau_register_execution_backends(register: Register) -> None:
    """Register an execution backend (for example ``kubernetes`` or ``local``).

    ``register(name, factory)``; ``factory(**options)`` returns a
    :class:`tau_core.lifecycle.ExecutionBackend`, exactly what the lifecycle commands call:

    * ``submit(request) -> SubmitResult`` (``tau run``; automatic retry is the backend's business);
    * ``status(ref, *, run_profile=False) -> RunStatus`` and
      ``watch_status(ref, *, interval, max_iterations, run_profile) -> Iterator[RunStatus]``;
    * ``list(*, namespace, queue, include_external, workspace) -> list[RunSummary]``;
    * ``logs(ref, options) -> Iterator[str]``;
    * ``get(ref, artifact=None, *, path=None, pvc=None) -> ArtifactListing | bytes`` and the
      ``last_get`` mapping (what the last get read);
    * ``cancel(ref, *, wait, timeout, object_timeout) -> str`` (the line the command prints);
    * ``resume(ref, request, *, from_dir, force, dry_run) -> SubmitResult``;
    * a ``name`` attribute.

    ``options`` are the target's (``kubeconfig``, ``context``, ``system_namespace``) plus what a
    command adds (``progress``, ``poll_interval``); accept and ignore the ones you do not use.
    Every command gets its backend through :func:`tau_core.lifecycle.backend_for`; registering
    a name that exists with a higher ``priority`` replaces the built-in backend for every verb.
    """


@hookspec
def tau_register_history_sources(register: Register) -> None:
    """Register a durable run-history source: what a run left behind once its Kubernetes objects are gone.

    ``register(name, factory)``; ``factory(**options)`` returns a
    :class:`tau_core.history.HistorySource`:

    * ``run_history(query: RunQuery) -> list[LifecycleRow]``: the run's recorded lifecycle rows
      (``TauExpRunLifecycle``), deduplicated at query time, oldest first;
    * ``metric_points(flt: tau_core.kql.MetricsFilter) -> list[MetricPoint]``: deduplicated metric points;
    * ``container_logs(query: LogQuery) -> list[LogLine]``: container log lines the platform kept (adx-mon's
      ``Logs.ContainerLogs``), oldest first, at most ``query.tail``;
    * ``close()``.

    Readers (``tau logs``, ``tau run status``, Stellar, the Portal) pick a source by name with
    :func:`tau_core.history.history_source`; tau-kusto registers ``kusto`` (options ``endpoint``,
    ``database``, ``logs_database``, ``credential``).
    """


@hookspec
def tau_register_fleet_sources(register: Register) -> None:
    """Register a fleet telemetry source: the GPU, node and cost samples the platform keeps (adx-mon → Kusto).

    ``register(name, factory)``; ``factory(**options)`` returns a :class:`tau_core.fleet.FleetSource`:

    * ``gpu_health(query: FleetQuery) -> list[GpuSample]``: the latest sample per GPU and metric (``GpuHealth()``);
    * ``node_health(query) -> list[NodeSample]``: the window's CPU-idle and memory samples (``NodeHealth()``);
    * ``gpu_cost(query) -> list[GpuCost]``: GPU-hours and estimated cost per workspace (``GpuCostHourly``);
    * ``gpu_utilisation(query) -> list[GpuUtilisation]``: mean utilisation per GPU over the window;
    * ``close()``.

    The Portal's Cluster Health, Node utilisation and Cost boards pick a source by name with
    :func:`tau_core.fleet.fleet_source`; tau-kusto registers ``kusto`` (options ``endpoint``, ``database``,
    ``cost_database``, ``credential``).
    """
