"""The generated shell and Python snippets, executed for real (bash, python3) in a temp dir."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from tau_core import render_scripts as rs
from tau_run.renderers.rayjob import _PAYLOAD_DECODER, payload_envelope


def run_bash(script: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=60
    )


def test_staged_publication_publishes_verified_files_and_marker(tmp_path: Path) -> None:
    stage, out = tmp_path / "stage", tmp_path / "out"
    out.mkdir()
    w = rs.Wrappers(output=str(out), staging_dir=str(stage), publication_id="pub123")
    core = f"printf 'a' > {stage}/model.bin && printf 'b' > {stage}/.hidden"
    proc = run_bash(rs.compose([], core, w), tmp_path)
    assert proc.returncode == 0, proc.stderr
    dest = out / ".tau-artifacts" / "pub123"
    assert (dest / "model.bin").read_text() == "a" and (dest / ".hidden").read_text() == "b"
    assert (dest / ".tau-artifacts-complete").read_text() == "complete pub123\n"
    assert not list(dest.glob(".tau-publish-*"))


def test_staged_publication_rejects_directories_and_skips_on_failure(tmp_path: Path) -> None:
    stage, out = tmp_path / "stage", tmp_path / "out"
    w = rs.Wrappers(output=str(out), staging_dir=str(stage), publication_id="p1")
    proc = run_bash(rs.compose([], f"mkdir -p {stage}/subdir", w), tmp_path)
    assert proc.returncode == 126 and "not a regular file" in proc.stderr
    assert not (out / ".tau-artifacts" / "p1" / ".tau-artifacts-complete").exists()
    proc = run_bash(rs.compose([], f"printf x > {stage}/f && (exit 3)", w), tmp_path)
    assert proc.returncode == 3
    stage2 = tmp_path / "stage2"
    w = rs.Wrappers(output=str(out), staging_dir=str(stage2), publication_id="p1")
    proc = run_bash(rs.compose([], f"printf x > {stage2}/.tau-artifacts-complete", w), tmp_path)
    assert proc.returncode == 126 and "reserved name" in proc.stderr


def test_staged_publication_refuses_to_overwrite_different_artifact(tmp_path: Path) -> None:
    stage, out = tmp_path / "stage", tmp_path / "out"
    dest = out / ".tau-artifacts" / "p2"
    dest.mkdir(parents=True)
    (dest / "m.bin").write_text("old")
    w = rs.Wrappers(output=str(out), staging_dir=str(stage), publication_id="p2")
    proc = run_bash(rs.compose([], f"printf new > {stage}/m.bin", w), tmp_path)
    assert proc.returncode == 126 and "refusing to overwrite" in proc.stderr
    assert (dest / "m.bin").read_text() == "old"


def test_checkpoint_index_written_only_when_checkpoint_exists(tmp_path: Path) -> None:
    out = tmp_path / "out"
    w = rs.Wrappers(output=str(out), checkpoint="best/model.bin")
    proc = run_bash(rs.compose([], "true", w), tmp_path)
    assert proc.returncode == 1 and "was not written" in proc.stderr
    proc = run_bash(rs.compose([], f"mkdir -p {out}/best && printf m > {out}/best/model.bin", w), tmp_path)
    assert proc.returncode == 0, proc.stderr
    index = json.loads((out / ".tau" / "checkpoint-artifact.json").read_text())
    assert index == {"checkpoint": "best/model.bin", "path": f"{out}/best/model.bin"}


def test_completion_file_records_exit_code(tmp_path: Path) -> None:
    done = tmp_path / "complete"
    w = rs.Wrappers(completion_file=str(done))
    proc = run_bash(rs.compose([], "(exit 7)", w), tmp_path)
    assert proc.returncode == 7
    assert json.loads(done.read_text()) == {"exit_code": 7}


def test_payload_decoder_unpacks_and_verifies(tmp_path: Path) -> None:
    envelope = payload_envelope({"train.py": b"print(1)\n", "pkg/mod.py": b"X = 1\n"})
    target = tmp_path / "script"
    env = {
        "TAU_PAYLOAD_B64": base64.b64encode(envelope).decode(),
        "TAU_PAYLOAD_DIGEST": hashlib.sha256(envelope).hexdigest(),
        "TAU_PAYLOAD_TARGET_DIR": str(target),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _PAYLOAD_DECODER], env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert (target / "train.py").read_text() == "print(1)\n" and (target / "pkg" / "mod.py").read_text() == "X = 1\n"
    env["TAU_PAYLOAD_DIGEST"] = "0" * 64
    proc = subprocess.run(
        [sys.executable, "-c", _PAYLOAD_DECODER], env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0 and "digest mismatch" in proc.stderr


def test_payload_decoder_refuses_escaping_paths(tmp_path: Path) -> None:
    envelope = payload_envelope({"../escape.py": b"x"})
    target = tmp_path / "script"
    env = {
        "TAU_PAYLOAD_B64": base64.b64encode(envelope).decode(),
        "TAU_PAYLOAD_DIGEST": hashlib.sha256(envelope).hexdigest(),
        "TAU_PAYLOAD_TARGET_DIR": str(target),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _PAYLOAD_DECODER], env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0 and "escapes" in proc.stderr
    assert not (tmp_path / "escape.py").exists()


def test_payload_envelope_is_deterministic() -> None:
    assert payload_envelope({"a": b"1", "b": b"2"}) == payload_envelope({"b": b"2", "a": b"1"})


def test_term_reaches_the_workload_and_wrappers_record_it(tmp_path: Path) -> None:
    import signal

    done = tmp_path / "complete"
    core = "bash -c 'trap \"echo got-term; exit 7\" TERM; echo ready; while :; do sleep 0.1; done'"
    script = rs.compose([], core, rs.Wrappers(completion_file=str(done)))
    proc = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert "got-term" in out and proc.returncode == 7
    assert json.loads(done.read_text()) == {"exit_code": 7}


# -- log archiving (logs/<pod>-<container>.log under the output) -----------------------------------------


def test_log_archive_copies_both_streams_and_keeps_them_apart(tmp_path: Path) -> None:
    out = tmp_path / "out"
    script = rs.compose([], "echo to-out; echo to-err >&2; exit 4", rs.Wrappers(output=str(out), log_container="main"))
    proc = run_bash(script, tmp_path, {"TAU_POD_NAME": "train-abc12"})
    assert proc.returncode == 4
    assert proc.stdout == "to-out\n" and proc.stderr == "to-err\n"
    assert sorted((out / "logs" / "train-abc12-main.log").read_text().splitlines()) == ["to-err", "to-out"]


def test_log_archive_rotates_past_the_cap(tmp_path: Path) -> None:
    out = tmp_path / "out"
    core = "for i in $(seq 1 2000); do echo line-$i-padding-padding-padding; done; sleep 2.5; echo after"
    proc = run_bash(rs.compose([], core, rs.Wrappers(output=str(out), log_container="main")), tmp_path,
                    {"TAU_POD_NAME": "p", "TAU_LOG_ARCHIVE_MAX_BYTES": "20000"})
    assert proc.returncode == 0
    rotated, current = out / "logs" / "p-main.log.1", out / "logs" / "p-main.log"
    assert rotated.read_text().splitlines()[-1] == "line-2000-padding-padding-padding"
    assert current.read_text() == "after\n"


def test_log_archive_is_flushed_after_sigterm(tmp_path: Path) -> None:
    import signal

    out = tmp_path / "out"
    core = "bash -c 'trap \"echo stopping-cleanly; exit 143\" TERM; echo ready; while :; do sleep 0.1; done'"
    script = rs.compose([], core, rs.Wrappers(output=str(out), log_container="main"))
    proc = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "TAU_POD_NAME": "p"})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)  # the container runtime signals PID 1 only
        proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143
    assert (out / "logs" / "p-main.log").read_text() == "ready\nstopping-cleanly\n"


def test_log_archive_goes_on_without_a_writable_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    script = rs.compose([], "echo still-runs", rs.Wrappers(output=str(blocker), log_container="main"))
    proc = run_bash(script, tmp_path)
    assert proc.returncode == 0 and proc.stdout == "still-runs\n"
    assert "cannot archive logs" in proc.stderr
