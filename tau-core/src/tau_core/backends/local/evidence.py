"""The evidence bridge: metric chunks named by ``metrics.history`` -> the local experiment store.

The supervisor calls :meth:`EvidenceBridge.poll` while the run progresses and :meth:`EvidenceBridge.finish`
when it ends.  Chunks are the documented JSONL files (one closed file per step, written as a temporary
dotfile and atomically renamed), so a file that matches a history glob and is not a dotfile is complete.
Each row's numeric fields become ``tau.metrics.scalar.v2`` records keyed by ``_step`` and ``_timestamp``.
At the end the terminal ``tau/run_status`` marker (value 1 succeeded, -1 failed, -2 cancelled) is written.

The store is found through the plugin host (the telemetry sink registered as ``experiment-store``),
never by importing its package: ``tau_core`` does not depend on ``taugrid-portal``.  Without it the
bridge records why evidence was skipped, and the run itself is unaffected.
"""

from __future__ import annotations

import glob
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tau_core.backends.local import paths
from tau_core.backends.local.registry import RunDir, now_iso, read_json
from tau_core.fsutil import write_json_atomic

SINK_NAME = "experiment-store"
STATUS_METRIC = "tau/run_status"
STATUS_VALUES = {"succeeded": 1.0, "failed": -1.0, "cancelled": -2.0}
SOURCE = "tau-local"
PORTAL_INSTALL = "pip install taugrid-portal"
EVIDENCE_FILE = "evidence.json"


class EvidenceError(Exception):
    pass


