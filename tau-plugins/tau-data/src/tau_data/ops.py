"""Presentation and byte-level operations behind the dataset verbs."""

from __future__ import annotations

import attrs

from tau_core.errors import UsageError
from tau_core.storage import ObjectStore, open_store

from .common import open_source
from .datasets import VerifyResult, scan
from .datasets import verify as verify_bytes
from .progress import bar
from .records import DatasetRecord, FileEntry


def record_store(record: DatasetRecord) -> ObjectStore:
    location = record.location()
    if not location:
        raise UsageError("--from is required: the record has no account/container to read from")
    return open_store(location)


def hash_source(source: ObjectStore) -> list[FileEntry]:
    infos = source.list()
    with bar(sum(i.size for i in infos), "hashing") as progress:
        return scan(source, progress)


def verify(record: DatasetRecord, source: str) -> VerifyResult:
    store = open_source(source) if source else record_store(record)
    with bar(record.total_bytes, "verifying") as progress:
        return verify_bytes(record, store, progress)


def verify_text(result: VerifyResult) -> str:
    lines = [f"{result.name}@{result.version}: {'OK' if result.ok else 'FAILED'}"]
    lines += [f"  {m.path}: {m.problem}" for m in result.mismatches]
    return "\n".join(lines)


def show_text(record: DatasetRecord) -> str:
    rows = [("Name", record.name), ("Version", record.version), ("Purpose", record.purpose),
            ("Assurance", record.assurance), ("Digest", record.digest), ("Files", str(len(record.files))),
            ("Components", str(len(record.components))), ("Total bytes", str(record.total_bytes)),
            ("Location", record.location() or "-"),
            ("Source", " ".join(v for v in (record.source.kind, record.source.repo, record.source.revision) if v)
             or "-"),
            ("Created", record.created_at)]
    section = record.pretrain or record.rl or record.eval
    if section is not None:
        rows += [(f"{record.purpose}.{k}", str(v)) for k, v in attrs.asdict(section).items() if v not in ("", None)]
    rows += [(f"tag {k}", v) for k, v in sorted(record.tags.items())]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k + ':':<{width + 1}} {v}" for k, v in rows)


def ref_json(record: DatasetRecord) -> dict[str, object]:
    files = [{"path": f.path, "bytes": f.bytes, "sha256": f.sha256, "token_count": f.token_count}
             for f in record.files]
    location = record.location()
    return {
        "name": record.name, "version": record.version, "digest": record.digest,
        "manifest": {"location": location, "files": files, "total_bytes": record.total_bytes},
        "recommended": "node_local_stage" if record.purpose == "pretrain" else "durable_mount",
        "modes": {
            "durable_mount": {"location": location, "driver": "blobfuse"},
            "hot_cache": {"location": location, "driver": "lustre"},
            "node_local_stage": {"files": files},
        },
    }


def ref_env(record: DatasetRecord, staged_root: str, base_url: str, prefix: str) -> str:
    if not staged_root and not base_url:
        raise UsageError("-o env requires --staged-root <dir> or --base-url <url>: dataset bytes are private "
                         "and the registry never mints SAS URLs")
    if base_url:
        from tau_core.storage.registry import refuse_credentials

        refuse_credentials(base_url, what="--base-url")
    if not record.files:
        raise UsageError(f"dataset {record.name}@{record.version} has no files to reference")
    root = (staged_root or base_url).rstrip("/")
    uris, shas, tokens = [], [], []
    for entry in record.files:
        if not entry.token_count or entry.token_count <= 0:
            raise UsageError(f"file {entry.path} of {record.name}@{record.version} has no positive token_count")
        uris.append(f"{root}/{entry.path}")
        shas.append(entry.sha256)
        tokens.append(str(entry.token_count))
    return "\n".join([f"{prefix}_URIS={','.join(uris)}", f"{prefix}_SHA256S={','.join(shas)}",
                      f"{prefix}_TOKEN_COUNTS={','.join(tokens)}"])
