"""Workspace mode: ``register``/``ingest``/``status`` as a one-shot Job in the workspace namespace.

The Job runs this distribution's hidden worker (``tau data register-worker`` ...) in a digest-pinned
image, as the workspace's workload-identity service account, queued through the workspace's Kueue
LocalQueue.  The canonical record travels base64-encoded in the Job's own environment (researchers may
read but not create ConfigMaps in the workspace namespace), so there is nothing to clean up besides
the Job.  The worker prints one ``TAU_DS_RESULT <json>`` line that the CLI reads back from its log.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import time
from typing import Any

import click

from tau_core import keys
from tau_core.errors import TauError, UsageError
from tau_core.output import emit, info
from tau_core.storage.registry import refuse_credentials

from .records import DatasetRecord, to_json

_PINNED = re.compile(r"^[^\s@]+@sha256:[0-9a-f]{64}$")
MAX_RECORD = 500 * 1024
RESULT = "TAU_DS_RESULT "
ENV_RECORD = "TAU_DS_RECORD"
ENV_TIMEOUT = "TAU_DATA_JOB_TIMEOUT"

OPTIONS = [
    click.option("--workspace", default="", help="Run as a Job in this workspace's namespace."),
    click.option("--worker-image", default="", help="Worker image, pinned by digest (image@sha256:...)."),
    click.option("--wait/--no-wait", default=False, help="Wait for the Job (register requires it)."),
    click.option("--dry-run", is_flag=True, help="Print the Job instead of submitting it."),
]


def _image(o: dict[str, Any]) -> str:
    image = o["worker_image"]
    if not image:
        raise UsageError("--worker-image is required for workspace mode")
    if not _PINNED.match(image):
        raise UsageError(f"--worker-image {image!r} must be digest-pinned (image@sha256:<hash>) — mutable tags are "
                         "rejected for supply-chain safety")
    return str(image)


def _az_registry(registry: str) -> None:
    if not registry.startswith("az://") or registry == "az://":
        raise UsageError("workspace mode needs an az://<account>/<container> registry")


def check_status(registry: str, o: dict[str, Any]) -> None:
    _az_registry(registry)
    _image(o)


def check(registry: str, o: dict[str, Any]) -> None:
    if not o["wait"] and not o["dry_run"]:
        raise UsageError("workspace register requires --wait so the outcome of the register Job is known")
    _az_registry(registry)
    _image(o)


def check_ingest(source_root: str, registry: str, o: dict[str, Any]) -> None:
    refuse_credentials(source_root, what="--source-root")
    if not source_root.startswith(("az://", "https://", "file://")):
        raise UsageError(f"--source-root {source_root!r} must be file://, az:// or https://")
    if not o["workspace"]:
        raise UsageError("--workspace is required for az:// or https:// sources (or use file:// for local mode)")
    _az_registry(registry)
    _image(o)


def job_manifest(verb: str, record: DatasetRecord, registry: str, o: dict[str, Any], *, namespace: str = "",
                 queue: str | None = None, service_account: str | None = None,
                 source_root: str = "") -> dict[str, Any]:
    body = to_json(record)
    if len(body) > MAX_RECORD:
        raise UsageError(f"the record of {record.ref} is {len(body)} bytes; workspace mode carries at most "
                         f"{MAX_RECORD}")
    suffix = hashlib.sha256(f"{verb}{record.ref}{record.digest}{time.time()}".encode()).hexdigest()[:8]
    name = f"tau-ds-{verb}-{record.name}"[:50].rstrip("-") + f"-{suffix}"
    args = ["data", f"{verb}-worker", "--registry", registry]
    args += ["--source-root", source_root] if source_root else []
    args += [record.ref] if verb == "status" else []
    labels = {"app": "tau-dataset", "azure.workload.identity/use": "true", keys.MANAGED_BY: keys.MANAGED_BY_VALUE}
    job_labels = {**labels, **({keys.KUEUE_QUEUE_NAME: queue} if queue else {})}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never", "automountServiceAccountToken": True,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "worker", "image": _image(o), "command": ["tau"], "args": args,
                        "env": [{"name": ENV_RECORD, "value": base64.b64encode(body).decode()}],
                        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
                        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}}]}
    if service_account:
        pod_spec["serviceAccountName"] = service_account
    meta: dict[str, Any] = {"name": name, "labels": job_labels}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"suspend": bool(queue), "backoffLimit": 0, "ttlSecondsAfterFinished": 3600,
                     "template": {"metadata": {"labels": labels}, "spec": pod_spec}}}


def run(verb: str, record: DatasetRecord, registry: str, o: dict[str, Any], output: str,
        source_root: str = "", context: str | None = None) -> dict[str, Any] | None:
    """Dry-run: print the Job. Otherwise submit it; with --wait return the worker's result."""
    if o["dry_run"]:
        emit(job_manifest(verb, record, registry, o, source_root=source_root), "json" if output == "json" else "yaml")
        return None
    from tau_core.plugins import get_host

    kube = get_host().registry("execution_backends")["kubernetes"].load()(context=context)
    result: dict[str, Any] | None = kube._run(_submit, kube, verb, record, registry, o, source_root)
    if result is None:
        info(f"not waiting; check status with `tau data dataset status {record.ref} --workspace {o['workspace']}`")
    return result


async def _submit(session: Any, kube: Any, verb: str, record: DatasetRecord, registry: str, o: dict[str, Any],
                  source_root: str) -> dict[str, Any] | None:
    from tau_core.backends.kubernetes import WORKSPACE_API
    from tau_core.kube import api_path
    from tau_core.lifecycle.base import RunRef

    target = await kube.resolve(session, RunRef(record.name, workspace=o["workspace"]))  # Ready, or a clear error
    ws = await session.get(api_path(*WORKSPACE_API, namespace=kube.sys_namespace, name=o["workspace"]))
    sa = ((ws.get("spec") or {}).get("workloadIdentity") or {}).get("serviceAccountName")
    job = job_manifest(verb, record, registry, o, namespace=target.namespace, queue=target.queue,
                       service_account=sa, source_root=source_root)
    name = job["metadata"]["name"]
    await session.create(api_path("batch/v1", "jobs", namespace=target.namespace), job)
    info(f"submitted Job {target.namespace}/{name}")
    if not o["wait"]:
        return None
    return await _wait(session, target.namespace, name)


async def _wait(session: Any, ns: str, name: str) -> dict[str, Any]:
    from tau_core.kube import api_path

    path = api_path("batch/v1", "jobs", namespace=ns, name=name)
    limit = float(os.environ.get(ENV_TIMEOUT, "1800"))
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        status = ((await session.get(path)) or {}).get("status") or {}
        if status.get("succeeded") or status.get("failed"):
            break
        await asyncio.sleep(0.5)
    else:
        raise TauError(f"Job {ns}/{name} did not finish within {limit:.0f}s",
                       hint=f"follow it with `kubectl -n {ns} get job {name}`")
    pods = await session.list_items(api_path("v1", "pods", namespace=ns), label_selector=f"job-name={name}")
    logs = ""
    for pod in pods:
        logs += await session.text(api_path("v1", "pods", namespace=ns, name=pod["metadata"]["name"]) + "/log",
                                   query={"container": "worker"})
    lines = [line[len(RESULT):] for line in logs.splitlines() if line.startswith(RESULT)]
    if not lines:
        tail = " | ".join(logs.strip().splitlines()[-3:]) or "no output"
        raise TauError(f"the {name} Job finished without a result ({tail})",
                       hint=f"inspect it with `kubectl -n {ns} logs job/{name}`")
    result: dict[str, Any] = json.loads(lines[-1])
    return result
