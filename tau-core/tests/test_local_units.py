"""Pure pieces of the local backend: quantities, durations, classification, paths, publication, logs."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tau_core.backends.local import artifacts, oom, paths, publish
from tau_core.backends.local.backend import _format_line, _tail_offset
from tau_core.backends.local.env import parse_duration
from tau_core.backends.local.registry import RunDir, find_run
from tau_core.errors import ConfigError, NotFoundError, UsageError
from tau_core.fsutil import write_json_atomic
from tau_core.lifecycle.base import FailureReason


@pytest.mark.parametrize(("text", "expected"), [
    ("512Mi", 512 * 1024**2), ("2Gi", 2 * 1024**3), ("1G", 10**9), ("1500k", 1_500_000), (1024, 1024),
    ("64Mi", 64 * 1024**2), ("0.5Gi", 512 * 1024**2),
])
def test_parse_memory(text: object, expected: int) -> None:
    assert oom.parse_memory(text) == expected


@pytest.mark.parametrize("bad", ["lots", "12XB", "", True, "-1Gi", "0"])
def test_parse_memory_rejects_garbage_naming_the_field(bad: object) -> None:
    with pytest.raises(ConfigError) as err:
        oom.parse_memory(bad, "compute.memory_limit")
    assert "compute.memory_limit" in err.value.message and err.value.hint


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("5m", 300), ("1m30s", 90), ("250ms", 0.25), (2, 2),
                                               ("1h", 3600)])
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text, "resilience.backoff_initial") == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["soon", "10 s", "5x", "s"])
def test_parse_duration_rejects(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"resilience\.backoff_max"):
        parse_duration(bad, "resilience.backoff_max")


def test_classification_rules() -> None:
    limit = 100 * 1024**2
    c = oom.classify_exit
    assert c(0, cancelled=False, oom_killed=False, memory_error=False, limit=None, peak_rss=0)[:2] == \
        ("Succeeded", FailureReason.COMPLETED)
    assert c(-signal.SIGTERM, cancelled=True, oom_killed=False, memory_error=False, limit=None, peak_rss=0)[0] == \
        "Cancelled"
    assert c(-signal.SIGKILL, cancelled=False, oom_killed=True, memory_error=False, limit=limit,
             peak_rss=2 * limit)[1] == FailureReason.OOM_KILLED
    assert c(1, cancelled=False, oom_killed=False, memory_error=True, limit=limit, peak_rss=0)[1] == \
        FailureReason.OOM_KILLED
    # a MemoryError without any configured limit is the application's own failure
    assert c(1, cancelled=False, oom_killed=False, memory_error=True, limit=None, peak_rss=0)[1] == \
        FailureReason.UNKNOWN
    assert c(-signal.SIGKILL, cancelled=False, oom_killed=False, memory_error=False, limit=limit,
             peak_rss=int(0.95 * limit))[1] == FailureReason.OOM_KILLED
    assert c(-signal.SIGTERM, cancelled=False, oom_killed=False, memory_error=False, limit=None,
             peak_rss=0)[1] == FailureReason.PREEMPTED
    state, reason, message = c(3, cancelled=False, oom_killed=False, memory_error=False, limit=None, peak_rss=0)
    assert (state, reason, message) == ("Failed", FailureReason.UNKNOWN, "exit code 3")


def test_paths_follow_tau_data_dir_then_xdg(tmp_path: Path) -> None:
    assert paths.runs_root({"TAU_DATA_DIR": str(tmp_path / "d")}) == tmp_path / "d" / "runs"
    assert paths.runs_root({"XDG_DATA_HOME": str(tmp_path / "x")}) == tmp_path / "x" / "tau" / "runs"
    assert paths.runs_root({"HOME": str(tmp_path)}) == tmp_path / ".local" / "share" / "tau" / "runs"
    env = {"TAU_DATA_DIR": str(tmp_path)}
    assert paths.map_container_path("/data/projects/x", env) == tmp_path / "data" / "projects" / "x"
    assert paths.map_container_path("/mnt/tau-output/x", env) == tmp_path / "hot" / "tau-output" / "x"
    assert paths.map_container_path("/database", env) == Path("/database")
    run_id = paths.new_run_id("My_Train Target")
    assert paths.RUN_ID_RE.match(run_id) and run_id.startswith("my-train-target-")


def test_find_run_refuses_path_like_names(tmp_path: Path) -> None:
    env = {"TAU_DATA_DIR": str(tmp_path)}
    for name in ("../x", "/etc", ".", "..", "a\0b", ""):
        assert find_run(name, env) is None


def test_atomic_json_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2})
    assert RunDir(tmp_path).read() == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


@pytest.mark.parametrize("hostile", ["../secret", "a/../../secret", "/etc/passwd", "a\0b", "", "~/x", "a\\..\\b"])
def test_hostile_artifacts_are_refused(tmp_path: Path, hostile: str) -> None:
    with pytest.raises(UsageError):
        artifacts.resolve(tmp_path, hostile)


def test_symlink_escaping_the_root_is_refused_but_inner_links_work(tmp_path: Path) -> None:
    root = tmp_path / "out"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "ok.txt").write_text("ok")
    (tmp_path / "secret.txt").write_text("secret")
    os.symlink(tmp_path / "secret.txt", root / "leak.txt")
    os.symlink(tmp_path, root / "up")
    os.symlink(root / "sub" / "ok.txt", root / "inner.txt")
    with pytest.raises(UsageError, match="outside"):
        artifacts.resolve(root, "leak.txt")
    with pytest.raises(UsageError, match="outside"):
        artifacts.resolve(root, "up/secret.txt")
    assert artifacts.resolve(root, "inner.txt").read_text() == "ok"
    with pytest.raises(NotFoundError):
        artifacts.resolve(root, "missing.txt")
    listed = {e["path"]: e["type"] for e in artifacts.listing(root)}
    assert listed["sub/ok.txt"] == "file"
    assert listed["leak.txt"].startswith("symlink (outside")
    assert listed["up"] == "symlink"


def test_staged_publication_and_its_refusals(tmp_path: Path) -> None:
    staging, out = tmp_path / "staging", tmp_path / "out"
    staging.mkdir()
    (staging / "model.bin").write_bytes(b"weights")
    (staging / "report.json").write_text("{}")
    assert publish.publish(staging, out, "abc123") == ["model.bin", "report.json"]
    assert publish.is_complete(out, "abc123")
    gen = publish.generation_dir(out, "abc123")
    assert (gen / ".tau-artifacts-complete").read_text() == "complete abc123\n"
    assert (gen / "model.bin").read_bytes() == b"weights"
    # republishing identical content is a no-op; different content is refused
    assert publish.publish(staging, out, "abc123") == ["model.bin", "report.json"]
    (staging / "model.bin").write_bytes(b"other")
    with pytest.raises(publish.PublishError, match="non-matching"):
        publish.publish(staging, out, "abc123")
    bad = tmp_path / "bad"
    (bad / "dir").mkdir(parents=True)
    with pytest.raises(publish.PublishError, match="directory"):
        publish.publish(bad, out, "def456")
    assert not publish.is_complete(out, "def456")
    link = tmp_path / "link"
    link.mkdir()
    os.symlink("/etc/passwd", link / "passwd")
    with pytest.raises(publish.PublishError, match="symlink"):
        publish.publish(link, out, "ghi789")
    reserved = tmp_path / "reserved"
    reserved.mkdir()
    (reserved / ".tau-artifacts-complete").write_text("x")
    with pytest.raises(publish.PublishError, match="reserved"):
        publish.publish(reserved, out, "jkl012")


def test_tail_offsets(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_bytes(b"".join(f"2026-01-01T00:00:00.000000Z line {i}\n".encode() for i in range(1000)))
    with open(log, "rb") as fh:
        fh.seek(_tail_offset(fh, 3))
        lines = fh.read().decode().splitlines()
    assert [_format_line(x.encode(), False) for x in lines] == ["line 997", "line 998", "line 999"]
    assert _format_line(b"2026-01-01T00:00:00.000000Z hello", True).startswith("2026-")
    assert _format_line(b"no stamp here", False) == "no stamp here"
    with open(log, "rb") as fh:
        assert _tail_offset(fh, 5000) == 0


def test_damaged_registry_entries_give_one_line_errors(tmp_path: Path) -> None:
    from tau_core.backends.local.backend import LocalBackend
    from tau_core.lifecycle import LogOptions, RunRef

    env = {"TAU_DATA_DIR": str(tmp_path)}
    runs = tmp_path / "runs"
    (runs / "broken-1").mkdir(parents=True)
    (runs / "broken-1" / "run.json").write_text('{"state": "Runn')  # half-written by something else
    (runs / "nolog-1").mkdir()
    write_json_atomic(runs / "nolog-1" / "run.json", {"run_id": "nolog-1", "state": "Succeeded",
                                                       "created_at": "2026-01-01T00:00:00.000000Z"})
    backend = LocalBackend(env=env)
    with pytest.raises(NotFoundError, match="unreadable"):
        backend.status(RunRef("broken-1", "local"))
    assert [s.ref.name for s in backend.list()] == ["nolog-1"]
    with pytest.raises(NotFoundError, match="log"):
        list(backend.logs(RunRef("nolog-1", "local"), LogOptions()))
    assert (runs / "broken-1" / "run.json").read_text() == '{"state": "Runn'  # left as it was


def test_a_supervisor_that_never_started_is_reported(tmp_path: Path) -> None:
    from tau_core.backends.local.backend import LocalBackend
    from tau_core.lifecycle import RunRef

    env = {"TAU_DATA_DIR": str(tmp_path)}
    run = tmp_path / "runs" / "stuck-1"
    run.mkdir(parents=True)
    write_json_atomic(run / "run.json", {"run_id": "stuck-1", "state": "Submitted", "history": [],
                                         "created_at": "2020-01-01T00:00:00.000000Z",
                                         "updated_at": "2020-01-01T00:00:00.000000Z"})
    st = LocalBackend(env=env).status(RunRef("stuck-1", "local"))
    assert st.terminal and st.failure is FailureReason.UNKNOWN and "never started" in st.message
    assert st.phases[1].state == "warning"


def test_exact_lookup_ignores_target_names(tmp_path: Path) -> None:
    from tau_core.backends.local.backend import LocalBackend

    env = {"TAU_DATA_DIR": str(tmp_path)}
    run = tmp_path / "runs" / "train-261202-000000-abcd"
    run.mkdir(parents=True)
    write_json_atomic(run / "run.json", {"run_id": run.name, "name": "train", "state": "Succeeded",
                                         "created_at": "2026-01-01T00:00:00.000000Z"})
    backend = LocalBackend(env=env)
    assert backend.owns("train") and backend.owns(run.name)
    assert backend.owns(run.name, exact=True) and not backend.owns("train", exact=True)
    assert not backend.owns("other")


def test_a_submitter_that_died_before_spawning_is_reported_at_once(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tau_core.backends.local.backend import LocalBackend
    from tau_core.backends.local.registry import now_iso
    from tau_core.lifecycle import RunRef

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    env = {"TAU_DATA_DIR": str(tmp_path)}
    run = tmp_path / "runs" / "orphan-1"
    run.mkdir(parents=True)
    write_json_atomic(run / "run.json", {"run_id": "orphan-1", "state": "Submitted", "created_at": now_iso(),
                                         "updated_at": now_iso(), "submitter": {"pid": int(dead.stdout)}})
    st = LocalBackend(env=env).status(RunRef("orphan-1", "local"))
    assert st.terminal and "exited before starting it" in st.message
