"""``tau run [TARGET]``: resolve, render, then print (client dry-run) or submit through a backend."""

from __future__ import annotations

import sys
from typing import Any

import click

from tau_core.config.resolve import Resolution, RunOptions, resolve_run
from tau_core.output import emit, info
from tau_run.reporting import print_messages, print_warnings


def resolve_and_render(options: RunOptions) -> tuple[Resolution, list[dict[str, Any]]]:
    from tau_core.rendering import render

    resolution = resolve_run(options)
    objects = render(resolution.request)
    return resolution, objects


def run_target(options: RunOptions, output: str = "table", *, follow: bool = False) -> None:
    resolution, objects = resolve_and_render(options)
    print_warnings(resolution.validated.warnings)
    print_messages(resolution.warnings)
    if options.dry_run == "client":
        if output == "json":
            emit(objects if len(objects) > 1 else objects[0], "json")
            return
        from tau_run.dryrun import annotated_yaml

        sys.stdout.write(annotated_yaml(objects, resolution))
        return
    submit(resolution, objects, options, output, follow=follow)


def submit(resolution: Resolution, objects: list[dict[str, Any]], options: RunOptions, output: str,
           *, follow: bool = False) -> None:
    from tau_core.lifecycle import SubmitRequest, get_backend

    req = resolution.request
    backend_name = "local" if resolution.local else "kubernetes"
    options_for_backend: dict[str, Any] = {}
    if backend_name == "kubernetes":
        kube_context = resolution.values.get("context")
        options_for_backend = {"context": kube_context.value if kube_context else None,
                               "kubeconfig": req.context.kubeconfig, "progress": info}
    backend = get_backend(backend_name, **options_for_backend)
    submit_request = SubmitRequest(
        name=req.name,
        config=req.config,
        objects=objects,
        context=req.context,
        config_path=resolution.target.config_path,
        config_hash=req.config_hash,
        submission_id=req.submission_id,
    )
    if options.dry_run == "server":
        info(f"server dry-run of {req.name} through the {backend_name} backend")
    else:
        info(f"submitting {req.name} ({resolution.validated.engine}) through the {backend_name} backend")
    result = backend.submit(submit_request)
    doc = {"run": result.ref.name, "namespace": result.ref.namespace, "backend": result.ref.backend,
           "created": result.created, "message": result.message, "dry_run": options.dry_run}
    if output == "json":
        emit(doc, "json")
        if follow and not options.dry_run:
            _follow(backend, backend_name, result.ref)
        return
    click.echo(f"Run: {result.ref.name}")
    if result.ref.namespace:
        click.echo(f"Namespace: {result.ref.namespace}")
    if result.message:
        click.echo(result.message)
    if follow and not options.dry_run:
        sys.stdout.flush()
        _follow(backend, backend_name, result.ref)
    elif not options.dry_run:
        # the hint names the namespace, so it resolves to this cluster run and never to a local one
        where = f" -n {result.ref.namespace}" if result.ref.namespace else ""
        click.echo(f"Next: tau run status {result.ref.name}{where} --watch")


def _follow(backend: Any, backend_name: str, ref: Any) -> None:
    """--follow: stream the log to the end; the exit code says whether the run succeeded."""
    if backend_name == "local":
        from tau_core.backends.local.follow import follow_run

        code = follow_run(ref.name)
    else:
        from tau_core.lifecycle.base import LogOptions

        for line in backend.logs(ref, LogOptions(follow=True, tail=-1)):
            click.echo(line)
        st = backend.status(ref)
        code = 0 if st.succeeded else 1
    if code:
        raise click.exceptions.Exit(code)
