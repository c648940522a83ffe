"""Hashing and canonical JSON, defined once.

Every digest Tau stamps or compares (the ``tau.azure.com/config-hash`` annotation, payload and
script digests, derived publication and metrics-session ids, descriptor and profile-set
digests, file digests) is computed here, so two places can never disagree on the encoding.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_CHUNK = 1024 * 1024


def sha256_hex(data: bytes | str) -> str:
    """Hex SHA-256 of ``data`` (text is UTF-8 encoded)."""
    if isinstance(data, str):
        data = data.encode()
    return hashlib.sha256(data).hexdigest()


def canonical_json(value: Any, *, ascii_only: bool = False) -> str:
    """Deterministic JSON: sorted keys, no whitespace, non-ASCII kept unless ``ascii_only``."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii_only, default=str)


def plain(value: Any) -> Any:
    """``value`` with every mapping turned into a dict with string keys and every tuple into a list."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def config_hash(config: Mapping[str, Any]) -> str:
    """The ``tau.azure.com/config-hash`` value: SHA-256 of the normalized config's canonical JSON (decision 11)."""
    return sha256_hex(canonical_json(plain(config)))


def prefixed_digest(value: Any, *, ascii_only: bool = False) -> str:
    """``sha256:<hex>`` over the canonical JSON of ``value`` (the workspace descriptor digest)."""
    return "sha256:" + sha256_hex(canonical_json(value, ascii_only=ascii_only))


def derived_id(*parts: str, length: int = 24) -> str:
    """A deterministic hex id derived from ``parts`` (publication ids, metrics sessions)."""
    return sha256_hex("\x00".join(parts))[:length]


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()
