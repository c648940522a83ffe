"""Hidden in-cluster workers (``register-worker``, ``ingest-worker``, ``status-worker``).

They run inside the workspace Job with the record in ``$TAU_DS_RECORD`` and do exactly what the
local verbs do, against the registry on their command line.  Each prints one
``TAU_DS_RESULT <json>`` line (``{"ok", "message", ...}``) that the CLI reads back.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import click

from tau_core.errors import ConflictError, TauError

from .common import open_registry
from .datasets import DatasetRegistry
from .ingest import ingest_local, read_status
from .records import DatasetRecord, converter, load, validate
from .workspace_mode import ENV_RECORD, RESULT


def _record(raw: str) -> DatasetRecord:
    record: DatasetRecord = load(base64.b64decode(raw), DatasetRecord, f"${ENV_RECORD}")
    return validate(record)


def register_worker_run(raw: str, registry: str) -> dict[str, Any]:
    record = _record(raw)
    reg = DatasetRegistry(open_registry(registry))
    try:
        reg.register(record)
    except ConflictError:
        existing = reg.get(record.name, record.version)
        if existing.digest != record.digest:
            return {"ok": False, "message": f"dataset {record.ref} already registered (versions are immutable; "
                                            f"register a new version): digest {existing.digest} != {record.digest}"}
        return {"ok": True, "message": f"{record.ref} already registered with identical digest {record.digest} "
                                       "(idempotent no-op)"}
    return {"ok": True, "message": f"registered {record.ref} (digest {record.digest})"}


def ingest_worker_run(raw: str, registry: str, source_root: str) -> dict[str, Any]:
    record = _record(raw)
    status = ingest_local(DatasetRegistry(open_registry(registry)), record, source_root, "", remote=True)
    return {"ok": status.state == "ready", "message": f"{record.ref}: {status.state}",
            "status": converter.unstructure(status)}


def _emit(run: Any) -> None:
    try:
        result = run()
    except TauError as exc:
        result = {"ok": False, "message": exc.message}
    click.echo(RESULT + json.dumps(result, sort_keys=True))
    if not result["ok"]:
        raise TauError(result["message"])


@click.command("register-worker", hidden=True)
@click.option("--registry", required=True)
def register_worker(registry: str) -> None:
    _emit(lambda: register_worker_run(os.environ.get(ENV_RECORD, ""), registry))


@click.command("ingest-worker", hidden=True)
@click.option("--registry", required=True)
@click.option("--source-root", required=True)
def ingest_worker(registry: str, source_root: str) -> None:
    _emit(lambda: ingest_worker_run(os.environ.get(ENV_RECORD, ""), registry, source_root))


def status_worker_run(registry: str, ref: str) -> dict[str, Any]:
    name, _, version = ref.partition("@")
    status = read_status(DatasetRegistry(open_registry(registry)), name, version)
    return {"ok": True, "message": status.state, "status": converter.unstructure(status)}


@click.command("status-worker", hidden=True)
@click.option("--registry", required=True)
@click.argument("ref")
def status_worker(registry: str, ref: str) -> None:
    _emit(lambda: status_worker_run(registry, ref))


workers = [register_worker, ingest_worker, status_worker]
