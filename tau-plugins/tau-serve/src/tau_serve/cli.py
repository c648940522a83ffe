"""``tau serve``: deploy, status, scale and delete a model endpoint (RayService or Deployment).

Thin: flags are parsed here; :mod:`tau_serve.deploy` and :mod:`tau_serve.manage` do the work.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from tau_core.cli_options import CONTEXT_SETTINGS

F = TypeVar("F", bound=Callable[..., Any])
KIND = click.Choice(["rayservice", "deployment"])


def _target_options(fn: F) -> F:
    for option in reversed([
        click.option("--local", is_flag=True, help="The service runs on this machine (deployed with --local)."),
        click.option("--kind", type=KIND, default="rayservice", show_default=True,
                     help="Workload kind: a Ray Serve RayService or a plain Deployment."),
        click.option("-n", "--namespace", default=None,
                     help="Namespace of the service (from your platform handoff; default: the context's)."),
        click.option("--context", default=None, envvar="TAU_CONTEXT",
                     help="kubectl context (default: $TAU_CONTEXT or current)."),
    ]):
        fn = option(fn)
    return fn


@click.group("serve", context_settings=CONTEXT_SETTINGS, invoke_without_command=False)
def serve() -> None:
    """Render and manage serving deployments (RayService or Deployment)."""


@serve.command("deploy", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option("--profile", default="", help="Ready TauCluster workload profile to authorize and render "
              "(required unless --local).")
@_target_options
@click.option("--image", default=None, help="Container image, pinned by digest (default: the profile's).")
@click.option("--replicas", type=int, default=None, help="Serving replicas (default 1; excl. --max-replicas).")
@click.option("--import-path", default=None, help="Ray Serve import path (rayservice; default serve:app).")
@click.option("--app-args", default=None, metavar="PATH", help="JSON/YAML args object for the Serve app builder.")
@click.option("--port", type=int, default=None, help="RayService HTTP port (default 8000).")
@click.option("--deployment-port", "deployment_ports", type=int, multiple=True, help="Deployment container port.")
@click.option("--env", multiple=True, metavar="KEY=VAL", help="Env for the container and the Ray runtime_env.")
@click.option("--env-secret", "env_secrets", multiple=True, metavar="KEY=SECRET:KEY", help="Env from a Secret key.")
@click.option("--runtime-pip", multiple=True, help="pip requirement for the Ray runtime_env (rayservice).")
@click.option("--init", "inits", multiple=True, metavar="NAME=IMAGE", help="Init container (deployment).")
@click.option("--sidecar", "sidecars", multiple=True, metavar="NAME=IMAGE", help="Sidecar container (deployment).")
@click.option("--volume", "volumes", multiple=True, metavar="NAME=KIND[:src]",
              help="Volume: pvc:<claim>, emptyDir, configMap:<name> or secret:<name>.")
@click.option("--mount", "mounts", multiple=True, metavar="NAME:PATH[:ro|rw]", help="Mount a --volume by NAME.")
@click.option("--checkpoint", default=None, help="Checkpoint path; sets TAU_MODEL_PATH and mounts the PVC at /data.")
@click.option("--checkpoint-pvc", default="blob-training", show_default=True, help="PVC mounted at /data.")
@click.option("--from-finetune", default=None, metavar="RUN", help="A finetune run's checkpoint artifact.")
@click.option("--checkpoint-ref", default=None, metavar="finetune/RUN[:artifact]", help="Checkpoint reference.")
@click.option("--from-model", "--model-ref", "from_model", default=None, metavar="MODEL:alias|MODEL@run",
              help="A model registry reference.")
@click.option("--readiness-path", default=None, help="HTTP readiness probe path (deployment).")
@click.option("--startup-path", default=None, help="HTTP startup probe path (deployment).")
@click.option("--liveness-path", default=None, help="HTTP liveness probe path (deployment).")
@click.option("--startup-failure-threshold", type=int, default=None, help="Startup probe failure threshold.")
@click.option("--service-port", type=int, default=None, help="ClusterIP Service port (deployment; none if unset).")
@click.option("--service-target-port", type=int, default=None, help="Service target port (default: first port).")
@click.option("--ray-version", default=None, help="Ray version of the RayService cluster (default 2.40.0).")
@click.option("--args", "legacy_args", default=None, help="Legacy whitespace-split args (conflicts with --arg).")
@click.option("--command", "command", multiple=True, help="Literal command word (deployment; repeatable).")
@click.option("--arg", "args", multiple=True, help="Literal argument (deployment; repeatable).")
@click.option("--gpus", type=int, default=None, help="GPUs per worker; must equal the profile's gpusPerWorker.")
@click.option("--nodes", type=int, default=None, help="RayService GPU worker count; must equal profile workerCount.")
@click.option("--shm-size", default=None, help="RayService /dev/shm size (e.g. 16Gi).")
@click.option("--workload-profile-snapshot", "snapshot", default=None, metavar="PATH",
              help="Offline profile snapshot (only with --dry-run=client and --namespace).")
@click.option("--min-replicas", type=int, default=None, help="Autoscaling floor (requires --max-replicas).")
@click.option("--max-replicas", type=int, default=None, help=">0 enables autoscaling.")
@click.option("--target-qps", type=int, default=None, help="Autoscaling target per replica (requires --max-replicas).")
@click.option("--scale-down-delay", type=int, default=None, help="Seconds before scale-down (requires --max-replicas).")
@click.option("--dry-run", type=click.Choice(["client", "server"]), default=None,
              help="client: print the manifests; server: validate them on the API server.")
def deploy(**flags: Any) -> None:
    """Deploy NAME from a pinned image and an optional checkpoint.

    \b
    Examples:
      tau serve deploy llm --profile serve-1x --image REG/IMG@sha256:... --checkpoint llm/step-100 -n ns
      tau serve deploy web --kind deployment --profile cpu-small --image ... --deployment-port 8080 \\
        --service-port 80 --readiness-path /healthz -n ns
    """
    from tau_serve.deploy import deploy as run_deploy
    from tau_serve.options import DeployArgs

    run_deploy(DeployArgs(**flags), tuple(sys.argv))


@serve.command("status", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@_target_options
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("-w", "--watch", is_flag=True, help="Follow until the service is ready (phases and hints).")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds --watch waits.")
def status(name: str, local: bool, kind: str, namespace: str | None, context: str | None, output: str, watch: bool,
           timeout: float) -> None:
    """Show NAME's status: RayService STATUS/READY endpoints/AGE; Deployment READY/DESIRED/AVAILABLE/AGE."""
    from tau_serve.manage import Target
    from tau_serve.manage import status as show

    show(Target(name=name, kind=kind, namespace=namespace, context=context, local=local), output, watch, timeout)


@serve.command("scale", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@_target_options
@click.option("--replicas", type=int, required=True, help="Serving replicas (>= 0).")
def scale(name: str, local: bool, kind: str, namespace: str | None, context: str | None, replicas: int) -> None:
    """Scale NAME: a Deployment through its scale subresource, a RayService through serveConfigV2."""
    from tau_serve.manage import Target
    from tau_serve.manage import scale as run_scale

    run_scale(Target(name=name, kind=kind, namespace=namespace, context=context, local=local), replicas)


@serve.command("delete", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@_target_options
def delete(name: str, local: bool, kind: str, namespace: str | None, context: str | None) -> None:
    """Delete NAME (and a Deployment's Service and HPA); already gone is not an error."""
    from tau_serve.manage import Target
    from tau_serve.manage import delete as run_delete

    run_delete(Target(name=name, kind=kind, namespace=namespace, context=context, local=local))
