"""Workspace mode: ``register``/``ingest`` as a one-shot Job in the workspace namespace.

The Job runs this distribution's hidden worker commands (``tau data register-worker`` ...) in a
digest-pinned image; the record travels in a ConfigMap.  This build renders the Job
(``--dry-run``); submitting it needs the workspace connection and is reported as unavailable.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import click

from tau_core.errors import TauError, UsageError
from tau_core.output import emit
from tau_core.storage.registry import refuse_credentials

from .records import DatasetRecord, to_json

_PINNED = re.compile(r"^[^\s@]+@sha256:[0-9a-f]{64}$")
MAX_CONFIGMAP = 500 * 1024

OPTIONS = [
    click.option("--workspace", default="", help="Run as a Job in this workspace's namespace."),
    click.option("--worker-image", default="", help="Worker image, pinned by digest (image@sha256:...)."),
    click.option("--wait/--no-wait", default=False, help="Wait for the Job (register requires it)."),
    click.option("--dry-run", is_flag=True, help="Print the Job and ConfigMap instead of submitting them."),
]


def _image(o: dict[str, Any]) -> str:
    image = o["worker_image"]
    if not image:
        raise UsageError("--worker-image is required for workspace mode")
    if not _PINNED.match(image):
        raise UsageError(f"--worker-image {image!r} must be digest-pinned (image@sha256:<hash>) — mutable tags are "
                         "rejected for supply-chain safety")
    return str(image)


def check(registry: str, o: dict[str, Any]) -> None:
    if not o["wait"] and not o["dry_run"]:
        raise UsageError("workspace register requires --wait so the transient record ConfigMap can be cleaned up "
                         "deterministically")
    if not registry.startswith("az://") or registry == "az://":
        raise UsageError("workspace mode needs an az://<account>/<container> registry")
    _image(o)


def check_ingest(source_root: str, registry: str, o: dict[str, Any]) -> None:
    refuse_credentials(source_root, what="--source-root")
    if not source_root.startswith(("az://", "https://", "file://")):
        raise UsageError(f"--source-root {source_root!r} must be file://, az:// or https://")
    if not o["workspace"]:
        raise UsageError("--workspace is required for az:// or https:// sources (or use file:// for local mode)")
    if not registry.startswith("az://") or registry == "az://":
        raise UsageError("workspace mode needs an az://<account>/<container> registry")
    _image(o)


def manifests(verb: str, record: DatasetRecord, registry: str, o: dict[str, Any],
              source_root: str = "") -> list[dict[str, Any]]:
    body = to_json(record).decode()
    if len(body) > MAX_CONFIGMAP:
        raise UsageError(f"the record of {record.ref} is {len(body)} bytes; the ConfigMap limit is {MAX_CONFIGMAP}")
    suffix = hashlib.sha256(f"{record.ref}{record.digest}".encode()).hexdigest()[:8]
    name = f"tau-ds-{verb}-{record.name}"[:50].rstrip("-") + f"-{suffix}"
    args = ["tau", "data", f"{verb}-worker", "--record-file", "/etc/tau-ds/dataset.json", "--registry", registry]
    if source_root:
        args += ["--source-root", source_root]
    labels = {"app": "tau-dataset", "azure.workload.identity/use": "true"}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels},
         "data": {"dataset.json": body}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
         "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 3600, "template": {
             "metadata": {"labels": labels},
             "spec": {"restartPolicy": "Never", "serviceAccountName": f"{o['workspace']}-workload",
                      "containers": [{"name": "worker", "image": _image(o), "args": args,
                                      "volumeMounts": [{"name": "record", "mountPath": "/etc/tau-ds",
                                                        "readOnly": True}]}],
                      "volumes": [{"name": "record", "configMap": {"name": name}}]}}}},
    ]


def run(verb: str, record: DatasetRecord, registry: str, o: dict[str, Any], output: str,
        source_root: str = "") -> None:
    objects = manifests(verb, record, registry, o, source_root)
    if o["dry_run"]:
        emit(objects, "json" if output == "json" else "yaml")
        return
    raise TauError(f"submitting the {verb} Job to workspace {o['workspace']} is not available in this build",
                   hint="use --dry-run to inspect the Job, or run the hidden worker in a pod yourself")
