"""Memory limits, process sampling and failure classification for local runs.

A memory limit comes from ``compute.memory_limit`` (else ``compute.memory_request``).  It is enforced
two ways, where the OS allows:

* the child gets ``RLIMIT_AS`` = 2 x limit + :data:`ADDRESS_SPACE_HEADROOM` (virtual address space
  is larger than resident memory: interpreters, shared libraries and thread stacks reserve more than
  they touch), so a runaway allocation fails inside the process with ``MemoryError``;
* the supervisor samples the resident set size of the whole process group and sends ``SIGKILL``
  when it exceeds the limit, as a Kubernetes cgroup would.

Either outcome is classified ``OOMKilled``.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
from pathlib import Path

# FailureReason values (tau_core.lifecycle.base.FailureReason); plain strings keep the supervisor's
# start free of the dataclass-heavy lifecycle module.
COMPLETED, OOM_KILLED, PREEMPTED, UNKNOWN = "Completed", "OOMKilled", "Preempted", "Unknown"

ADDRESS_SPACE_HEADROOM = 512 * 1024 * 1024

_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(Ki|Mi|Gi|Ti|Pi|Ei|k|K|M|G|T|P|E|m)?\s*$")
_FACTORS = {
    None: 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "Pi": 1024**5, "Ei": 1024**6,
    "k": 1000, "K": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4, "P": 1000**5, "E": 1000**6, "m": 0.001,
}


def parse_memory(value: object, field: str = "compute.memory_limit") -> int:
    """A Kubernetes memory quantity (``512Mi``, ``2G``, ``1073741824``) in bytes."""
    from tau_core.errors import ConfigError

    if isinstance(value, bool):
        raise ConfigError(f"{field}: {value!r} is not a memory quantity", hint="use a value such as 512Mi or 2Gi")
    if isinstance(value, int | float):
        return int(value)
    match = _QUANTITY.match(str(value))
    if not match:
        raise ConfigError(f"{field}: {value!r} is not a memory quantity", hint="use a value such as 512Mi or 2Gi")
    number, unit = match.groups()
    amount = int(float(number) * _FACTORS[unit])
    if amount <= 0:
        raise ConfigError(f"{field}: {value!r} must be greater than zero", hint="use a value such as 512Mi or 2Gi")
    return amount


def format_bytes(n: int | float) -> str:
    for unit, size in (("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{int(n)}B"


def set_address_space_limit(limit: int) -> None:
    """Runs in the child between fork and exec: no imports, no locks."""
    soft = 2 * limit + ADDRESS_SPACE_HEADROOM
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY and soft > hard:
        soft = hard
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# -- process sampling ----------------------------------------------------------------------------------

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def start_ticks(pid: int) -> int | None:
    """The process start time in clock ticks (``/proc/<pid>/stat`` field 22); guards against pid reuse."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(raw[raw.rindex(")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def alive(pid: int | None, ticks: int | None = None) -> bool:
    """Is ``pid`` running (and, when ``ticks`` is known, still the same process)?"""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if Path("/proc").is_dir():
        try:
            state = Path(f"/proc/{pid}/stat").read_text()
            if state[state.rindex(")") + 2:].startswith("Z"):
                return False
        except OSError:
            return False
        if ticks is not None:
            return start_ticks(pid) == ticks
    return True


def group_rss(pgid: int) -> int:
    """Resident memory, in bytes, of every process in process group ``pgid``."""
    proc = Path("/proc")
    if not proc.is_dir():
        return _group_rss_ps(pgid)
    total = 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
            fields = raw[raw.rindex(")") + 2:].split()
            if int(fields[2]) != pgid:  # field 5: pgrp
                continue
            total += int(fields[21]) * _PAGE  # field 24: rss in pages
        except (OSError, ValueError, IndexError):
            continue
    return total


def _group_rss_ps(pgid: int) -> int:
    try:
        out = subprocess.run(["ps", "-o", "rss=", "-g", str(pgid)], capture_output=True, text=True,
                             timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(int(x) for x in out.split() if x.isdigit()) * 1024


# -- classification ------------------------------------------------------------------------------------

PREEMPTING_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def classify_exit(returncode: int, *, cancelled: bool, oom_killed: bool, memory_error: bool,
                  limit: int | None, peak_rss: int) -> tuple[str, str, str]:
    """``(state, reason, message)`` for one finished attempt.

    * exit 0 -> ``Succeeded`` / ``Completed``;
    * a cancel requested through tau -> ``Cancelled``;
    * killed by the supervisor over the memory limit, or a ``MemoryError`` under a limit, or a
      ``SIGKILL`` from elsewhere while RSS was within 10% of the limit -> ``OOMKilled``;
    * ``SIGTERM``/``SIGINT``/``SIGHUP`` not sent by tau (a shutdown, a logout) -> ``Preempted``;
    * anything else -> ``Unknown`` (an application failure: read the logs).
    """
    if returncode == 0 and not oom_killed:
        return "Succeeded", COMPLETED, "exit code 0"
    if cancelled:
        return "Cancelled", UNKNOWN, "cancelled through tau run cancel"
    described = describe_returncode(returncode)
    if oom_killed:
        return "Failed", OOM_KILLED, (
            f"OOMKilled: resident memory {format_bytes(peak_rss)} exceeded the limit "
            f"{format_bytes(limit or 0)}; {described}")
    if limit and memory_error:
        return "Failed", OOM_KILLED, (
            f"OOMKilled: the process ran out of memory under the limit {format_bytes(limit)} (MemoryError); "
            f"{described}")
    if returncode < 0:
        sig = -returncode
        if sig == signal.SIGKILL and limit and peak_rss >= 0.9 * limit:
            return "Failed", OOM_KILLED, (
                f"OOMKilled: killed by SIGKILL with resident memory {format_bytes(peak_rss)} near the limit "
                f"{format_bytes(limit)}")
        if sig in PREEMPTING_SIGNALS:
            return "Failed", PREEMPTED, f"Preempted: {described} from outside tau"
    return "Failed", UNKNOWN, described


def describe_returncode(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exit code {returncode}"
