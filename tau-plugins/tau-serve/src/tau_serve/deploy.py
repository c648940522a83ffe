"""``tau serve deploy``: check the flags, authorize the profile, resolve the queue and checkpoint, render
through the renderer registry, then print (client dry-run) or server-side apply."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from tau_core.config.profiles import ProfileCatalog
from tau_core.errors import PluginError
from tau_core.output import echo, to_yaml, warning
from tau_core.rendering import PLACEHOLDER_QUEUE, RenderContext
from tau_serve import options, profiles
from tau_serve.options import DeployArgs
from tau_serve.spec import ServeRenderRequest, ServeSpec, checkpoint_path

CLIENT_QUEUE_NOTE = ("client dry-run does not look up the namespace's default LocalQueue: the profile's queue (or a "
                     "placeholder) is shown; use --dry-run=server to check the real one")
SNAPSHOT_NOTE = ("offline client dry-run: snapshot profile; workspace, cluster admission, storage, and runtime were "
                 "not verified")


def render_objects(request: ServeRenderRequest) -> list[dict[str, Any]]:
    """Render with the renderer registered for the request's kind (``RayService`` / ``Deployment``)."""
    from tau_core.plugins import get_host
    from tau_core.rendering import detached

    registry = get_host().registry("renderers")
    if request.kind not in registry:
        raise PluginError(f"no renderer is registered for kind {request.kind}",
                          hint="install tau-serve (pip install tau-serve)")
    return detached(registry[request.kind].load()(request))


def context_for(profile: Mapping[str, Any], catalog: ProfileCatalog, namespace: str, queue: str, dry_run: str | None,
                argv: tuple[str, ...]) -> RenderContext:
    return RenderContext(namespace=namespace, queue=queue, workload_profile=dict(profile),
                         profile_set_hash=catalog.set_hash, tau_cluster_generation=catalog.generation,
                         workload_profile_source=catalog.source, dry_run=dry_run, tau_command=argv)


def deploy(args: DeployArgs, argv: tuple[str, ...]) -> None:
    options.check_flags(args)
    if args.local:
        from tau_serve.local import deploy_local

        deploy_local(args)
        return
    if args.snapshot:
        _offline(args, argv)
        return
    from tau_core.aio import run

    run(_deploy_live, args, argv)


def _offline(args: DeployArgs, argv: tuple[str, ...]) -> None:
    assert args.namespace
    catalog = profiles.snapshot_catalog(str(args.snapshot))
    profile = profiles.authorize(catalog, args.profile, args.namespace, args.kind)
    queue = str(profile.get("defaultLocalQueue") or PLACEHOLDER_QUEUE)
    model_path = checkpoint_path(args.checkpoint) if args.checkpoint else None
    spec = options.build_spec(args, profile, model_path)
    context = context_for(profile, catalog, args.namespace, queue, "client", argv)
    objects = render_objects(ServeRenderRequest(spec=spec, context=context))
    warning(SNAPSHOT_NOTE)
    _print(objects)


async def _deploy_live(args: DeployArgs, argv: tuple[str, ...]) -> None:
    from tau_serve import cluster

    async with await cluster.connect(args.context) as session:
        namespace = cluster.namespace_of(session, args.namespace)
        catalog = await _to_thread(profiles.cluster_catalog, args.profile, namespace, session.context)
        profile = profiles.authorize(catalog, args.profile, namespace, args.kind)
        if args.dry_run == "client":  # renders locally: the queue is not looked up (reference §2.6)
            queue = str(profile.get("defaultLocalQueue") or PLACEHOLDER_QUEUE)
            warning(CLIENT_QUEUE_NOTE)
        else:
            queue, cluster_queue = await cluster.default_queue(session, namespace)
            profiles.check_queue(profile, namespace, queue, cluster_queue)
        model_path = await _model_path(session, args, namespace)
        spec = options.build_spec(args, profile, model_path)
        context = context_for(profile, catalog, namespace, queue, args.dry_run, argv)
        objects = render_objects(ServeRenderRequest(spec=spec, context=context))
        if args.dry_run == "client":
            _print(objects)
            return
        await cluster.apply(session, objects, dry_run=args.dry_run == "server")
    _success(spec, args, namespace)


async def _to_thread(fn: Any, *a: Any) -> Any:
    import anyio

    return await anyio.to_thread.run_sync(fn, *a)


async def _model_path(session: Any, args: DeployArgs, namespace: str) -> str | None:
    if args.checkpoint:
        return checkpoint_path(args.checkpoint)
    if args.finetune_ref or args.model:
        from tau_serve import refs

        return await refs.resolve_path(session, namespace, args)
    return None


def _print(objects: list[dict[str, Any]]) -> None:
    sys.stdout.write("---\n".join(to_yaml(obj) for obj in objects))


def _success(spec: ServeSpec, args: DeployArgs, namespace: str) -> None:
    verb = "validated (server dry-run)" if args.dry_run == "server" else "deployed"
    echo(f"{verb} service {spec.name} (kind={args.kind}, profile={args.profile}, image={spec.image}, ns={namespace})")
    if args.dry_run != "server":
        echo(f"track: tau serve status {spec.name} -n {namespace} --kind {args.kind}")

