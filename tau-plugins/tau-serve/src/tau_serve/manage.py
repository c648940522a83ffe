"""``tau serve status | scale | delete`` against the cluster (the command file only parses flags)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from tau_core.errors import ClusterError, TauError, UsageError
from tau_core.output import echo, render_table, to_json
from tau_serve.spec import KIND_NAMES
from tau_serve.status import DEPLOYMENT_COLUMNS, RAYSERVICE_COLUMNS, ServeStatus

WATCH_INTERVAL = 2.0


@attrs.frozen(kw_only=True)
class Target:
    """``NAME --kind -n --context``."""

    name: str
    kind: str = "rayservice"
    namespace: str | None = None
    context: str | None = None
    local: bool = False

    @property
    def kind_name(self) -> str:
        return KIND_NAMES[self.kind]


def _run(fn: Callable[..., Any], *args: Any) -> Any:
    from tau_core.aio import run

    return run(fn, *args)


# -- status -------------------------------------------------------------------------------------------


def status(target: Target, output: str, watch: bool, timeout: float) -> None:
    if target.local:
        _local_status(target, output, watch, timeout)
        return
    _run(_status, target, output, watch, timeout)


def _local_status(target: Target, output: str, watch: bool, timeout: float) -> None:
    import time

    from tau_serve.local import local_status

    deadline = time.monotonic() + timeout
    while True:
        result = local_status(target.name)
        if output == "json":
            echo(to_json(result))
        else:
            echo(render_table([(result["name"], f"{result['ready_replicas']}/{result['desired']}", result["phase"],
                                result["url"], result["run"])], ("NAME", "READY", "PHASE", "URL", "RUN")))
        if not watch or result["ready"]:
            return
        if result["phase"] in ("Stopped", "ScaledToZero") or time.monotonic() >= deadline:
            raise TauError(f"local service {target.name} is not ready ({result['phase']})",
                           hint=f"read its log: tau run logs {result['run']}")
        time.sleep(WATCH_INTERVAL / 4)


async def _status(target: Target, output: str, watch: bool, timeout: float) -> None:
    import anyio

    from tau_serve import cluster
    from tau_serve.status import monotonic, read_status

    async with await cluster.connect(target.context) as session:
        ns = cluster.namespace_of(session, target.namespace)
        deadline = monotonic() + timeout
        shown: tuple[str, ...] = ()
        while True:
            result = await read_status(session, target.kind_name, ns, target.name)
            if result is None:
                raise ClusterError(f'{target.kind_name} "{target.name}" not found in namespace "{ns}"',
                                   hint=f"deploy it with tau serve deploy {target.name} -n {ns} --kind {target.kind}")
            if not watch:
                _show(result, output)
                return
            line = (result.phase, *result.hints)
            if line != shown:
                _progress(result, output)
                shown = line
            if result.ready:
                return
            if monotonic() >= deadline:
                raise TauError(f'{target.kind_name} "{target.name}" is not ready after {timeout:g}s '
                               f"(phase {result.phase})", hint="; ".join(result.hints) or "check the pods' events")
            await anyio.sleep(WATCH_INTERVAL)


def _show(result: ServeStatus, output: str) -> None:
    if output == "json":
        echo(to_json(attrs.asdict(result)))
        return
    columns = RAYSERVICE_COLUMNS if result.kind == "RayService" else DEPLOYMENT_COLUMNS
    echo(render_table([result.row()], columns))
    for hint in result.hints:
        echo(f"hint: {hint}")


def _progress(result: ServeStatus, output: str) -> None:
    if output == "json":
        echo(to_json(attrs.asdict(result)))
        return
    echo(f"{result.name}: {result.phase}")
    for hint in result.hints:
        echo(f"  hint: {hint}")


# -- scale ----------------------------------------------------------------------------------------------


def scale(target: Target, replicas: int) -> None:
    if replicas < 0:
        raise UsageError("--replicas must be >= 0")
    if target.local:
        from tau_serve.local import local_scale

        local_scale(target.name, replicas)
        return
    _run(_scale, target, replicas)


async def _scale(target: Target, replicas: int) -> None:
    from tau_serve import cluster

    async with await cluster.connect(target.context) as session:
        ns = cluster.namespace_of(session, target.namespace)
        if target.kind == "deployment":
            await cluster.scale_deployment(session, ns, target.name, replicas)
        else:
            await _scale_rayservice(session, ns, target.name, replicas)
    echo(f"scaled {target.kind} {target.name} to {replicas} replica(s) (ns={ns})")


async def _scale_rayservice(session: Any, ns: str, name: str, replicas: int) -> None:
    from tau_core.kube import KubeApiError
    from tau_serve import cluster
    from tau_serve.renderers.rayservice import dump_serve_config, load_serve_config

    for attempt in range(3):
        obj = await cluster.require(session, "RayService", ns, name)
        config = load_serve_config(str((obj.get("spec") or {}).get("serveConfigV2") or ""))
        apps = [a for a in config.get("applications") or [] if isinstance(a, dict)]
        deployments = [d for a in apps for d in a.get("deployments") or [] if isinstance(d, dict)]
        if not deployments:
            raise ClusterError(f'RayService "{name}" has no Serve deployment in serveConfigV2 to scale',
                               hint="redeploy it with tau serve deploy")
        for dep in deployments:
            dep.pop("autoscaling_config", None)
            dep["num_replicas"] = replicas
        try:
            await cluster.patch_serve_config(session, ns, name, dump_serve_config(config),
                                             str(obj["metadata"]["resourceVersion"]))
            return
        except KubeApiError as exc:
            if not cluster.is_conflict(exc) or attempt == 2:
                raise


# -- delete ---------------------------------------------------------------------------------------------


def delete(target: Target) -> None:
    if target.local:
        from tau_serve.local import local_delete

        local_delete(target.name)
        return
    _run(_delete, target)


async def _delete(target: Target) -> None:
    from tau_serve import cluster

    async with await cluster.connect(target.context) as session:
        ns = cluster.namespace_of(session, target.namespace)
        removed = await cluster.delete(session, target.kind_name, ns, target.name)
    if removed:
        echo(f"deleted {target.kind} {target.name} ({', '.join(removed)}; ns={ns})")
    else:
        echo(f"{target.kind} {target.name} was already gone (ns={ns})")
