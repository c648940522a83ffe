"""``tau python doctor``: is this environment ready to submit SDK workflows?"""

from __future__ import annotations

import subprocess
import sys

import click

from tau_core.errors import ClusterError, TauError


def _cli_version() -> str:
    import os

    binary = os.environ.get("TAU_BINARY")
    if not binary:
        from tau_core import __version__

        return __version__
    proc = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    return proc.stdout.strip().rsplit(" ", 1)[-1].lstrip("v")


def _can_create_rayjobs(namespace: str, context: str | None) -> bool:
    import anyio

    from tau_core.kube import KubeSession

    async def check() -> bool:
        session = await KubeSession.connect(context=context)
        try:
            review = await session.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body={
                "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"namespace": namespace, "verb": "create", "group": "ray.io",
                                                "resource": "rayjobs"}}})
        finally:
            await session.close()
        return bool((review.get("status") or {}).get("allowed"))

    return anyio.run(check)


def run_doctor(namespace: str, context: str | None) -> None:
    import tau

    sdk = tau.__version__
    click.echo(f"tau SDK {sdk}; Python {sys.version.split()[0]}")
    cli = _cli_version()
    if cli != sdk:
        raise TauError(f"version mismatch: Tau Python SDK {sdk} requires tau CLI v{sdk} (found v{cli})",
                       hint="install matching versions: pip install 'tau==" + sdk + "'")
    click.echo(f"tau CLI v{cli}: ok")
    from tau_core.plugins import get_host

    if "experiment-store" in get_host().registry("telemetry_sinks"):
        click.echo("experiment store (taugrid-portal): ok")
    else:
        click.echo("experiment store: not installed (advisory: pip install taugrid-portal for Stellar)")
    try:
        allowed = _can_create_rayjobs(namespace, context)
    except TauError as exc:
        raise ClusterError(f"cannot check permissions in namespace {namespace}: {exc.message}",
                           hint=exc.hint or "check your kubeconfig and --context") from None
    if not allowed:
        raise ClusterError(f"you cannot create rayjobs.ray.io in namespace {namespace}",
                           hint="ask your platform team for the workspace researcher role")
    click.echo(f"create rayjobs in {namespace}: ok")
    click.echo("tau python doctor: ok")
