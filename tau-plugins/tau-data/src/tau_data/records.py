"""Dataset registry records (``dataset.json`` schema_version 1, alias and ingest-status records)."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

import attrs
import cattrs

from tau_core.errors import ConfigError, UsageError
from tau_core.storage import check_key

SCHEMA_VERSION = 1
PURPOSES = ("pretrain", "rl", "eval")
ASSURANCES = ("verified", "manifest-supplied", "trusted")
RL_KINDS = ("prompts", "preferences", "trajectories")
SPLITS = ("train", "validation", "test")
UINT16 = "tokenized-bin-uint16"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")

converter = cattrs.Converter(omit_if_default=False, forbid_extra_keys=False)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@attrs.define
class Source:
    kind: str = ""
    repo: str = ""
    revision: str = ""
    config: str = ""


@attrs.define
class FileEntry:
    path: str
    bytes: int
    sha256: str
    token_count: int | None = None
    source: str = ""
    domain: str = ""
    split: str = ""


@attrs.define
class Component:
    source: str = ""
    domain: str = ""
    split: str = ""
    license: str = ""
    provenance: str = ""


@attrs.define
class Pretrain:
    tokenizer: str = ""
    format: str = UINT16
    total_tokens: int | None = None
    sequence_packing: str = ""


@attrs.define
class Rl:
    kind: str = "prompts"
    policy_run: str = ""
    reward_model: str = ""
    schema: str = ""


@attrs.define
class Eval:
    task: str = ""
    split: str = ""
    metric: str = ""


@attrs.define
class DatasetRecord:
    name: str
    version: str
    purpose: str
    files: list[FileEntry]
    total_bytes: int
    digest: str
    assurance: str
    created_at: str
    schema_version: int = SCHEMA_VERSION
    source: Source = attrs.Factory(Source)
    #: where the bytes live: az account/container/prefix, or ``uri`` for any other backend (file://...)
    account: str = ""
    container: str = ""
    prefix: str = ""
    uri: str = ""
    tags: dict[str, str] = attrs.Factory(dict)
    components: list[Component] = attrs.Factory(list)
    pretrain: Pretrain | None = None
    rl: Rl | None = None
    eval: Eval | None = None

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    def location(self) -> str:
        if self.account and self.container:
            return f"az://{self.account}/{self.container}" + (f"/{self.prefix}" if self.prefix else "")
        return self.uri


@attrs.define
class DatasetAlias:
    name: str
    alias: str
    version: str
    digest: str
    record_path: str
    updated_at: str
    schema_version: int = SCHEMA_VERSION


@attrs.define
class CompletedFile:
    path: str
    sha256: str
    bytes: int
    committed_at: str


@attrs.define
class IngestStatus:
    name: str
    version: str
    record_digest: str
    state: str  # registered | ingesting | ready | failed
    source_root: str
    destination: str
    attempt_id: str
    started_at: str
    updated_at: str
    completed_files: list[CompletedFile] = attrs.Factory(list)
    verified_bytes: int = 0
    verified_files: int = 0
    failure_summary: str = ""
    schema_version: int = SCHEMA_VERSION


def compute_digest(files: list[FileEntry]) -> str:
    lines = sorted(f"{f.sha256.lower()}  {f.path}" for f in files)
    return "sha256:" + hashlib.sha256("\n".join(lines).encode()).hexdigest()


def to_json(value: Any) -> bytes:
    data = converter.unstructure(value)
    if isinstance(value, DatasetRecord):
        for section in ("pretrain", "rl", "eval"):
            if data.get(section) is None:
                data.pop(section, None)
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def load(raw: bytes, cls: type[Any], source: str) -> Any:
    try:
        return converter.structure(json.loads(raw), cls)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except Exception as exc:
        detail = "; ".join(cattrs.transform_error(exc)) if isinstance(exc, cattrs.BaseValidationError) else str(exc)
        raise ConfigError(f"{source}: {detail}") from None


def _check_files(files: list[FileEntry], fmt: str | None, assurance: str) -> None:
    if not files:
        raise ConfigError("files must be non-empty")
    seen: set[str] = set()
    for entry in files:
        check_key(entry.path, what="file path")
        if entry.path in seen:
            raise ConfigError(f"file path {entry.path!r} appears twice")
        seen.add(entry.path)
        if entry.bytes <= 0:
            raise ConfigError(f"file {entry.path}: bytes must be > 0, got {entry.bytes}")
        if not _HEX64.match(entry.sha256):
            raise ConfigError(f"file {entry.path}: sha256 must be 64 lowercase hex characters")
        if fmt == UINT16 and assurance == "verified":
            if entry.bytes % 2:
                raise ConfigError(f"file {entry.path} has odd byte count {entry.bytes} but format is {fmt} (uint16)")
            if entry.token_count not in (None, entry.bytes // 2):
                raise ConfigError(f"file {entry.path}: token_count {entry.token_count} != bytes/2")
        if entry.split and entry.split not in SPLITS:
            raise ConfigError(f"file {entry.path}: split {entry.split!r} must be one of: {', '.join(SPLITS)}")


def validate(record: DatasetRecord) -> DatasetRecord:
    """Every rule a record must satisfy before it is written (ConfigError naming the field)."""
    if record.purpose not in PURPOSES:
        raise UsageError(f"purpose {record.purpose!r} must be one of: {', '.join(PURPOSES)}")
    if record.assurance not in ASSURANCES:
        raise UsageError(f"assurance {record.assurance!r} must be one of: {', '.join(ASSURANCES)}")
    sections = [s for s in (record.pretrain, record.rl, record.eval) if s is not None]
    if len(sections) != 1:
        raise ConfigError(f"exactly one purpose section (pretrain|rl|eval) must be present, found {len(sections)}")
    if getattr(record, record.purpose) is None:
        raise ConfigError(f"purpose {record.purpose!r} needs its {record.purpose} section")
    if record.rl is not None and record.rl.kind not in RL_KINDS:
        raise UsageError(f"rl.kind {record.rl.kind!r} must be one of: {', '.join(RL_KINDS)}")
    fmt = record.pretrain.format if record.pretrain else None
    _check_files(record.files, fmt, record.assurance)
    total = sum(f.bytes for f in record.files)
    if record.total_bytes != total:
        raise ConfigError(f"total_bytes={record.total_bytes} does not match sum of files={total}")
    computed = compute_digest(record.files)
    if record.digest != computed:
        raise ConfigError(f"digest {record.digest!r} does not match computed {computed!r}")
    if record.pretrain and record.pretrain.total_tokens is not None:
        tokens = sum(f.token_count or 0 for f in record.files)
        if record.pretrain.total_tokens != tokens:
            raise ConfigError(f"pretrain.total_tokens={record.pretrain.total_tokens} does not match sum={tokens}")
    return record
