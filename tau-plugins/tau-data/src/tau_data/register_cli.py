"""``register``, ``ingest`` and ``status``: the verbs that write records or bytes."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tau_core.errors import ConfigError, TauError, UsageError
from tau_core.output import emit, output_option

from . import ingest as ingest_mod
from . import workspace_mode
from .common import open_registry, open_source, parse_tags, registry_option
from .datasets import DatasetRegistry, split_ref
from .ops import hash_source, record_store, verify_text
from .ops import verify as verify_location
from .records import (
    UINT16,
    Component,
    DatasetRecord,
    Eval,
    FileEntry,
    IngestStatus,
    Pretrain,
    Rl,
    Source,
    compute_digest,
    converter,
    now,
)


def _section(purpose: str, opts: dict[str, str]) -> dict[str, object]:
    if purpose == "pretrain":
        return {"pretrain": Pretrain(tokenizer=opts["tokenizer"], format=opts["format"],
                                     sequence_packing=opts["sequence_packing"])}
    if purpose == "rl":
        return {"rl": Rl(kind=opts["rl_kind"], policy_run=opts["rl_policy_run"],
                         reward_model=opts["rl_reward_model"], schema=opts["rl_schema"])}
    if purpose == "eval":
        return {"eval": Eval(task=opts["eval_task"], split=opts["eval_split"], metric=opts["eval_metric"])}
    raise UsageError(f"purpose {purpose!r} must be one of: pretrain, rl, eval")


def _from_manifest(path: str) -> tuple[list[FileEntry], list[Component], dict[str, object]]:
    try:
        data = json.loads(Path(path).read_text())
        files = converter.structure(data.get("files", []), list[FileEntry])
        components = converter.structure(data.get("components", []), list[Component])
    except (OSError, json.JSONDecodeError, Exception) as exc:
        raise ConfigError(f"--manifest {path}: {exc}") from None
    return files, components, data


def build_record(name: str, version: str, o: dict[str, str], tags: dict[str, str]) -> DatasetRecord:
    """The record for ``register``, hashed from ``--from`` or read from ``--manifest``."""
    components: list[Component] = []
    extra: dict[str, object] = {}
    location = {"account": o["account"], "container": o["container"], "prefix": o["prefix"], "uri": ""}
    if o["source"]:
        store = open_source(o["source"])
        files = hash_source(store)
        if not files:
            raise UsageError(f"no files found at {store.url}")
        assurance = o["assurance"] or "verified"
        loc = getattr(store, "location", None)
        if loc is not None and getattr(loc, "backend", "") == "az" and not o["account"]:
            location.update(account=loc.account, container=loc.container, prefix=loc.prefix)
        elif not o["account"]:
            location["uri"] = store.url
    else:
        files, components, extra = _from_manifest(o["manifest"])
        assurance = o["assurance"] or "manifest-supplied"
        location["uri"] = str(extra.get("uri", ""))
    if o["purpose"] == "pretrain" and o["format"] == UINT16:
        for entry in files:
            if entry.bytes % 2 and assurance == "verified":
                raise UsageError(f"file {entry.path} has odd byte count {entry.bytes} but format is {UINT16} (uint16)")
            entry.token_count = entry.token_count or entry.bytes // 2
    digest = compute_digest(files)
    for field in ("digest", "total_bytes"):
        claimed, actual = extra.get(field), digest if field == "digest" else sum(f.bytes for f in files)
        if claimed is not None and claimed != actual:
            raise ConfigError(f"--manifest {o['manifest']}: {field} {claimed!r} does not match computed {actual!r}")
    source = Source(kind=o["source_kind"], repo=o["source_repo"], revision=o["source_revision"],
                    config=o["source_config"])
    return DatasetRecord(name=name, version=version, purpose=o["purpose"], files=files,
                         total_bytes=sum(f.bytes for f in files), digest=digest, assurance=assurance,
                         created_at=now(), source=source, tags=tags, components=components,
                         **location, **_section(o["purpose"], o))  # type: ignore[arg-type]


def _workspace_result(result: dict[str, object] | None, output: str) -> None:
    if result is None:
        return
    emit(result, output, table=lambda _d: str(result["message"]))
    if not result["ok"]:
        raise TauError(str(result["message"]))


_REGISTER_OPTIONS = [
    click.option("--purpose", required=True, help="pretrain, rl or eval."),
    click.option("--from", "source", default="", help="Local directory or az://ACCOUNT/CONTAINER/PREFIX to hash."),
    click.option("--manifest", default="", help="JSON {source, components[], files[]} (no download)."),
    click.option("--assurance", default="", help="verified, manifest-supplied or trusted."),
    click.option("--account", default=""), click.option("--container", default=""),
    click.option("--prefix", default=""),
    click.option("--tokenizer", default=""), click.option("--format", "format", default=UINT16, show_default=True),
    click.option("--sequence-packing", default=""),
    click.option("--rl-kind", default="prompts"), click.option("--rl-policy-run", default=""),
    click.option("--rl-reward-model", default=""), click.option("--rl-schema", default=""),
    click.option("--eval-task", default=""), click.option("--eval-split", default=""),
    click.option("--eval-metric", default=""),
    click.option("--source-kind", default=""), click.option("--source-repo", default=""),
    click.option("--source-revision", default=""), click.option("--source-config", default=""),
    click.option("--tag", "tags", multiple=True, help="KEY=VALUE (repeatable)."),
    *workspace_mode.OPTIONS,
]


@click.command("register")
@click.argument("ref")
@registry_option(default="az://")
@output_option("table", "json")
def register(ref: str, registry: str, namespace: str | None, context: str | None, output: str,
             tags: tuple[str, ...], **o: str) -> None:
    """Register NAME@VERSION (immutable) from --from or --manifest."""
    name, version = split_ref(ref, exact="register")
    if bool(o["source"]) == bool(o["manifest"]):
        raise UsageError("--from and --manifest are mutually exclusive" if o["source"]
                         else "one of --from or --manifest is required")
    if o["workspace"]:
        workspace_mode.check(registry, o)
    record = build_record(name, version, o, parse_tags(tags))
    if o["assurance"] == "verified" and o["manifest"]:
        result = verify_location(record, "")
        if not result.ok:
            raise TauError(f"--manifest {o['manifest']} does not match the bytes at {record.location()}:\n"
                           + verify_text(result))
    if o["workspace"]:
        _workspace_result(workspace_mode.run("register", record, registry, o, output, context=context), output)
        return
    DatasetRegistry(open_registry(registry, namespace, context)).register(record)
    emit(converter.unstructure(record), output,
         table=lambda _d: f"registered {record.ref} (digest {record.digest})")


for _option in reversed(_REGISTER_OPTIONS):
    register = _option(register)


@click.command("ingest")
@click.argument("ref")
@registry_option()
@click.option("--source-root", default="", help="file://, az:// or public https:// root holding the files.")
@click.option("--destination", default="", help="Must match the record's location (the record is authoritative).")
@output_option("table", "json")
def ingest(ref: str, registry: str, namespace: str | None, context: str | None, source_root: str,
           destination: str, output: str, **o: str) -> None:
    """Copy and verify the bytes of NAME@VERSION into its recorded location."""
    name, version = split_ref(ref, exact="ingest")
    if not source_root:
        raise UsageError("--source-root is required")
    reg = DatasetRegistry(open_registry(registry, namespace, context))
    record = reg.get(name, version)
    if o["workspace"] or not source_root.startswith("file://"):
        workspace_mode.check_ingest(source_root, registry, o)
        _workspace_result(workspace_mode.run("ingest", record, registry, o, output, source_root=source_root,
                                             context=context), output)
        return
    result = ingest_mod.ingest_local(reg, record, source_root, destination)
    emit(converter.unstructure(result), output,
         table=lambda _d: f"{record.ref}: {result.state} ({result.verified_files} file(s), "
                          f"{result.verified_bytes} bytes)")
    if result.state == "failed":
        raise TauError(f"ingest state is 'failed': {result.failure_summary}")


for _option in reversed(workspace_mode.OPTIONS):
    ingest = _option(ingest)


@click.command("status")
@click.argument("ref")
@registry_option()
@click.option("--workspace", default="", help="Read the status through a Job in this workspace.")
@click.option("--worker-image", default="", help="Worker image, pinned by digest (workspace mode).")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait for the status Job.")
@output_option("table", "json")
def status(ref: str, registry: str, namespace: str | None, context: str | None, workspace: str,
           worker_image: str, wait: bool, output: str) -> None:
    """Show the ingest status of NAME@VERSION; exits 1 when it failed."""
    name, version = split_ref(ref, exact="status")
    reg = DatasetRegistry(open_registry(registry, namespace, context))
    if workspace:
        o = {"workspace": workspace, "worker_image": worker_image, "wait": wait, "dry_run": False}
        workspace_mode.check_status(registry, o)
        found = workspace_mode.run("status", reg.get(name, version), registry, o, output, context=context)
        if found is None:
            return
        if not found["ok"]:
            raise TauError(str(found["message"]))
        result = converter.structure(found["status"], IngestStatus)
    else:
        result = ingest_mod.read_status(reg, name, version)
    emit(converter.unstructure(result), output, table=lambda _d: ingest_mod.status_text(result))
    if result.state == "failed":
        raise TauError(f"ingest state is 'failed': {result.failure_summary}")


commands = [register, ingest, status]
__all__ = ["commands", "record_store"]
