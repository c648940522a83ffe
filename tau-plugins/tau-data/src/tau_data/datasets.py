"""Dataset registry operations on any :class:`~tau_core.storage.ObjectStore`."""

from __future__ import annotations

import builtins
from collections.abc import Callable

import attrs

from tau_core.errors import ConfigError, ConflictError, NotFoundError, TauError, UsageError
from tau_core.output import warning
from tau_core.storage import AlreadyExistsError, ObjectStore, PreconditionFailedError, Versioned, join_key, layout

from .records import DatasetAlias, DatasetRecord, FileEntry, load, now, to_json, validate


@attrs.define
class Mismatch:
    path: str
    problem: str


@attrs.define
class VerifyResult:
    name: str
    version: str
    ok: bool
    record_digest: str
    actual_digest: str
    mismatches: list[Mismatch]


def split_ref(ref: str, *, exact: str = "") -> tuple[str, str]:
    """``NAME[@TOKEN]`` -> (name, token); ``exact`` names the verb that needs an explicit version."""
    name, sep, token = ref.partition("@")
    layout.slug(name, "dataset name")
    if exact and not (sep and token):
        raise UsageError(f"{exact} requires NAME@VERSION (an exact version, not an alias)")
    if token:
        layout.version(token)
    return name, token


class DatasetRegistry:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    # -- reads ----------------------------------------------------------------------------
    def get(self, name: str, version: str) -> DatasetRecord:
        key = layout.dataset_record(name, version)
        try:
            raw = self.store.read(key).data
        except NotFoundError:
            raise NotFoundError(f"dataset {name}@{version} was not found in {self.store.url}",
                                hint=f"list versions with: tau data dataset list --registry {self.store.url}") from None
        record: DatasetRecord = load(raw, DatasetRecord, f"{self.store.url}/{key}")
        return record

    def exists(self, name: str, version: str) -> bool:
        try:
            self.store.read(layout.dataset_record(name, version))
        except NotFoundError:
            return False
        return True

    def resolve(self, ref: str) -> DatasetRecord:
        """Bare NAME means alias ``latest``; NAME@TOKEN tries an exact version first, then an alias."""
        name, token = split_ref(ref)
        if token and self.exists(name, token):
            return self.get(name, token)
        alias = self.alias_get(name, token or "latest")
        return self.get(name, alias.version)

    def list(self, purpose: str = "", tags: dict[str, str] | None = None) -> list[DatasetRecord]:
        out = []
        for info in self.store.list(layout.DATASETS):
            if not info.key.endswith("/" + layout.DATASET_RECORD):
                continue
            try:
                record: DatasetRecord = load(self.store.read(info.key).data, DatasetRecord, info.key)
            except TauError as exc:
                warning(f"skipping {info.key}: {exc}")
                continue
            if purpose and record.purpose != purpose:
                continue
            if tags and any(record.tags.get(k) != v for k, v in tags.items()):
                continue
            out.append(record)
        return sorted(out, key=lambda r: (r.name, r.version))

    def aliases(self, name: str) -> builtins.list[tuple[DatasetAlias, str]]:
        found = []
        for info in self.store.list(layout.dataset_aliases(name)):
            versioned = self.store.read(info.key)
            found.append((load(versioned.data, DatasetAlias, info.key), versioned.etag))
        return found

    def _alias_versioned(self, name: str, alias: str) -> Versioned | None:
        try:
            return self.store.read(layout.dataset_alias(name, alias))
        except NotFoundError:
            return None

    def is_alias(self, name: str, token: str) -> bool:
        try:
            return self._alias_versioned(name, layout.slug(token, "alias")) is not None
        except UsageError:
            return False

    def alias_get(self, name: str, alias: str) -> DatasetAlias:
        versioned = self._alias_versioned(name, alias)
        if versioned is None:
            raise NotFoundError(f"dataset {name} has no version or alias {alias!r}",
                                hint=f"set one with: tau data dataset alias set {name} {alias} VERSION")
        record: DatasetAlias = load(versioned.data, DatasetAlias, layout.dataset_alias(name, alias))
        return record

    # -- writes ---------------------------------------------------------------------------
    def register(self, record: DatasetRecord) -> str:
        validate(record)
        key = layout.dataset_record(record.name, record.version)
        try:
            self.store.create(key, to_json(record))
        except AlreadyExistsError:
            raise ConflictError(f"{record.ref} already exists; datasets are immutable "
                                "(register a new version)") from None
        return key

    def alias_set(self, name: str, alias: str, version: str, *, expect: str | None = None,
                  expect_absent: bool = False) -> DatasetAlias:
        target = self.get(name, version)
        current = self._alias_versioned(name, alias)
        pointed = load(current.data, DatasetAlias, alias).version if current else None
        if expect_absent and current is not None:
            raise ConflictError(f"alias {name}:{alias} already exists (points at {pointed}); "
                                "--expect-absent not satisfied")
        if expect is not None and current is None:
            raise ConflictError(f"alias {name}:{alias} does not exist; --expect {expect} not satisfied")
        if expect is not None and pointed != expect:
            raise ConflictError(f"alias {name}:{alias} points at {pointed}, not {expect}; compare-and-swap aborted")
        record = DatasetAlias(name=name, alias=alias, version=version, digest=target.digest,
                              record_path=layout.dataset_record(name, version), updated_at=now())
        try:
            self.store.swap(layout.dataset_alias(name, alias), to_json(record), current.etag if current else None)
        except PreconditionFailedError:
            raise ConflictError(f"alias {name}:{alias} was changed by another writer; compare-and-swap aborted",
                                hint=f"re-read it with `tau data dataset alias get {name} {alias}` and retry") from None
        return record

    def alias_remove(self, name: str, alias: str, expect: str | None = None) -> DatasetAlias:
        current = self._alias_versioned(name, alias)
        if current is None:
            raise NotFoundError(f"alias {name}:{alias} does not exist")
        record: DatasetAlias = load(current.data, DatasetAlias, alias)
        if expect is not None and record.version != expect:
            raise ConflictError(f"alias {name}:{alias} points at {record.version}, not {expect}; "
                                "compare-and-swap aborted")
        try:
            self.store.delete(layout.dataset_alias(name, alias), expect=current.etag)
        except PreconditionFailedError:
            raise ConflictError(f"alias {name}:{alias} was changed by another writer; not removed") from None
        return record

    def remove(self, name: str, version: str) -> None:
        self.get(name, version)
        try:
            aliases = self.aliases(name)
        except TauError as exc:
            raise TauError(f"cannot scan the aliases of {name}; not removing {name}@{version}: {exc}") from None
        for alias, _etag in aliases:
            if alias.version == version:
                raise ConflictError(f"dataset {name}@{version} is referenced by alias {alias.alias!r}; "
                                    "move or delete the alias first")
        for key in (layout.dataset_status(name, version), layout.dataset_record(name, version)):
            try:
                self.store.delete(key)
            except NotFoundError:
                pass


