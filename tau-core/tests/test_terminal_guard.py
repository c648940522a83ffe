"""Terminal sanitising (E17) and typed OS errors (C) at the CLI edge (issue 19)."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from tau_core.cli import run
from tau_core.output import TerminalGuard, clip, sanitize

HOSTILE = "a\x1b]0;PWNED\x07b\x1b[2J\r\x9b31m\x00\x7f"


def test_sanitize_shows_control_characters_in_caret_notation() -> None:
    assert sanitize(HOSTILE) == "a^[]0;PWNED^Gb^[[2J^M\\x9b31m^@^?"
    assert sanitize("tab\tand\nnewline\r\n") == "tab\tand\nnewline\n"


def test_only_plain_colour_passes_and_only_when_asked() -> None:
    red = "\x1b[1;31merror\x1b[0m"
    assert sanitize(red, keep_color=True) == red
    assert sanitize(red) == "^[[1;31merror^[[0m"
    assert sanitize("\x1b]52;c;cHduZWQ=\x07" + red, keep_color=True) == "^[]52;c;cHduZWQ=^G" + red


def test_clip() -> None:
    assert clip("k" * 10) == "k" * 10
    assert clip("k" * 900_000).endswith("... (900000 characters)") and len(clip("k" * 900_000)) < 300


def test_guard_wraps_text_and_leaves_binary_alone() -> None:
    raw = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    guard = TerminalGuard(raw)
    guard.write(HOSTILE)
    guard.buffer.write(b"\x1b binary artifact bytes")  # -o raw goes to .buffer, untouched
    raw.flush()
    data = raw.buffer.getvalue()
    assert b"\x1b]0;" not in data.split(b"\x1b binary")[0] and b"\x1b binary artifact bytes" in data


def test_every_command_output_passes_the_guard(capsys: pytest.CaptureFixture[str]) -> None:
    @click.command()
    def echo_hostile() -> None:
        click.echo(HOSTILE)
        print(HOSTILE, file=sys.stderr)
        raise click.ClickException(HOSTILE)

    assert run(echo_hostile, []) == 1
    out, err = capsys.readouterr()
    for text in (out, err):
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text, repr(text)
    assert "^[]0;PWNED^G" in out


@pytest.mark.parametrize(("code", "hint"), [(errno.EROFS, "read-only"), (errno.ENOSPC, "disk is full"),
                                            (errno.ENAMETOOLONG, "shorter"), (errno.EACCES, "permissions")])
def test_os_errors_are_typed_at_the_edge(capsys: pytest.CaptureFixture[str], code: int, hint: str) -> None:
    @click.command()
    def fails() -> None:
        raise OSError(code, os.strerror(code), "/some/file")

    assert run(fails, []) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {os.strerror(code)}: /some/file\n") and hint in err
    assert "internal error" not in err


def test_read_only_data_dir_names_the_setting(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = {**os.environ, "TAU_DATA_DIR": str(blocker / "data"), "NO_COLOR": "1"}
    r = subprocess.run([sys.executable, "-c", "from tau_core.cli import main; main()", "run", "train", "--local"],
                       cwd=Path(__file__).resolve().parents[2] / "examples" / "quickstart", env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "the tau data directory" in r.stderr and "TAU_DATA_DIR" in r.stderr and "internal error" not in r.stderr
