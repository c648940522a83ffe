"""The local run registry: one directory per run, state kept in atomically replaced JSON files.

``<runs root>/<run-id>/``

* ``run.json`` - the run record (state, transitions, attempts, evidence); written with temp+rename under
  an exclusive ``flock`` on ``.lock``, so readers always see a complete document;
* ``request.json`` - what the supervisor runs (argv, environment, limits, retry policy); mode 0600;
* ``output.log`` - stdout and stderr of every attempt, merged, one timestamped line each;
* ``cancel`` - present once a cancel was requested;
* ``supervisor.log`` - the supervisor's own diagnostics.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tau_core.backends.local import paths
from tau_core.errors import NotFoundError
from tau_core.fsutil import write_json_atomic

SCHEMA = "tau.local.run.v1"
RUN_FILE = "run.json"
REQUEST_FILE = "request.json"
LOG_FILE = "output.log"
CANCEL_FILE = "cancel"
SUPERVISOR_LOG = "supervisor.log"

#: states a run record can be in; the last three are terminal.
STATES = ("Submitted", "Started", "Running", "BackingOff", "Succeeded", "Failed", "Cancelled")
TERMINAL = frozenset({"Succeeded", "Failed", "Cancelled"})


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def read_json(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data


class RunDir:
    """One run's directory in the registry."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def run_file(self) -> Path:
        return self.path / RUN_FILE

    @property
    def request_file(self) -> Path:
        return self.path / REQUEST_FILE

    @property
    def log_file(self) -> Path:
        return self.path / LOG_FILE

    @property
    def cancel_file(self) -> Path:
        return self.path / CANCEL_FILE

    @property
    def supervisor_log(self) -> Path:
        return self.path / SUPERVISOR_LOG

    def exists(self) -> bool:
        return self.run_file.is_file()

    def read(self) -> dict[str, Any]:
        try:
            return read_json(self.run_file)
        except FileNotFoundError as exc:
            raise NotFoundError(f"local run '{self.run_id}' has no record ({self.run_file})",
                                hint="run `tau run list` to see the local runs") from exc
        except (OSError, ValueError) as exc:
            raise NotFoundError(f"local run record {self.run_file} is unreadable: {exc}",
                                hint="the file was damaged outside tau; remove the run directory to forget it") from exc

    def request(self) -> dict[str, Any]:
        return read_json(self.request_file)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def update(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Read-modify-write ``run.json`` under the run's lock."""
        with self.locked():
            record = self.read()
            change(record)
            record["updated_at"] = now_iso()
            write_json_atomic(self.run_file, record)
            return record

    def transition(self, state: str, detail: str = "", **fields: Any) -> dict[str, Any]:
        """Move the run to ``state``, appending a timestamped transition."""

        def change(record: dict[str, Any]) -> None:
            record["state"] = state
            record.setdefault("transitions", []).append({"state": state, "at": now_iso(), "detail": detail})
            record.update(fields)

        return self.update(change)


def create_run_dir(run_id: str, env: Mapping[str, str] | None = None) -> RunDir:
    root = paths.runs_root(env)
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise paths.data_dir_error(exc) from exc
    path = root / run_id
    path.mkdir(mode=0o700)  # a collision is a bug in run-id generation: fail loudly
    return RunDir(path)


def find_run(name: str, env: Mapping[str, str] | None = None, *, exact: bool = False) -> RunDir | None:
    """The run called ``name``: an exact run id, else (unless ``exact``) the newest run of target ``name``."""
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        return None
    root = paths.runs_root(env)
    only_id = exact
    exact_dir = RunDir(root / name)
    if exact_dir.exists():
        return exact_dir
    if only_id:
        return None
    best: tuple[str, RunDir] | None = None
    for run in iter_runs(env):
        try:
            record = run.read()
        except NotFoundError:
            continue
        if record.get("name") == name:
            created = str(record.get("created_at", ""))
            if best is None or created > best[0]:
                best = (created, run)
    return best[1] if best else None


def iter_runs(env: Mapping[str, str] | None = None) -> Iterator[RunDir]:
    root = paths.runs_root(env)
    if not root.is_dir():
        return
    for entry in sorted(root.iterdir()):
        if entry.is_dir() and (entry / RUN_FILE).is_file():
            yield RunDir(entry)


def wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
