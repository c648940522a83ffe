"""``tau.stellar``: log metrics, images, HTML and tables from a training loop into Stellar.

``init`` opens a run and a local packet directory (``history.jsonl``, ``config.json``,
``artifacts/`` and ``artifacts.jsonl``).  ``log`` only appends to an in-memory queue; a background
writer turns it into JSONL every 2 s (or at FLUSH_ROWS rows), so a training loop pays about a
microsecond per call.  Buffered rows are written by ``finish``, at interpreter exit (``atexit``, also
after an uncaught exception) and on SIGTERM (when no other handler is installed); only a hard kill
(SIGKILL, ``os._exit``) loses the last two seconds.

* On a workstation (or ``tau run --local``), ``finish`` records the metrics in the local
  experiment store in-process, through the ``experiment-store`` telemetry sink (no subprocess).
* Inside a run - a cluster job (``TAU_CLUSTER_JOB`` set by the renderers) or a local-backend run
  (``TAU_OUTPUT_DIR`` set) - the writer emits closed ``metrics.history`` chunks under
  ``$TAU_OUTPUT_DIR/stellar/``; the offload sidecar or the local evidence bridge ships them, so the
  image needs neither polars nor the portal.
"""

from __future__ import annotations

import atexit
import json
import math
import numbers
import os
import signal
import threading
import time
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau_core.keys import ENV_CLUSTER_JOB as CLUSTER_JOB_ENV
from tau_core.keys import STELLAR_HISTORY_GLOB
from tau_core.telemetry import RUN_STATUS_METRIC

if TYPE_CHECKING:
    from tau._lightning import StellarLogger as StellarLogger

HISTORY_GLOB: str = STELLAR_HISTORY_GLOB
CHUNK_DIR, CHUNK_PATTERN = HISTORY_GLOB.split("/")

FLUSH_ROWS = 65536
SINK_NAME = "experiment-store"
STATUS_METRIC = RUN_STATUS_METRIC


class Image:
    """An image artifact (PNG/JPEG bytes or a file path)."""

    ext = "png"

    def __init__(self, data: bytes | str | os.PathLike[str], caption: str = "") -> None:
        self.data = data
        self.caption = caption

    def payload(self) -> bytes:
        if isinstance(self.data, bytes):
            return self.data
        return Path(self.data).read_bytes()


class Html(Image):
    """An HTML fragment artifact."""

    ext = "html"

    def __init__(self, html: str, caption: str = "") -> None:
        super().__init__(html.encode("utf-8"), caption)


class Table(Image):
    """A table artifact (columns plus rows, stored as JSON)."""

    ext = "json"

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> None:
        doc = {"columns": list(columns), "rows": [list(r) for r in rows]}
        super().__init__(json.dumps(doc, default=str).encode("utf-8"), caption)


def _slug(value: str) -> str:
    out = "".join(c if c.isalnum() or c in "-_." else "-" for c in value.strip().lower())
    return out.strip("-.") or "default"


