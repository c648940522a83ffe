"""``--from-finetune``/``--checkpoint-ref`` and ``--from-model``/``--model-ref`` -> ``TAU_MODEL_PATH``.

Both go through the model-reference resolver of :mod:`tau_core.modelref` over the ``pvc`` storage backend:
the finetune run's ``artifacts.json`` (and ``model.json``) or the registry's alias/run records are read
from the namespace's checkpoint PVC by short-lived, read-only helper pods, never from local files.
"""

from __future__ import annotations

from typing import Any

from tau_core.errors import UsageError
from tau_serve.options import DeployArgs
from tau_serve.spec import checkpoint_path


def reference(args: DeployArgs) -> str:
    """The reference to resolve: ``finetune/RUN[:artifact]`` or ``MODEL:alias`` / ``MODEL@run``."""
    if args.checkpoint_ref:
        return args.checkpoint_ref
    if args.from_finetune:
        run = args.from_finetune.removeprefix("finetune/")
        return f"finetune/{run}"
    if args.model:
        if args.model.startswith("finetune/"):
            raise UsageError(f'--from-model "{args.model}" is a finetune reference; use --from-finetune')
        return args.model
    raise UsageError("no checkpoint reference was given")


def resolve_sync(args: DeployArgs, namespace: str, context: str | None) -> str:
    from tau_core.modelref import resolve

    resolved = resolve(reference(args), "pvc", namespace=namespace, context=context, pvc=args.checkpoint_pvc)
    return checkpoint_path(resolved.checkpoint_path, "--from-finetune/--from-model")


async def resolve_path(session: Any, namespace: str, args: DeployArgs) -> str:
    """The checkpoint path the reference names (resolved in a worker thread: the resolver is synchronous)."""
    import anyio

    path: str = await anyio.to_thread.run_sync(resolve_sync, args, namespace, session.context)
    return path
