"""Staged artifact publication for local runs (``storage.publish: staged``).

The run writes into ``TAU_OUTPUT_STAGING_DIR``.  After a zero exit every regular file directly in
the staging directory is hashed, copied into ``<output>/.tau-artifacts/<publication-id>/`` through a
temporary name, moved into place without overwriting, and verified again.  The completion marker
``.tau-artifacts-complete`` (``complete <id>``) is written last, so readers only ever see a complete set.
Directories, symlinks, other special files and the reserved names fail the publication (exit 126 on
the cluster), as do destination files whose content differs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

from tau_core import keys
from tau_core.hashing import file_sha256

GENERATIONS_DIR = keys.ARTIFACTS_DIR
COMPLETION_MARKER = keys.ARTIFACTS_COMPLETE_MARKER
RESERVED = frozenset({GENERATIONS_DIR, COMPLETION_MARKER})
PUBLISH_FAILURE_EXIT = 126


class PublishError(Exception):
    """The staged set could not be published; the message names the file."""


def generation_dir(output: Path, publication_id: str) -> Path:
    return output / GENERATIONS_DIR / publication_id


def publish(staging: Path, output: Path, publication_id: str) -> list[str]:
    """Publish the files in ``staging``; returns the published names."""
    if not publication_id or "/" in publication_id or publication_id in (".", ".."):
        raise PublishError(f"publication id {publication_id!r} must be a single path segment")
    dest = generation_dir(output, publication_id)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / COMPLETION_MARKER).unlink(missing_ok=True)
    published: list[str] = []
    entries = sorted(os.scandir(staging), key=lambda e: e.name) if staging.is_dir() else []
    for entry in entries:
        if entry.name in RESERVED:
            raise PublishError(f"staged entry {entry.name!r} uses a name reserved by tau")
        mode = entry.stat(follow_symlinks=False).st_mode
        if not stat.S_ISREG(mode):
            kind = "symlink" if stat.S_ISLNK(mode) else "directory" if stat.S_ISDIR(mode) else "special file"
            raise PublishError(
                f"staged entry {entry.name!r} is a {kind}; only regular files directly in TAU_OUTPUT_STAGING_DIR "
                "are published (publish directories with an application-owned durable protocol)")
        source = Path(entry.path)
        digest = file_sha256(source)
        target = dest / entry.name
        if target.exists():
            if file_sha256(target) != digest:
                raise PublishError(f"refusing to overwrite non-matching durable artifact {target}")
            published.append(entry.name)
            continue
        tmp = dest / f".tau-publish-{entry.name}.{os.getpid()}"
        shutil.copy2(source, tmp)
        try:
            if file_sha256(tmp) != digest:
                raise PublishError(f"copy of {entry.name!r} does not match its staged digest")
            os.link(tmp, target)  # no-clobber: fails when a concurrent writer got there first
        except FileExistsError:
            if file_sha256(target) != digest:
                raise PublishError(f"refusing to overwrite non-matching durable artifact {target}") from None
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        if file_sha256(target) != digest:
            raise PublishError(f"published {target} changed while it was verified")
        published.append(entry.name)
    marker_tmp = dest / f".{COMPLETION_MARKER}.{os.getpid()}.tmp"
    marker_tmp.write_text(f"complete {publication_id}\n")
    os.replace(marker_tmp, dest / COMPLETION_MARKER)
    return published


def is_complete(output: Path, publication_id: str) -> bool:
    marker = generation_dir(output, publication_id) / COMPLETION_MARKER
    try:
        return marker.read_text().strip() == f"complete {publication_id}"
    except OSError:
        return False
