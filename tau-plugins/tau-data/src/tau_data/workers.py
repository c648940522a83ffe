"""Hidden in-cluster workers (``register-worker``, ``ingest-worker``, ``status-worker``).

They run inside the workspace Job with the record mounted from a ConfigMap and do exactly what
the local verbs do, against the registry given on their command line.
"""

from __future__ import annotations

from pathlib import Path

import click

from tau_core.errors import ConflictError, TauError
from tau_core.output import emit

from .common import open_registry
from .datasets import DatasetRegistry
from .ingest import ingest_local, read_status
from .records import DatasetRecord, converter, load, validate


def _load(path: str) -> DatasetRecord:
    record: DatasetRecord = load(Path(path).read_bytes(), DatasetRecord, path)
    return validate(record)


@click.command("register-worker", hidden=True)
@click.option("--record-file", required=True)
@click.option("--registry", required=True)
def register_worker(record_file: str, registry: str) -> None:
    record = _load(record_file)
    reg = DatasetRegistry(open_registry(registry))
    try:
        reg.register(record)
    except ConflictError:
        existing = reg.get(record.name, record.version)
        if existing.digest != record.digest:
            raise ConflictError(f"dataset {record.ref} already registered (versions are immutable; register a new "
                                f"version): digest {existing.digest} != {record.digest}") from None
        click.echo(f"{record.ref} already registered with identical digest {record.digest} (idempotent no-op)")
        return
    click.echo(f"registered {record.ref} (digest {record.digest})")


@click.command("ingest-worker", hidden=True)
@click.option("--record-file", required=True)
@click.option("--registry", required=True)
@click.option("--source-root", required=True)
def ingest_worker(record_file: str, registry: str, source_root: str) -> None:
    record = _load(record_file)
    status = ingest_local(DatasetRegistry(open_registry(registry)), record, source_root, "", remote=True)
    emit(converter.unstructure(status), "json")
    if status.state == "failed":
        raise TauError(f"ingest state is 'failed': {status.failure_summary}")


@click.command("status-worker", hidden=True)
@click.option("--registry", required=True)
@click.argument("ref")
def status_worker(registry: str, ref: str) -> None:
    name, _, version = ref.partition("@")
    emit(converter.unstructure(read_status(DatasetRegistry(open_registry(registry)), name, version)), "json")


workers = [register_worker, ingest_worker, status_worker]
