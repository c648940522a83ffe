"""Small shared helpers: timestamps, identifiers, hashing and atomic file writes."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

from tau_core import hashing
from tau_core.errors import UsageError

ID_RE = re.compile(r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")
ID_CHARS_RE = re.compile(r"^[a-z0-9._-]+$")
STAGING_DIR = ".staging"


def now() -> datetime:
    return datetime.now(UTC)


def fmt_time(value: datetime) -> str:
    """RFC3339 in UTC with microseconds, so text order equals time order."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_text() -> str:
    return fmt_time(now())


def parse_time(text: str, *, what: str = "time") -> datetime:
    """Parse an RFC3339 timestamp (``Z`` or an offset)."""
    raw = text.strip()
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(f"{what} {text!r} must be RFC3339", hint="for example 2026-01-31T12:00:00Z") from None
    if value.tzinfo is None:
        raise UsageError(f"{what} {text!r} must be RFC3339 with a time zone", hint="append Z for UTC")
    return value.astimezone(UTC)


def normalize_time(text: str | None, *, what: str = "time") -> str | None:
    return None if text in (None, "") else fmt_time(parse_time(text, what=what))


_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")


def parse_since(text: str, *, reference: datetime | None = None) -> datetime:
    """``--since``: RFC3339, a Go-style duration (``90m``, ``1h30m``) or ``Nd`` (float days)."""
    ref = reference or now()
    raw = text.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)d", raw)
    if m:
        return ref - timedelta(days=float(m.group(1)))
    if raw and _DURATION_RE.sub("", raw) == "":
        units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
        seconds = sum(float(n) * units[u] for n, u in _DURATION_RE.findall(raw))
        return ref - timedelta(seconds=seconds)
    try:
        return parse_time(raw, what="since")
    except UsageError:
        raise UsageError(
            f"since {text!r} must be RFC3339, a duration such as 36h, or Nd",
            hint="for example --since 7d, --since 12h or --since 2026-01-31T00:00:00Z",
        ) from None


def validate_id(kind: str, value: str | None) -> str:
    """Project, experiment, group and run identifiers: lowercase ``a-z0-9`` with internal ``-_.``."""
    if value is None or value == "":
        raise UsageError(f"{kind} is required")
    if not ID_CHARS_RE.match(value):
        raise UsageError(
            f"{kind} {value!r} is invalid (use lowercase alphanumerics with internal '-', '_' or '.')",
            hint="for example train-042 or resnet.baseline",
        )
    if not ID_RE.match(value):
        raise UsageError(f"{kind} {value!r} is invalid (must start and end with an alphanumeric)")
    if len(value) > 253:
        raise UsageError(f"{kind} {value!r} is longer than 253 characters")
    return value


canonical_json = hashing.canonical_json


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def request_hash(data: Any) -> str:
    return sha256_text(canonical_json(data))


def file_sha256(path: Path, bufsize: int = 1 << 20) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(bufsize):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_name(target: Path) -> str:
    """A dot-prefixed temp name that carries the writer's pid (so stale ones can be swept)."""
    return f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


@contextmanager
def atomic_open(target: Path, mode: int = 0o644) -> Iterator[BinaryIO]:
    """Write ``target`` through a temp file in the same directory, then rename it into place.

    Readers see either the old file or the complete new one, never a partial one.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / temp_name(target)
    fh = open(tmp, "wb")
    try:
        yield fh
        fh.flush()
        os.fsync(fh.fileno())
        fh.close()
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    except BaseException:
        fh.close()
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(target: Path, data: bytes, mode: int = 0o644) -> None:
    with atomic_open(target, mode) as fh:
        fh.write(data)


def atomic_write_json(target: Path, data: Any) -> None:
    atomic_write_bytes(target, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def safe_segment(value: str, *, what: str) -> str:
    """A single path segment that cannot climb out of its directory."""
    if (
        value in ("", ".", "..")
        or "/" in value
        or "\\" in value
        or "\x00" in value
        or value != value.strip()
        or len(value) > 255
    ):
        raise UsageError(f"{what} {value!r} is not a valid single path segment")
    return value


def inside(root: Path, candidate: Path) -> bool:
    """True when ``candidate`` (after resolving symlinks) lies inside ``root``."""
    try:
        candidate.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True
