"""The local backend's archived log: raw lines under <output>/logs/, rotated past the cap."""

from __future__ import annotations

from pathlib import Path

from tau_core.backends.local.log_archive import LogArchive, archive_path, max_bytes


def test_lines_are_archived_raw_and_rotated_past_the_cap(tmp_path: Path) -> None:
    path = archive_path(tmp_path / "out", "job-1", "main")
    assert path == tmp_path / "out" / "logs" / "job-1-main.log"
    archive = LogArchive(path, limit=20)
    for i in range(5):
        archive.write(f"line {i}\r\n".encode())
    archive.close()
    assert (path.parent / "job-1-main.log.1").read_text() == "line 2\nline 3\n"
    assert path.read_text() == "line 4\n"


def test_an_unwritable_output_gives_up_quietly(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    archive = LogArchive(archive_path(blocker, "job-1", "main"), limit=100)
    archive.write(b"still fine")  # no exception: the run goes on without its archive
    archive.close()


def test_cap_from_the_environment() -> None:
    assert max_bytes({"TAU_LOG_ARCHIVE_MAX_BYTES": "1000"}) == 1000
    assert max_bytes({"TAU_LOG_ARCHIVE_MAX_BYTES": "nonsense"}) == 64 * 1024 * 1024
    assert max_bytes({}) == 64 * 1024 * 1024
