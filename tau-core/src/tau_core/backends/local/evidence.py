"""The evidence bridge: metric chunks named by ``metrics.history`` -> the local experiment store.

The supervisor calls :meth:`EvidenceBridge.poll` while the run progresses and :meth:`EvidenceBridge.finish`
when it ends.  Chunks are the documented JSONL files (one closed file per step, written as a temporary
dotfile and atomically renamed), so a file that matches a history glob and is not a dotfile is complete.
Each row's numeric fields become ``tau.metrics.scalar.v2`` records keyed by ``_step`` and ``_timestamp``.
At the end the terminal ``tau/run_status`` marker (value 1 succeeded, -1 failed, -2 cancelled) is written.

The store is found through the plugin host (the telemetry sink registered as ``experiment-store``),
never by importing its package: ``tau_core`` does not depend on ``taugrid-portal``.  Everything goes
through the sink in-process: ``register_run`` before the first metric (idempotent by run id),
``write`` for the chunks and the marker, ``update_status`` for the final state and ``render_evidence``
for the run's static Stellar page.  Without the store the bridge records why evidence was skipped
(and how to install it), and the run itself is unaffected.
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tau_core import telemetry
from tau_core.backends.local import paths
from tau_core.backends.local.registry import RunDir, now_iso, read_json
from tau_core.fsutil import write_json_atomic
from tau_core.telemetry import RUN_STATUS_METRIC as STATUS_METRIC
from tau_core.telemetry import RUN_STATUS_VALUES as STATUS_VALUES
from tau_core.telemetry import JsonlFields, ScalarRecord

SINK_NAME = "experiment-store"
SOURCE = "tau-local"
PORTAL_INSTALL = "pip install taugrid-portal"
EVIDENCE_FILE = "evidence.json"
STELLAR_PAGE = "stellar.html"
#: The evidence protocol: every chunk row carries ``_step`` and a ``_timestamp``.
CHUNK_FIELDS = JsonlFields(require_time=True)

__all__ = ["STATUS_METRIC", "STATUS_VALUES", "EvidenceBridge", "EvidenceError", "parse_chunk", "read_evidence"]


class EvidenceError(Exception):
    pass


def parse_chunk(path: Path) -> telemetry.ScalarColumns:
    """Points of one closed JSONL chunk, parsed by the shared history parser (:mod:`tau_core.telemetry`)."""
    try:
        return telemetry.parse_jsonl_file(path, CHUNK_FIELDS)
    except telemetry.JsonlRowError as exc:
        raise EvidenceError(f"{path.name} {exc}") from None


def chunk_records(points: telemetry.ScalarColumns, *, ident: Mapping[str, str], history_file: str,
                  attempt: int) -> list[ScalarRecord]:
    """Scalar records of one chunk's points, tagged with the chunk and the retry attempt."""
    attempt_tag = str(max(attempt - 1, 0))
    return [
        ScalarRecord(run_id=ident["run_id"], metric_name=name, value=value, step=step,
                     wall_time=telemetry.from_us(wall), project=ident["project"], run_group_id=ident["group"],
                     experiment_id=ident.get("experiment", ""), source=SOURCE,
                     tags={"jsonl.history_file": history_file, "jsonl.raw_key": name,
                           "tau_retry_attempt": attempt_tag})
        for name, step, wall, value in zip(points.metric_name, points.step, points.wall_time_us, points.value,
                                           strict=True)
    ]


def status_record(ident: Mapping[str, str], state: str, reason: str, message: str, completed_at: datetime,
                  artifact_uri: str, checkpoint_uri: str) -> ScalarRecord:
    return telemetry.status_record(
        run_id=ident["run_id"], project=ident["project"], run_group_id=ident["group"],
        experiment_id=ident.get("experiment", ""), state=state, completed_at=completed_at, source=f"{SOURCE}-status",
        tags={"tau.status.reason": reason, "tau.status.message": message, "tau.status.artifact_uri": artifact_uri,
              "tau.status.checkpoint_uri": checkpoint_uri})