class Run:
    """One Stellar run: buffered metric rows, artifacts with lineage, and the local packet."""

    def __init__(self, project: str, run: str, group: str, experiment: str, packet: Path,
                 config: Mapping[str, Any] | None, store: str | None) -> None:
        self.project, self.run_id, self.group, self.experiment = project, run, group, experiment
        self.packet = packet
        self.store = store
        self.in_job = _inside_a_run()
        output = Path(os.environ.get("TAU_OUTPUT_DIR", str(packet)))
        self.chunk_dir = output / CHUNK_DIR if self.in_job else None
        self._rows: deque[tuple[int, float, dict[str, Any]]] = deque()  # append/popleft: atomic, no lock
        self._append = self._rows.append
        self._flush_lock = threading.RLock()  # one writer at a time; re-entrant for a SIGTERM mid-flush
        self._wake = threading.Event()
        self._stop = False
        self._chunks = 0
        self._step = 0
        self.finished = False
        packet.mkdir(parents=True, exist_ok=True)
        (packet / "artifacts").mkdir(exist_ok=True)
        (packet / "config.json").write_text(json.dumps(dict(config or {}), sort_keys=True, default=str) + "\n",
                                            encoding="utf-8")
        _OPEN.add(self)
        self._writer = threading.Thread(target=self._write_loop, name="tau-stellar-writer", daemon=True)
        self._writer.start()

    # -- hot path ----------------------------------------------------------------------------
    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Record ``metrics`` at ``step`` (default: one past the last step); artifacts are saved now.

        Scalars only go into an in-memory queue (a copy of ``metrics``, so the caller may reuse its dict);
        the background writer formats and writes them.
        """
        if step is None:
            step = self._step
        self._step = step + 1
        for value in metrics.values():
            if isinstance(value, Image):  # the slow path: artifacts are written now, scalars buffered
                self._log_artifacts(metrics, step)
                return
        self._append((step, _now(), dict(metrics)))
        if len(self._rows) >= FLUSH_ROWS:
            self._wake.set()

    def _log_artifacts(self, metrics: Mapping[str, Any], step: int) -> None:
        values = dict(metrics)
        for key, value in metrics.items():
            if isinstance(value, Image):
                del values[key]
                self._artifact(key, value, step)
        self._append((step, _now(), values))

    # -- writer ------------------------------------------------------------------------------
    def _take(self) -> list[tuple[int, float, dict[str, Any]]]:
        rows, pop = self._rows, self._rows.popleft
        return [pop() for _ in range(len(rows))]  # rows logged meanwhile stay queued for the next flush

    def _write_loop(self) -> None:
        while not self._stop:
            self._wake.wait(2.0)
            self._wake.clear()
            self.flush()

    def flush(self) -> None:
        """Write buffered rows (the background writer does this; finish, exit and SIGTERM do it one last time)."""
        with self._flush_lock:
            rows = self._take()
            if not rows:
                return
            text = "".join([_row(s, t, v) for s, t, v in rows])
            with open(self.packet / "history.jsonl", "a", encoding="utf-8") as fh:
                fh.write(text)
            if self.chunk_dir is not None:  # one closed chunk per flush: dotfile, then atomic rename
                self.chunk_dir.mkdir(parents=True, exist_ok=True)
                self._chunks += 1
                final = self.chunk_dir / CHUNK_PATTERN.replace("*", f"{self._chunks:06d}")
                tmp = self.chunk_dir / f".{final.name}.tmp"
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, final)

    def close(self) -> None:
        """Stop the writer and write what is buffered (no recording): the exit path of an unfinished run."""
        self._stop = True
        self._wake.set()
        if self._writer is not threading.current_thread():
            self._writer.join(timeout=5)
        self.flush()
        _OPEN.discard(self)

    # -- artifacts and lineage ---------------------------------------------------------------
    def _artifact(self, key: str, value: Image, step: int) -> None:
        name = f"{_slug(key)}-step{step:06d}.{value.ext}"
        (self.packet / "artifacts" / name).write_bytes(value.payload())
        self._lineage({"artifact_id": f"{self.run_id}/{name}", "key": key, "step": step, "path": f"artifacts/{name}",
                       "kind": type(value).__name__.lower(), "direction": "output", "caption": value.caption})

    def use_artifact(self, artifact_id: str, *, source_run_id: str | None = None) -> dict[str, Any]:
        """Record that this run consumed ``artifact_id`` (lineage: source artifact and run)."""
        source_run = source_run_id or artifact_id.split("/", 1)[0]
        entry = {"artifact_id": artifact_id, "direction": "input", "source_artifact_id": artifact_id,
                 "source_run_id": source_run}
        self._lineage(entry)
        return entry

    def _lineage(self, entry: Mapping[str, Any]) -> None:
        with open(self.packet / "artifacts.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(dict(entry), sort_keys=True) + "\n")

    # -- the end -----------------------------------------------------------------------------
    def finish(self, sync: bool = True, state: str = "succeeded") -> dict[str, Any]:
        """Flush; on a workstation record the packet in the experiment store (in-process) when ``sync``."""
        if self.finished:
            return {"run": self.run_id, "recorded": 0}
        self.close()
        self.finished = True
        global _current
        if _current is self:
            _current = None
        if self.in_job or not sync:
            return {"run": self.run_id, "recorded": 0, "packet": str(self.packet)}
        return {"run": self.run_id, "recorded": record_packet(self, state), "packet": str(self.packet)}


_now = time.time
_OPEN: weakref.WeakSet[Run] = weakref.WeakSet()


def _flush_open_runs() -> None:
    """At interpreter exit (also after an uncaught exception): every unfinished run writes its buffered rows."""
    for run in list(_OPEN):
        try:
            run.close()
        except OSError:
            pass


def _on_sigterm(signum: int, frame: Any) -> None:
    """Preemption and ``kubectl delete`` send SIGTERM: write the buffers, then die of SIGTERM as before."""
    _flush_open_runs()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_exit_hooks() -> None:
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_flush_open_runs)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)  # only when nobody else handles SIGTERM


_hooks_installed = False
_KEYS: dict[str, str] = {}


def _key(name: str) -> str:
    """``,"name":`` (JSON-escaped once per metric name)."""
    text = _KEYS.get(name)
    if text is None:
        text = _KEYS[name] = "," + json.dumps(str(name)) + ":"
    return text


def _row(step: int, ts: float, values: Mapping[str, Any]) -> str:
    """One history line: ``_step``, ``_timestamp`` and the finite numeric values (others are dropped)."""
    parts = ['{"_step":' + str(int(step)) + ',"_timestamp":' + repr(ts)]
    for key, value in values.items():
        kind = type(value)
        if kind is float or kind is int:
            if value - value == 0:  # finite (NaN and infinities are dropped)
                parts.append(_key(key) + repr(value))
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            number = float(value)  # numpy scalars (float32 too), Fraction: any registered real number
            if math.isfinite(number):
                parts.append(_key(key) + repr(number))
    parts.append("}\n")
    return "".join(parts)


def record_packet(run: Run, state: str) -> int:
    """Write the packet's history to the local store through the telemetry sink; returns rows written."""
    from datetime import UTC, datetime

    from tau_core.backends.local import paths
    from tau_core.plugins import get_host

    registry = get_host().registry("telemetry_sinks")
    if SINK_NAME not in registry:
        return 0
    store = run.store or str(paths.exp_store_root())
    sink = registry[SINK_NAME].load()(store=store, project=run.project, source="tau-stellar")
    from tau_core.telemetry import ScalarRecord, status_record

    project, group, experiment = run.project, run.group, run.experiment or ""
    records: list[ScalarRecord] = []
    history = run.packet / "history.jsonl"
    lines = history.read_text(encoding="utf-8").splitlines() if history.exists() else []
    for line in lines:
        row = json.loads(line)
        wall = datetime.fromtimestamp(float(row.pop("_timestamp")), UTC)
        step = int(row.pop("_step"))
        records += [ScalarRecord(run_id=run.run_id, metric_name=k, step=step, wall_time=wall, value=float(v),
                                 project=project, run_group_id=group, experiment_id=experiment, source="tau-stellar")
                    for k, v in row.items()]
    records.append(status_record(run_id=run.run_id, project=project, run_group_id=group, experiment_id=experiment,
                                 state=state, completed_at=datetime.now(UTC), source="tau-stellar-status",
                                 tags={"tau.status.artifact_uri": run.packet.as_uri()}))
    try:
        sink.write(records)
    finally:
        sink.close()
    return len(records)


