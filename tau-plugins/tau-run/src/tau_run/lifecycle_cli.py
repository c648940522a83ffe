"""The lifecycle verbs of ``tau run``: list, status, logs, get, cancel and resume.

Thin: each command turns flags into a :class:`tau_core.backends.targeting.LifecycleTarget`, gets its
backend from the registry (:func:`tau_core.lifecycle.backend_for`: a local run goes to the ``local``
backend, anything else to the target's) and calls one method of
:class:`tau_core.lifecycle.ExecutionBackend`.  Nothing here imports ``kubernetes_asyncio``; the backend
does, when a command actually talks to a cluster.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tau_core.cli_options import CONTEXT_SETTINGS, log_options, logs_options, print_logs
from tau_core.errors import TauError, UsageError, interrupted
from tau_core.output import emit, info, render_table

if TYPE_CHECKING:
    from tau_core.backends.targeting import LifecycleTarget
    from tau_core.lifecycle.base import ExecutionBackend, RunRef, RunStatus, RunSummary

F = TypeVar("F", bound=Callable[..., Any])


def lifecycle_options(fn: F) -> F:
    """``-n``, ``--workspace``, ``--context``, ``--system-namespace`` and ``--project``."""
    options = [
        click.option("-n", "--namespace", default=None,
                     help="Namespace containing the run workload (default: from the connected workspace)."),
        click.option("--workspace", default=None,
                     help="TauWorkspace whose namespace holds the run (it must be Ready)."),
        click.option("--context", default=None,
                     help="kubectl context (default: $TAU_CONTEXT or the repository's workspace connection; "
                          "an explicit context uses your kubeconfig instead of the connection)."),
        click.option("--system-namespace", default=None, envvar="TAU_SYSTEM_NAMESPACE",
                     help="Namespace containing TauGrid system objects (default: repository workspace "
                          "connection, $TAU_SYSTEM_NAMESPACE, or tau-system)."),
        click.option("--project", default=None, help="Project in tau.projects.yaml (monorepos)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _target(namespace: str | None, workspace: str | None, context: str | None, system_namespace: str | None,
            project: str | None = None) -> LifecycleTarget:
    from pathlib import Path

    from tau_core.backends.targeting import lifecycle_target

    cwd = Path.cwd()
    if project:
        from tau_core.config.targets import resolve_target

        try:
            target = resolve_target(None, project=project, cwd=cwd)
            cwd = target.config_path.parent
        except TauError:
            pass
    return lifecycle_target(context=context, namespace=namespace, workspace=workspace,
                            system_namespace=system_namespace, cwd=cwd)


def _backend(target: LifecycleTarget, **options: Any) -> ExecutionBackend:
    from tau_core.lifecycle.base import backend_for

    return backend_for(target, progress=info, **options)


def _dispatch(name: str, namespace: str | None, workspace: str | None, context: str | None,
              system_namespace: str | None, project: str | None) -> tuple[ExecutionBackend, RunRef]:
    """(backend, ref): a local run goes to the local backend, anything else to the cluster
    (the rules are :func:`tau_core.backends.local.dispatch.choose_local`'s)."""
    from tau_core.backends.local.dispatch import choose_local, cluster_twin_probe

    found = choose_local(name, cluster_named=bool(namespace or workspace or context),
                         cluster_twin=cluster_twin_probe(
                             name, lambda: _target(None, None, None, system_namespace, project)))
    if found is not None:
        return found
    target = _target(namespace, workspace, context, system_namespace, project)
    return _backend(target), target.ref(name)


# -- list ---------------------------------------------------------------------------------------

@click.command("list", context_settings=CONTEXT_SETTINGS)
@lifecycle_options
@click.option("--queue", default=None, help="Show only runs in this Kueue LocalQueue.")
@click.option("--include-external", is_flag=True, help="Also show Jobs/RayJobs not submitted by Tau.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="Output format.")
def list_(namespace: str | None, workspace: str | None, context: str | None, system_namespace: str | None,
          project: str | None, queue: str | None, include_external: bool, output: str) -> None:
    """List TauGrid-managed Jobs and RayJobs in a namespace, newest first.

    \b
    Examples:
      tau run list
      tau run list -n aurora --queue jobqueue
      tau run list --include-external -o json
    """
    from tau_core.backends.local.dispatch import local_runs

    local = [] if queue else local_runs()
    target = None
    try:
        target = _target(namespace, workspace, context, system_namespace, project)
        backend = _backend(target)
        rows = backend.list(namespace=target.namespace, queue=queue, include_external=include_external,
                            workspace=target.workspace)
    except TauError as exc:
        if not local:
            raise
        from tau_core.output import warning

        warning(f"cluster runs not listed: {exc.message}")
        rows = []
    ns = rows[0].ref.namespace if rows else ((target.namespace if target else None) or "")
    doc = [_list_row(r, "local") for r in local] + [_list_row(r, "external" if r.external else "tau") for r in rows]
    if output == "json":
        emit(doc, "json")
        return
    if not doc:
        click.echo(f"No jobs found in namespace \"{ns or 'resolved namespace'}\"")
        return
    show_source = include_external or bool(local)
    table_rows = [(d["name"], d["kind"], d["status"], _age(d["created"]), d["queue"] or "-")
                  + ((d["source"],) if show_source else ()) for d in doc]
    headers = ["name", "kind", "status", "age", "queue"] + (["source"] if show_source else [])
    click.echo(render_table(table_rows, headers))


def _list_row(summary: RunSummary, source: str) -> dict[str, Any]:
    """One ``tau run list`` row (a JSON object with ``-o json``)."""
    return {"name": summary.ref.name, "namespace": summary.ref.namespace, "kind": summary.kind,
            "status": summary.state, "queue": summary.queue, "created": summary.created, "source": source}


#: the attribute name the ``run`` group looks up for ``tau run list``
list = list_


def _age(created: str | None) -> str:
    from datetime import UTC, datetime

    from tau_core.status_tree import format_duration, parse_time

    when = parse_time(created)
    if when is None:
        return "-"
    return format_duration(max(0.0, (datetime.now(UTC) - when).total_seconds()))


# -- status -------------------------------------------------------------------------------------

FAILING_PHASES = ("RayCluster", "Image pull", "Init containers", "Container start", "Ready", "RayJob status")


def status_doc(st: RunStatus) -> dict[str, Any]:
    """The ``-o json`` document: the typed status tree, converted by cattrs."""
    from tau_core.status_tree import StatusTree

    return StatusTree.from_status(st).to_json()


def status_text(st: RunStatus, *, hints: bool = False) -> str:
    from tau_core.status_tree import render_tree

    where = st.ref.name if st.ref.backend == "local" else f"{st.ref.namespace}/{st.ref.name}"
    head = f"Run: {where} ({st.kind})"
    if st.attempt:
        head += f"  attempt {st.attempt}/{st.max_attempts}"
    lines = [head]
    meta = []
    if st.extra.queue:
        meta.append(f"Queue: {st.extra.queue}")
    if st.ref.workspace:
        meta.append(f"Workspace: {st.ref.workspace}")
    if meta:
        lines.append("  ".join(meta))
    lines.extend(render_tree(st.phases))
    if st.terminal:
        lines.append(f"Result: {'succeeded' if st.succeeded else 'failed'}"
                     + (f" ({st.failure.value})" if st.failure else ""))
        if st.failure and st.extra.evidence_checked:
            evidence = st.extra.failure_evidence or "none observed (the cluster recorded no cause)"
            lines.append(f"Evidence: {evidence}")
        pending = st.extra.retry_pending
        if pending:
            owner = "the Tau controller" if pending.owner == "controller" else "the submitting tau run"
            lines.append(f"Retry: attempt {pending.attempt}/{pending.max}, retrying in "
                         f"{pending.in_seconds:g}s (owned by {owner})")
    elif st.message:
        lines.append(st.message)
    if st.extra.run_profile:
        from tau_core.run_profile import render

        lines.extend(render(st.extra.run_profile))
    if hints and st.extra.diagnostic_commands:
        lines.append("Diagnostic commands (run them yourself; Tau does not proxy metrics or exec):")
        lines.extend(f"  {c}" for c in st.extra.diagnostic_commands)
    return "\n".join(lines)


def _startup_failed(st: RunStatus) -> bool:
    if st.terminal:
        return not st.succeeded
    return any(p.state == "warning" and p.name in FAILING_PHASES for p in st.phases)


def _startup_done(st: RunStatus) -> bool:
    return st.terminal or any(p.name == "Ready" and p.state == "done" for p in st.phases)


def _parse_interval(value: str) -> float:
    from tau_core.retry import parse_duration

    try:
        seconds = parse_duration(value, "--interval")
    except TauError as exc:
        raise UsageError(exc.message) from exc
    if seconds <= 0:
        raise UsageError("--interval must be greater than 0")
    return seconds


@click.command("status", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@lifecycle_options
@click.option("--watch", is_flag=True, help="Refresh until the run is ready, failed, interrupted, or --max-iterations.")
@click.option("--interval", default="2s", show_default=True, help="Minimum time between --watch frames.")
@click.option("--max-iterations", type=int, default=0, show_default=True,
              help="Stop --watch after N frames (0 = no limit).")
@click.option("--diagnostic-hints", is_flag=True, help="Print correctly scoped kubectl top/logs/exec commands.")
@click.option("--run-profile", is_flag=True, help="Add queue/runtime evidence (GPU telemetry when available).")
@click.option("-o", "--output", default="table", show_default=True, help="table or json.")
@click.option("--kusto-endpoint", default=None,
              help="ADX endpoint of the recorded run history (for a run whose objects are gone).")
@click.option("--kusto-database", default="Metrics", show_default=True, help="ADX database of TauExpRunLifecycle.")
@click.option("--kusto-cluster", default=None, help="Cluster value the lifecycle recorder writes (narrows the search).")
def status(name: str, namespace: str | None, workspace: str | None, context: str | None,
           system_namespace: str | None, project: str | None, watch: bool, interval: str, max_iterations: int,
           diagnostic_hints: bool, run_profile: bool, output: str, kusto_endpoint: str | None, kusto_database: str,
           kusto_cluster: str | None) -> None:
    """Show the run's lifecycle: the startup phase tree from submission to readiness.

    Read the phases top to bottom; the first one that is not done is the layer to investigate.

    \b
    Examples:
      tau run status train-7f2c
      tau run status train-7f2c --watch
      tau run status train-7f2c --diagnostic-hints
      tau run status train-7f2c -o json
      tau run status train-7f2c --kusto-endpoint https://adx.westeurope.kusto.windows.net

    For a run whose Job or RayJob is gone, --kusto-endpoint reads the lifecycle the recorder
    (tau run history record) kept: every attempt and its transitions.
    """
    from tau_core.backends.targeting import check_name

    if output not in ("table", "json"):
        raise UsageError("--output must be table or json")
    if watch and diagnostic_hints:
        raise UsageError("--watch and --diagnostic-hints cannot be combined")
    if watch and output == "json":
        raise UsageError("--watch cannot be combined with -o json; poll status for one JSON document per request")
    if diagnostic_hints and output == "json":
        raise UsageError("--diagnostic-hints cannot be combined with -o json; JSON already includes diagnostic "
                         "commands")
    if max_iterations < 0:
        raise UsageError("--max-iterations must be >= 0")
    seconds = _parse_interval(interval)
    check_name(name)
    backend, ref = _dispatch(name, namespace, workspace, context, system_namespace, project)
    if not watch:
        st = backend.status(ref, run_profile=run_profile)
        if not st.extra.exists and kusto_endpoint:
            _recorded(st.ref.name, st.ref.namespace or "", kusto_endpoint, kusto_database, kusto_cluster, output)
            return
        if output == "json":
            emit(status_doc(st), "json")
        else:
            click.echo(status_text(st, hints=diagnostic_hints))
        if not st.extra.exists:
            sys.exit(1)
        return
    _watch(backend, ref, seconds, max_iterations, run_profile)


def _recorded(name: str, namespace: str, endpoint: str, database: str, cluster: str | None, output: str) -> None:
    """A deleted run: its recorded lifecycle (exit 1 when nothing was recorded either)."""
    from tau_core.backends.kubernetes.history_logs import check_endpoint

    from .history_status import history_doc, history_text, recorded_run

    run = recorded_run(name, namespace, endpoint=check_endpoint(endpoint), database=database, cluster=cluster or "")
    if not run.attempts:
        raise TauError(f"no Job or RayJob named \"{name}\" in namespace {namespace}, and no recorded history in "
                       f"{run.where}", hint="check the name with `tau run list`")
    if output == "json":
        emit(history_doc(run), "json")
    else:
        click.echo(history_text(run))


def _watch(backend: ExecutionBackend, ref: RunRef, interval: float, max_iterations: int,
           run_profile: bool = False) -> None:
    from tau_core.output import is_tty

    tty = is_tty(sys.stdout)
    last: RunStatus | None = None
    where = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
    try:
        frames = 0
        for st in backend.watch_status(ref, interval=interval, run_profile=run_profile):
            frames += 1
            last = st
            where = st.ref.name if st.ref.backend == "local" else f"{st.ref.namespace}/{st.ref.name}"
            text = status_text(st)
            if tty:
                from tau_core.output import clear_screen

                clear_screen()
                click.echo(f"watching {where} every {interval:g}s\n" + text)
            else:
                if frames == 1:
                    click.echo(f"watching {where} every {interval:g}s")
                click.echo(text + "\n")
            if _startup_failed(st) or _startup_done(st) or (max_iterations and frames >= max_iterations):
                break
    except BaseException as exc:
        if not interrupted(exc):
            raise
        click.echo("", err=True)
        info(f"stopped watching; {where} keeps running (tau run status {ref.name})")
        sys.exit(130)
    if last is not None and _startup_failed(last):
        raise TauError(f"startup phase failed for {where}", hint=f"tau logs {ref.name}; tau run status {ref.name} "
                                                                   "--diagnostic-hints")
    if last is not None and not last.extra.exists:
        raise TauError(f"no Job or RayJob named \"{ref.name}\" in namespace {last.ref.namespace}",
                       hint="check the name with `tau run list`")


# -- logs ---------------------------------------------------------------------------------------

@click.command("logs", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@lifecycle_options
@logs_options
def logs(name: str, namespace: str | None, workspace: str | None, context: str | None,
         system_namespace: str | None, project: str | None, follow: bool, tail: int, container: str | None,
         all_containers: bool, previous: bool, timestamps: bool, prefix: bool) -> None:
    """Print a run's logs: the Ray driver's output for a RayJob, the pod logs for a batch Job.

    The compatibility path for `tau logs NAME` (without its search across configured workspaces).

    \b
    Examples:
      tau run logs train-7f2c
      tau run logs train-7f2c -f
      tau run logs train-7f2c --tail -1 --timestamps
      tau run logs train-7f2c -c init-data --previous --prefix
    """
    from tau_core.backends.targeting import check_name

    options = log_options(follow, tail, container, all_containers, previous, timestamps, prefix)
    check_name(name)
    backend, ref = _dispatch(name, namespace, workspace, context, system_namespace, project)
    print_logs(backend, ref, options)


# -- get ----------------------------------------------------------------------------------------

@click.command("get", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@lifecycle_options
@click.option("--artifact", default=None, help="A file or directory relative to the run's result directory.")
@click.option("--path", "path_", default=None,
              help="Absolute result path (deleted or external workloads; needs --pvc).")
@click.option("--pvc", default=None, help="PersistentVolumeClaim holding --path.")
@click.option("-o", "--output", type=click.Choice(["table", "json", "raw"]), default="table", show_default=True,
              help="Output format.")
def get(name: str, namespace: str | None, workspace: str | None, context: str | None, system_namespace: str | None,
        project: str | None, artifact: str | None, path_: str | None, pvc: str | None, output: str) -> None:
    """Fetch a run's durable results from its result volume.

    A short-lived helper pod mounts the result PVC read-only, reads the file or lists the directory,
    and is deleted afterwards.  Artifact paths never leave the result directory.

    \b
    Examples:
      tau run get train-7f2c
      tau run get train-7f2c --artifact metrics/final.json
      tau run get train-7f2c --artifact model.safetensors -o raw > model.safetensors
      tau run get old-job --path /data/old-job/results --pvc blob-training
    """
    from tau_core.backends.kubernetes import safe_relative
    from tau_core.backends.targeting import check_name
    from tau_core.lifecycle.base import ArtifactListing

    if artifact is not None:
        safe_relative(artifact)  # hostile paths are refused before anything is created
    check_name(name)
    backend, ref = _dispatch(name, namespace, workspace, context, system_namespace, project)
    result = backend.get(ref, artifact, path=path_, pvc=pvc)
    details = backend.last_get
    if isinstance(result, ArtifactListing):
        if output == "json":
            emit({"path": result.root, "entries": result.entries}, "json")
        elif output == "raw":
            for entry in result.entries:
                click.echo(entry["path"])
        else:
            click.echo(f"PATH: {result.root}")
            click.echo(f"PVC:  {details.get('pvc') or pvc or '-'}")
            click.echo("ENTRIES:")
            for entry in result.entries:
                click.echo(f"  {entry['path']}  ({entry.get('size')} bytes)")
            if not result.entries:
                click.echo("  (empty)")
                if details.get("checkpoint"):
                    click.echo(f"note: the run declares storage.checkpoint ({details['checkpoint']}); "
                               "checkpoints are indexed separately — see `tau data model list`")
        return
    data: bytes = result
    if output == "raw":
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    text = data.decode("utf-8", "replace")
    if output == "json":
        emit({"artifact": artifact, "size": len(data), "content": text}, "json")
        return
    click.echo(f"PATH: {details.get('path') or artifact}")
    click.echo(f"PVC:  {details.get('pvc') or pvc or '-'}")
    click.echo(text.rstrip("\n"))


# -- cancel -------------------------------------------------------------------------------------

@click.command("cancel", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@lifecycle_options
@click.option("--wait", type=click.BOOL, default=True, show_default=True, is_flag=False, flag_value=True,
              help="Wait until the workload's pods are gone (--wait=false returns at once).")
@click.option("--timeout", "timeout", default="30s", show_default=True,
              help="How long to wait for the Job/RayJob object (and Kueue's Workload) to be removed.")
@click.option("--teardown-timeout", default="12m", show_default=True,
              help="How long to wait for the run's pods (the RayCluster) to be gone.")
@click.option("--interval", default="2s", show_default=True, help="Poll interval while waiting.")
def cancel(name: str, namespace: str | None, workspace: str | None, context: str | None,
           system_namespace: str | None, project: str | None, wait: bool, timeout: str, teardown_timeout: str,
           interval: str) -> None:
    """Stop a run: delete its Job or RayJob and headless Service so Kueue frees the quota.

    By default it waits until the workload's pods are gone; on timeout it exits 1 and prints a
    command to remove what is left.

    \b
    Examples:
      tau run cancel train-7f2c
      tau run cancel train-7f2c --wait=false
      tau run cancel train-7f2c --teardown-timeout 2m
    """
    from tau_core.backends.targeting import check_name
    from tau_core.retry import parse_duration

    check_name(name)
    object_seconds = parse_duration(timeout, "--timeout")
    teardown_seconds = parse_duration(teardown_timeout, "--teardown-timeout")
    poll = _parse_interval(interval)
    from tau_core.backends.local.dispatch import local_run

    found = local_run(name)
    if found is not None:
        backend, ref = found
    else:
        target = _target(namespace, workspace, context, system_namespace, project)
        backend, ref = _backend(target, poll_interval=poll), target.ref(name)
    click.echo(backend.cancel(ref, wait=wait, timeout=teardown_seconds, object_timeout=object_seconds))


# -- resume -------------------------------------------------------------------------------------

@click.command("resume", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option("-c", "--config", "config", required=True, help="The direct run config the run was submitted from.")
@lifecycle_options
@click.option("--from", "from_dir", default=None,
              help="Absolute checkpoint directory (default: /data/checkpoints/finetunes/<name>).")
@click.option("--force", is_flag=True, help="Resume even after OOMKilled (change compute first).")
@click.option("--dry-run", "dry_run", default=None, is_flag=False, flag_value="client",
              type=click.Choice(["client", "server"]), help="Validate and print the replacement; change nothing.")
def resume(name: str, config: str, namespace: str | None, workspace: str | None, context: str | None,
           system_namespace: str | None, project: str | None, from_dir: str | None, force: bool,
           dry_run: str | None) -> None:
    """Manually restart a failed run from its checkpoint.

    The replacement is rendered and validated before the failed workload is deleted.  OOMKilled
    needs --force; an Unknown failure is never resumed.

    \b
    Examples:
      tau run resume train-7f2c --config tau/train.yaml
      tau run resume train-7f2c --config tau/train.yaml --from /data/checkpoints/train-7f2c/step-900
      tau run resume train-7f2c --config tau/train.yaml --dry-run
    """
    from tau_core.backends.targeting import check_name
    from tau_core.config.resolve import RunOptions, resolve_run
    from tau_core.lifecycle.base import SubmitRequest

    check_name(name)
    from tau_core.backends.local.dispatch import local_run

    found = local_run(name)
    if found is not None:
        local_backend, local_ref = found
        from tau_core.backends.local.registry import find_run

        run_dir = find_run(local_ref.name, exact=True)  # the config resolves under the run's target, not its id
        target_name = str((run_dir.read().get("name") if run_dir else None) or name)
        local_resolution = resolve_run(RunOptions(target=target_name, config=config, local=True, dry_run=None,
                                                  argv=["tau", "run", "resume", name, "--config", config]))
        lreq = local_resolution.request
        local_request = SubmitRequest(name=lreq.name, config=lreq.config, objects=[], context=lreq.context,
                                      config_path=local_resolution.target.config_path,
                                      config_hash=lreq.config_hash, submission_id=lreq.submission_id)
        result = local_backend.resume(local_ref, local_request, from_dir=from_dir, force=force,
                                      dry_run=bool(dry_run))
        if dry_run:
            import json

            emit(json.loads(result.message), "yaml")
            return
        click.echo(result.message)
        click.echo(f"Next: tau run status {local_ref.name} --watch")
        return
    target = _target(namespace, workspace, context, system_namespace, project)
    options = RunOptions(target=name, config=config, namespace=target.namespace, context=target.context,
                         workspace=workspace, dry_run=None, argv=["tau", "run", "resume", name, "--config", config])
    resolution = resolve_run(options)
    req = resolution.request
    from tau_core.rendering import render

    objects = render(req)  # validates the replacement before anything is deleted
    backend = _backend(target)
    request = SubmitRequest(name=req.name, config=req.config, objects=objects, context=req.context,
                            config_path=resolution.target.config_path, config_hash=req.config_hash,
                            submission_id=req.submission_id)
    result = backend.resume(target.ref(name), request, from_dir=from_dir, force=force, dry_run=bool(dry_run))
    if dry_run:
        import json

        emit(json.loads(result.message), "yaml")
        return
    click.echo(result.message)
    ns = result.ref.namespace or target.namespace
    click.echo(f"Next: tau run status {name}" + (f" -n {ns}" if ns else "") + " --watch")