def scan(source: ObjectStore, progress: Callable[[int], None] | None = None) -> list[FileEntry]:
    """Hash every object of ``source`` (streaming) into file entries."""
    files = []
    for info in source.list():
        sha, size = source.hash(info.key, progress)
        if size == 0:
            raise ConfigError(f"file {info.key} in {source.url} is empty; every file must have bytes > 0")
        files.append(FileEntry(path=info.key, bytes=size, sha256=sha))
    return files


def verify(record: DatasetRecord, source: ObjectStore,
           progress: Callable[[int], None] | None = None) -> VerifyResult:
    from .records import compute_digest

    present = {info.key: info for info in source.list()}
    mismatches: list[Mismatch] = []
    actual: list[FileEntry] = []
    for entry in record.files:
        if entry.path not in present:
            mismatches.append(Mismatch(entry.path, "missing from source"))
            continue
        sha, size = source.hash(entry.path, progress)
        actual.append(FileEntry(path=entry.path, bytes=size, sha256=sha))
        if size != entry.bytes:
            mismatches.append(Mismatch(entry.path, f"bytes {entry.bytes} != {size}"))
        elif sha != entry.sha256:
            mismatches.append(Mismatch(entry.path, f"sha256 {entry.sha256} != {sha}"))
    recorded = {e.path for e in record.files}
    mismatches += [Mismatch(k, "extra file in source (not in record)") for k in sorted(present) if k not in recorded]
    digest = compute_digest(actual) if actual else ""
    return VerifyResult(record.name, record.version, not mismatches, record.digest, digest, mismatches)


def source_key(prefix: str, path: str) -> str:
    return join_key(prefix, path)