class EvidenceBridge:
    """Imports one run's metric chunks; progress is kept in ``evidence.json`` in the run directory."""

    def __init__(self, run_dir: RunDir, plan: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
        self.run_dir = run_dir
        self.plan = plan
        self.env = dict(os.environ if env is None else env)
        self.output = Path(plan["output_dir"])
        self.store = paths.exp_store_root(self.env)
        exp = plan.get("experiment") or {}
        self.ident = {"project": paths.slug(exp.get("project") or "local"),
                      "group": paths.slug(exp.get("group") or "default"),
                      "experiment": paths.slug(exp["name"]) if exp.get("name") else "", "run_id": plan["run_id"]}
        self.sink: Any = None
        self.unavailable: str | None = None
        self.state_file = run_dir.path / EVIDENCE_FILE
        try:
            self.state = read_json(self.state_file)
        except (OSError, ValueError):
            self.state = {"imported": {}, "rows": 0, "marker": False, "error": None, "store": str(self.store)}

    # -- the sink --------------------------------------------------------------------------
    def _open(self) -> Any:
        if self.sink is not None or self.unavailable is not None:
            return self.sink
        try:
            from tau_core.plugins import get_host

            registry = get_host().registry("telemetry_sinks")
            if SINK_NAME not in registry:
                self.unavailable = f"the experiment store is not installed ({PORTAL_INSTALL})"
                return None
            factory = registry[SINK_NAME].load()
            self.sink = factory(store=str(self.store))
        except Exception as exc:
            self.unavailable = f"experiment store unavailable: {type(exc).__name__}: {exc}"
            self.sink = None
            return None
        if not self.state.get("registered"):
            self._register()
        return self.sink

    def _register(self) -> None:
        """Record the run (experiment, output directory, config) through the sink's ``register_run``.

        Before the first metric, so Stellar can link the output directory.  Idempotent: the key is the
        run id, and the metadata comes from the run's own record, so a bridge restarted after a crash
        registers the same run again as a no-op.
        """
        register = getattr(self.sink, "register_run", None)
        if not callable(register):
            self.state["registered"] = False
            return
        try:
            register(self.registration())
        except Exception as exc:
            self.state["error"] = f"recording the run: {type(exc).__name__}: {exc}"
            return
        self.state["registered"] = True

    def registration(self) -> telemetry.RunRegistration:
        """The run as the sink records it (state ``running``)."""
        record = self.run_dir.read()
        config_path = self.plan.get("config_path")
        return telemetry.RunRegistration(
            run_id=self.ident["run_id"], project=self.ident["project"], run_group_id=self.ident["group"],
            experiment_id=self.ident["experiment"], state="running", owner=self.env.get("USER", "local"),
            created_at=record.get("created_at"), config_hash=self.plan.get("config_hash") or None,
            config_path=str(config_path) if config_path and Path(config_path).is_file() else None,
            result_uri=self.output.as_uri(), log_uri=self.run_dir.log_file.as_uri(),
            tau_command=" ".join(self.plan.get("argv") or []),
            tags={"tau.backend": "local", "tau.target": str(self.plan.get("name") or "")},
            idempotency_key=f"tau-local-{self.ident['run_id']}")

    # -- chunks ----------------------------------------------------------------------------
    def pending_chunks(self) -> list[Path]:
        found: set[Path] = set()
        for pattern in self.plan.get("history") or []:
            base = paths.map_container_path(pattern, self.env) if pattern.startswith("/") else self.output / pattern
            for hit in glob.glob(str(base), recursive=True):
                p = Path(hit)
                if p.name.startswith(".") or not p.is_file():
                    continue
                found.add(p)
        imported = self.state["imported"]
        return sorted(p for p in found if str(p) not in imported)

    def poll(self, attempt: int) -> int:
        """Import every complete chunk not yet imported; returns the number of rows written."""
        chunks = self.pending_chunks()
        if not chunks:
            return 0
        sink = self._open()
        if sink is None:
            self._save()
            return 0
        written = 0
        for chunk in chunks:
            try:
                records = chunk_records(parse_chunk(chunk), ident=self.ident, history_file=chunk.name,
                                        attempt=attempt)
                if records:
                    sink.write(records)
            except EvidenceError as exc:
                self.state["error"] = str(exc)
                self.state["imported"][str(chunk)] = {"rows": 0, "error": str(exc)}
                continue
            except Exception as exc:
                self.state["error"] = f"{chunk.name}: {type(exc).__name__}: {exc}"
                break
            digest = hashlib.sha256(chunk.read_bytes()).hexdigest()[:16]
            self.state["imported"][str(chunk)] = {"rows": len(records), "sha256": digest}
            self.state["rows"] = int(self.state.get("rows", 0)) + len(records)
            written += len(records)
        self._save()
        return written

    def finish(self, state: str, reason: str, message: str, checkpoint: str, attempt: int) -> None:
        """Final drain, the terminal ``tau/run_status`` marker, the run's final state and the Stellar page."""
        self.poll(attempt)
        sink = self._open()
        if sink is None:
            self._save()
            return
        store_state = {"Succeeded": "succeeded", "Failed": "failed", "Cancelled": "cancelled"}[state]
        completed = datetime.now(UTC)
        try:
            sink.write([status_record(self.ident, store_state, reason, message, completed,
                                      self.output.as_uri(), Path(checkpoint).as_uri())])
            self.state["marker"] = True
            update = getattr(sink, "update_status", None)
            if callable(update):
                update(telemetry.RunStatusUpdate(run_id=self.ident["run_id"], state=store_state,
                                                 completed_at=completed, reason=reason, message=message))
        except Exception as exc:
            self.state["error"] = f"terminal marker: {type(exc).__name__}: {exc}"
        self._stellar(sink)
        close = getattr(sink, "close", None)
        if callable(close):
            try:
                close()
            except Exception as exc:
                self.state["error"] = f"closing the store: {type(exc).__name__}: {exc}"
        self._save()

    def _stellar(self, sink: Any) -> None:
        """Write the run's static Stellar page through the sink's ``render_evidence`` (atomically)."""
        render = getattr(sink, "render_evidence", None)
        if not callable(render):
            self.state["stellar_error"] = (f"the {SINK_NAME} telemetry sink cannot render a Stellar page "
                                           f"({PORTAL_INSTALL} provides one that does)")
            return
        page = self.run_dir.path / STELLAR_PAGE
        try:
            written = Path(render(self.ident["run_id"], page))
        except Exception as exc:
            self.state["stellar_error"] = f"{type(exc).__name__}: {exc}"
            return
        if written.is_file():
            self.state["stellar"] = str(written)
            self.state.pop("stellar_error", None)
        else:
            self.state["stellar_error"] = f"the Stellar page {written} was not written"

    def _save(self) -> None:
        self.state["store"] = str(self.store)
        self.state["updated_at"] = now_iso()
        if self.unavailable:
            self.state["unavailable"] = self.unavailable
        write_json_atomic(self.state_file, self.state)


def read_evidence(run_dir: RunDir) -> dict[str, Any]:
    try:
        return read_json(run_dir.path / EVIDENCE_FILE)
    except (OSError, ValueError):
        return {}