def parse_chunk(path: Path) -> list[dict[str, Any]]:
    """Rows of one closed JSONL chunk; each must carry a numeric ``_step`` and a positive ``_timestamp``."""
    rows: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise EvidenceError(f"{path.name} line {lineno}: invalid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise EvidenceError(f"{path.name} line {lineno}: row must contain exactly one JSON object")
            step, ts = row.get("_step"), row.get("_timestamp")
            if isinstance(step, bool) or not isinstance(step, int | float):
                raise EvidenceError(f"{path.name} line {lineno}: missing required numeric _step field")
            if isinstance(ts, bool) or not isinstance(ts, int | float) or not ts > 0 or not math.isfinite(ts):
                raise EvidenceError(
                    f"{path.name} line {lineno}: _timestamp must be a valid positive Unix epoch-seconds value")
            rows.append(row)
    return rows


def rows_to_records(rows: list[dict[str, Any]], *, ident: Mapping[str, str], history_file: str,
                    attempt: int) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for row in rows:
        step = int(row["_step"])
        wall = datetime.fromtimestamp(float(row["_timestamp"]), UTC)
        for key, value in row.items():
            if key.startswith("_") or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if not math.isfinite(float(value)):
                raise EvidenceError(f"{history_file}: metric {key!r} must be a finite number")
            records.append({
                "project": ident["project"], "run_group_id": ident["group"], "run_id": ident["run_id"],
                "experiment_id": ident.get("experiment", ""),
                "metric_name": key, "step": step, "wall_time": wall, "value": float(value), "unit": None,
                "source": SOURCE, "split": None,
                "tags": {"jsonl.history_file": history_file, "jsonl.raw_key": key,
                         "tau_retry_attempt": str(max(attempt - 1, 0))},
            })
    return records


def status_record(ident: Mapping[str, str], state: str, reason: str, message: str, completed_at: datetime,
                  artifact_uri: str, checkpoint_uri: str) -> dict[str, Any]:
    return {
        "project": ident["project"], "run_group_id": ident["group"], "run_id": ident["run_id"],
        "experiment_id": ident.get("experiment", ""),
        "metric_name": STATUS_METRIC, "step": 0, "wall_time": completed_at, "value": STATUS_VALUES[state],
        "unit": None, "source": f"{SOURCE}-status", "split": None,
        "tags": {"tau.status.state": state, "tau.status.reason": reason, "tau.status.message": message,
                 "tau.status.artifact_uri": artifact_uri, "tau.status.checkpoint_uri": checkpoint_uri},
    }


def find_portal_cli() -> str | None:
    beside = Path(sys.executable).parent / "taugrid-portal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("taugrid-portal")


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
            register = getattr(self.sink, "record_run", None)
            if callable(register):
                register(**self._run_meta(state="running"))
            elif not self.state.get("registered"):
                self._register_with_cli()
        except Exception as exc:
            self.unavailable = f"experiment store unavailable: {type(exc).__name__}: {exc}"
            self.sink = None
        return self.sink

    def _register_with_cli(self) -> None:
        """Record the run (experiment, output directory, config) with ``taugrid-portal experiment track``.

        Used when the sink offers no ``record_run``: the metric sink creates bare runs, and the run's
        identity must exist before its first metric file so Stellar can link the output directory.
        """
        cli = find_portal_cli()
        if cli is None:
            return
        meta = self._run_meta(state="running")
        argv = [cli, "experiment", "track", self.ident["run_id"], "--store", str(self.store),
                "--project", self.ident["project"], "--group", self.ident["group"], "--state", "running",
                "--owner", str(meta["owner"]), "--result-uri", meta["result_uri"],
                "--log-uri", self.run_dir.log_file.as_uri(), "--command", meta["tau_command"],
                "--idempotency-key", f"tau-local-{self.ident['run_id']}", "-o", "json"]
        if self.ident["experiment"]:
            argv += ["--experiment", self.ident["experiment"]]
        if meta.get("created_at"):
            argv += ["--created-at", str(meta["created_at"])]
        if meta.get("config_hash"):
            argv += ["--config-hash", str(meta["config_hash"])]
        config_path = self.plan.get("config_path")
        if config_path and Path(config_path).is_file():
            argv += ["--config", str(config_path)]
        for key, value in meta["tags"].items():
            argv += ["--tag", f"{key}={value}"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                              stdin=subprocess.DEVNULL, env={**self.env, "NO_COLOR": "1"})
        if proc.returncode == 0:
            self.state["registered"] = True
        else:
            last = (proc.stderr or proc.stdout or "").strip().splitlines()
            self.state["error"] = "recording the run: " + (last[-1] if last else f"exit code {proc.returncode}")

    def _run_meta(self, *, state: str, completed_at: str | None = None) -> dict[str, Any]:
        record = self.run_dir.read()
        return {
            "run_id": self.ident["run_id"], "project": self.ident["project"], "run_group_id": self.ident["group"],
            "experiment_id": self.ident["experiment"], "state": state, "owner": self.env.get("USER", "local"),
            "created_at": record.get("created_at"), "started_at": record.get("started_at"),
            "completed_at": completed_at, "config_hash": self.plan.get("config_hash") or None,
            "result_uri": self.output.as_uri(), "tau_command": " ".join(self.plan.get("argv") or []),
            "tags": {"tau.backend": "local", "tau.target": str(self.plan.get("name") or "")},
        }

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
                records = rows_to_records(parse_chunk(chunk), ident=self.ident, history_file=chunk.name,
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
            register = getattr(sink, "record_run", None)
            if callable(register):
                register(**self._run_meta(state=store_state, completed_at=completed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")))
        except Exception as exc:
            self.state["error"] = f"terminal marker: {type(exc).__name__}: {exc}"
        finally:
            close = getattr(sink, "close", None)
            if callable(close):
                try:
                    close()
                except Exception as exc:
                    self.state["error"] = f"closing the store: {type(exc).__name__}: {exc}"
        self._stellar()
        self._save()

    def _stellar(self) -> None:
        """Write the static Stellar page for the run with ``taugrid-portal experiment stellar``."""
        cli = find_portal_cli()
        if cli is None:
            self.state["stellar_error"] = f"taugrid-portal is not installed ({PORTAL_INSTALL})"
            return
        page = self.run_dir.path / "stellar.html"
        try:
            proc = subprocess.run(
                [cli, "experiment", "stellar", self.ident["run_id"], "--store", str(self.store), "--out", str(page)],
                capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
                env={**self.env, "NO_COLOR": "1"})
        except (OSError, subprocess.SubprocessError) as exc:
            self.state["stellar_error"] = f"{type(exc).__name__}: {exc}"
            return
        if proc.returncode == 0 and page.is_file():
            self.state["stellar"] = str(page)
            self.state.pop("stellar_error", None)
        else:
            last = (proc.stderr or proc.stdout or "").strip().splitlines()
            self.state["stellar_error"] = last[-1] if last else f"exit code {proc.returncode}"

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