_current: Run | None = None


def _inside_a_run() -> bool:
    """A cluster job (the renderers' marker) or a local-backend run: both give the run an output directory
    and ship ``metrics.history`` chunks themselves (offload sidecar / local evidence bridge)."""
    return bool(os.environ.get(CLUSTER_JOB_ENV) or os.environ.get("TAU_OUTPUT_DIR"))


def init(project: str | None = None, run: str | None = None, group: str | None = None,
         experiment: str | None = None, store: str | None = None, config: Mapping[str, Any] | None = None,
         tau_binary: str | None = None, dir: str | os.PathLike[str] | None = None) -> Run:
    """Open a run (the current one for :func:`log` and :func:`finish`).

    ``tau_binary`` is accepted for compatibility and unused: recording happens in-process.
    """
    global _current
    project, run_id = project_name(project), run_name(run)
    packet = packet_dir(project, run_id, dir)
    _install_exit_hooks()
    _current = Run(project, run_id, _slug(group or "default"), _slug(experiment) if experiment else "", packet,
                   config, store)
    return _current


def project_name(project: str | None = None) -> str:
    """The project a run logs to: ``project``, else ``TAU_EXPERIMENT_PROJECT``, else ``default`` (slugged)."""
    return _slug(project or os.environ.get("TAU_EXPERIMENT_PROJECT") or "default")


def run_name(run: str | None = None) -> str:
    """The run id: ``run``, else ``TAU_RUN_ID``, else ``run-<date>-<time>`` (slugged)."""
    return _slug(run or os.environ.get("TAU_RUN_ID") or time.strftime("run-%y%m%d-%H%M%S"))


def packet_dir(project: str, run_id: str, dir: str | os.PathLike[str] | None = None) -> Path:
    """Where a run's packet goes: ``dir``; inside a run ``$TAU_OUTPUT_DIR/stellar/packet``; else the data dir."""
    if dir is not None:
        return Path(dir)
    output = os.environ.get("TAU_OUTPUT_DIR")
    if output and _inside_a_run():  # a cluster job without storage.output has no output dir
        return Path(output) / "stellar" / "packet"
    from tau_core.backends.local import paths

    return paths.tau_home() / "stellar" / project / run_id


def _run() -> Run:
    if _current is None:
        raise RuntimeError("tau-py: tau.stellar.init() must be called before log()/finish()")
    return _current


def log(metrics: Mapping[str, Any], step: int | None = None) -> None:
    """Log to the current run (see :meth:`Run.log`)."""
    run = _current
    if run is None:
        raise RuntimeError("tau-py: tau.stellar.init() must be called before log()")
    run.log(metrics, step)


def use_artifact(artifact_id: str, *, source_run_id: str | None = None) -> dict[str, Any]:
    return _run().use_artifact(artifact_id, source_run_id=source_run_id)


def finish(sync: bool = True) -> dict[str, Any]:
    return _run().finish(sync=sync)


def __getattr__(name: str) -> Any:
    """``StellarLogger`` (the Lightning logger) is imported on first use: ``tau._lightning`` loads no Lightning
    until a logger is built."""
    if name == "StellarLogger":
        from tau._lightning import StellarLogger

        return StellarLogger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
