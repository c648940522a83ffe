"""The pytest plugin's session set-up: processes a test starts can be interrupted like a terminal's."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

INNER = '''
import signal, subprocess, sys

def test_a_child_turns_ctrl_c_into_keyboard_interrupt():
    code = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"  # Python installs its handler only where SIGINT was not ignored
'''


def _pytest_with_sigint_ignored(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """Run pytest the way a shell without job control runs a background command: SIGINT ignored."""
    (tmp_path / "test_inner.py").write_text(INNER)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options,
                           str(tmp_path / "test_inner.py")], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


def test_children_of_a_session_started_with_sigint_ignored_can_be_interrupted(tmp_path: Path) -> None:
    result = _pytest_with_sigint_ignored(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_without_the_plugin_the_ignored_sigint_reaches_the_children(tmp_path: Path) -> None:
    """The case the plugin exists for: without it, Ctrl-C tests would wait on a process that ignores SIGINT."""
    result = _pytest_with_sigint_ignored(tmp_path, "-p", "no:tau_testing")
    assert result.returncode == 1 and "assert 'False' == 'True'" in result.stdout, result.stdout + result.stderr
