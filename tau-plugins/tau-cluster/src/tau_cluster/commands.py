"""The bodies of the ``tau cluster`` commands: options in, Helm and the Kubernetes API, text or JSON out."""

from __future__ import annotations

from typing import Any

import click

from tau_cluster import install as inst
from tau_cluster import uninstall as uninst
from tau_cluster.helm import Helm
from tau_cluster.options import InstallOptions, UninstallOptions, parse_duration, require
from tau_cluster.plan import plan_document, plan_text, summary_text
from tau_cluster.waiting import release_values, wait_ready
from tau_core.errors import TauError, UsageError
from tau_core.kube import KubeSession, run
from tau_core.output import to_json


async def _session(context: str | None) -> KubeSession:
    return await KubeSession.connect(context=context or None)


def run_install(options: InstallOptions, output: str) -> None:
    options = options.validated()
    plan = plan_document(options)
    if output == "text":
        click.echo(plan_text(plan))
    helm = Helm.locate(kube_context=options.context)
    if options.dry_run:
        counts = inst.dry_run(helm, options)
        if output == "json":
            click.echo(to_json({"plan": plan, "render": {"kinds": dict(counts),
                                                         "total": sum(n for _, n in counts)}}))
        else:
            click.echo(summary_text(counts))
        return
    rendered = inst.preflight(helm, options)  # offline: a broken chart never reaches the cluster
    fresh = not inst.existing_release(helm, options)
    run(_install_live, helm, options, fresh, plan, output, inst.tau_crds(rendered))


async def _install_live(helm: Helm, options: InstallOptions, fresh: bool, plan: dict[str, Any], output: str,
                        crds: list[dict[str, Any]]) -> None:
    from tau_cluster import live

    async with await _session(options.context) as session:
        if not fresh:
            await live.refuse_namespace_move(session, options.namespace)
            if crds:  # Helm never upgrades crds/: re-apply them before the new templates use them
                inst.say("Updating the TauGrid CRDs from the selected chart; existing custom resources are kept.")
                await live.apply_crds(session, crds, timeout=options.timeout_seconds)
        inst.helm_passes(helm, options, fresh=fresh)
        values = release_values(helm, options.release, options.namespace)
        report = await wait_ready(session, options.release, options.namespace, values,
                                  timeout=options.timeout_seconds, poll=5.0, timeout_text=options.timeout)
    if output == "json":
        click.echo(to_json({"plan": plan, "upgrade": not fresh, "readiness": report.document()}))
    else:
        click.echo(report.text())
        click.echo(inst.success_text(options))


def run_validate(context: str, release: str, namespace: str, timeout: str, poll_interval: str, output: str) -> None:
    require(release, "--release")
    require(namespace, "--namespace")
    seconds, poll = parse_duration(timeout, "--timeout"), parse_duration(poll_interval, "--poll-interval")
    helm = Helm.locate(kube_context=context)
    values = release_values(helm, release, namespace)

    async def go() -> None:
        from tau_cluster.waiting import NotReady

        async with await _session(context) as session:
            try:
                report = await wait_ready(session, release, namespace, values, timeout=seconds, poll=poll,
                                          timeout_text=timeout)
            except NotReady as exc:
                click.echo(to_json(exc.report.document()) if output == "json" else exc.report.text())
                raise
        click.echo(to_json(report.document()) if output == "json" else report.text())

    run(go)


def run_uninstall(options: UninstallOptions) -> None:
    options = options.validated()
    if not options.yes and not options.dry_run:
        raise TauError(uninst.NEED_YES)
    helm = Helm.locate(kube_context=options.context)
    drained, objects = False, list[tuple[str, str, str]]()
    if options.drain_queue and not options.dry_run:
        drained, objects = uninst.drain(helm, options)
        if drained:
            remaining = run(_leftovers, options.context, objects)
            if remaining:
                uninst.say(f"Drained the queue policy, but {', '.join(remaining)} is still present; Kueue may "
                           f"still hold it for an active run.")
            else:
                uninst.say(f"Removed the queue policy ({uninst.describe(objects)}) while Kueue was still running.")
    try:
        helm.run(uninst.uninstall_args(options), timeout=parse_duration(options.timeout, "--timeout") + 60)
    except Exception:
        if not drained and not options.dry_run:
            uninst.say(uninst.recovery_guidance(options, objects))
        raise
    click.echo(uninst.DRY_RUN_DONE if options.dry_run else uninst.REMOVED)


async def _leftovers(context: str | None, objects: list[tuple[str, str, str]]) -> list[str]:
    async with await _session(context) as session:
        return await uninst.leftovers(session, objects)


def run_profiles_export(context: str, path: str | None) -> None:
    from tau_cluster.profiles import export

    export(context or None, path)


def run_validate_topology(context: str, profile: str | None) -> None:
    from tau_cluster.topology import validate

    async def go() -> None:
        async with await _session(context) as session:
            lines, tally = await validate(session, profile)
        click.echo("\n".join(lines))
        if tally.count("error"):
            raise TauError(f"topology validation failed: {tally.count('error')} error(s)")

    run(go)


def node_selector(gpu_class: str | None, selector: str | None) -> str | None:
    """The node label selector of --gpu-class and --selector (deprecated class names warn)."""
    from tau_core.keys import GPU_CLASS
    from tau_core.rendering import GPU_CLASSES, normalized_gpu_class

    parts = [selector] if selector else []
    if gpu_class is not None:
        canonical = normalized_gpu_class(gpu_class)
        if canonical not in GPU_CLASSES:
            raise UsageError(f"--gpu-class {gpu_class!r} is not a GPU class", hint="one of: " + ", ".join(GPU_CLASSES))
        if canonical != gpu_class.strip().lower():
            click.echo(f"warning: gpu_class {gpu_class!r} is deprecated; use {canonical!r}", err=True)
        if canonical == "any":
            if selector and GPU_CLASS in selector:
                raise UsageError(f"--gpu-class any cannot be combined with a {GPU_CLASS} selector")
        else:
            parts.append(f"{GPU_CLASS}={canonical}")
    return ",".join(parts) or None


def run_validate_nodes(context: str, gpu_class: str | None, selector: str | None, min_healthy: int,
                       timeout: str) -> None:
    from tau_cluster.nodes import outcome, table, validate_nodes

    seconds = parse_duration(timeout, "--timeout")
    if seconds < 10:
        raise UsageError(f"invalid --timeout: {timeout!r} is below the 10s minimum")
    labels = node_selector(gpu_class, selector)

    async def go() -> None:
        async with await _session(context) as session:
            results = await validate_nodes(session, labels, seconds)
        click.echo(table(results) if results else "no GPU nodes found")
        outcome(results, min_healthy)

    run(go)
