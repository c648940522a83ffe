"""``track``: one run with configs, artifacts, tags and scalar metrics (``tau.exp.track.v0``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from tau_core.errors import NotFoundError, UsageError

from . import schema
from ._util import canonical_json, file_sha256, request_hash, validate_id
from .core import ExperimentStore
from .layout import METRICS
from .metricfile import MetricFileWriter
from .records import RunRow
from .transaction import Transaction
from .writing import TERMINAL, commit_metric_file, ensure_identity, staging_path

TRACK_WRITER = "tau.exp.track.v0"
ARTIFACT_TYPES = {
    "png": "plot", "jpg": "plot", "jpeg": "plot", "svg": "plot", "gif": "plot",
    "mp4": "video", "mov": "video", "webm": "video",
    "pt": "checkpoint", "pth": "checkpoint", "ckpt": "checkpoint", "safetensors": "checkpoint",
    "log": "log", "txt": "log", "json": "manifest", "yaml": "manifest", "yml": "manifest",
    "csv": "table", "tsv": "table", "parquet": "table",
}



def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        if set(value) == {"value"} and not isinstance(value["value"], (dict, list)):
            out[prefix] = value["value"]
            return
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list):
        if len(value) <= 8 and all(not isinstance(v, (dict, list)) for v in value):
            out[prefix] = value
    else:
        out[prefix] = value


def load_config(path: Path, fmt: str | None = None) -> dict[str, Any]:
    """A config file parsed as yaml/json/raw, normalized to JSON and hashed with sha256."""
    if not path.is_file():
        raise NotFoundError(f"config file {path} does not exist")
    raw = path.read_bytes()
    kind = (fmt or path.suffix.lstrip(".") or "raw").lower()
    kind = {"yml": "yaml"}.get(kind, kind)
    data: Any
    if kind == "json":
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise UsageError(f"{path}: invalid JSON config ({exc})") from None
    elif kind == "yaml":
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError

        try:
            data = YAML(typ="safe", pure=True).load(raw)
        except YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            raise UsageError(f"{path}:{where} invalid YAML config") from None
    else:
        kind = "raw"
        data = raw.decode("utf-8", "replace")
    normalized = canonical_json(data)
    indexed: dict[str, Any] = {}
    if isinstance(data, dict):
        _flatten("", data, indexed)
    return {"config_hash": "sha256:" + request_hash(data), "format": kind, "uri": str(path.absolute()),
            "normalized_json": normalized, "indexed_fields": canonical_json(indexed)}


def parse_artifact(spec: str, run_id: str) -> dict[str, Any]:
    """``URI``, ``type:name=URI`` or a JSON object, as ``track --artifact`` accepts."""
    text = spec.strip()
    if not text:
        raise UsageError("--artifact cannot be empty")
    fields: dict[str, Any]
    if text.startswith("{"):
        try:
            fields = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"--artifact {spec!r} is not valid JSON ({exc})") from None
        if not isinstance(fields, dict):
            raise UsageError(f"--artifact {spec!r} must be a JSON object")
    elif "=" in text and ":" in text.split("=", 1)[0]:
        head, uri = text.split("=", 1)
        atype, name = head.split(":", 1)
        fields = {"type": atype, "name": name, "uri": uri}
    else:
        fields = {"uri": text}
    uri = str(fields.get("uri") or "").strip()
    if not uri:
        raise UsageError(f"--artifact {spec!r} has an empty URI")
    local = Path(uri[len("file://"):] if uri.startswith("file://") else uri)
    if not fields.get("name"):
        base = local.name if local.name not in ("", ".", "..") else ""
        if not base:
            raise UsageError(f"--artifact {spec!r} must provide a type/name or a path with a basename")
        fields["name"] = base
    ext = Path(str(fields["name"])).suffix.lstrip(".").lower() or local.suffix.lstrip(".").lower()
    fields.setdefault("type", ARTIFACT_TYPES.get(ext, "other"))
    direction = fields.get("direction") or "output"
    if direction not in ("input", "output"):
        raise UsageError(f"--artifact {spec!r}: direction must be input or output")
    fields["direction"] = direction
    fields["uri"] = uri
    if "://" not in uri or uri.startswith("file://"):
        if local.is_file():
            sha, size = file_sha256(local)
            fields.setdefault("digest", f"sha256:{sha}")
            fields.setdefault("size_bytes", size)
            fields["uri"] = str(local.absolute())
    ident = "\x00".join(str(fields.get(k) or "") for k in ("type", "name", "uri", "direction"))
    fields["artifact_id"] = f"artifact-{run_id}-{request_hash(ident)[:12]}"
    allowed = {c for c, _ in schema.TABLES["artifacts"]}
    unknown = set(fields) - allowed
    if unknown:
        raise UsageError(f"--artifact {spec!r}: unknown field(s) {', '.join(sorted(unknown))}")
    return fields


@attrs.frozen(kw_only=True)
class TrackRequest:
    """Everything ``track`` records for one run; the request hash covers all of it."""

    run: str
    project: str
    group: str = "default"
    experiment: str | None = None
    parent_run: str | None = None
    state: str = "succeeded"
    owner: str | None = None
    created_at: str | None = None
    started_at: str | None = None
    completed_at: str | None = None
    config_hash: str | None = None
    code_sha: str | None = None
    image_digest: str | None = None
    command: str | None = None
    result_uri: str | None = None
    configs: Sequence[dict[str, Any]] = ()
    artifacts: Sequence[dict[str, Any]] = ()
    tags: dict[str, str] = attrs.Factory(dict)
    metrics: dict[str, float] = attrs.Factory(dict)
    step: int | None = None
    wall_time: str | None = None
    metric_source: str = "tau"
    split: str | None = None
    unit: str | None = None
    context: dict[str, Any] | None = None
    idempotency_key: str | None = None

    def request_hash(self) -> str:
        return request_hash({
            "writer": TRACK_WRITER, "run": self.run, "project": self.project, "group": self.group,
            "experiment": self.experiment, "parent_run": self.parent_run, "state": self.state, "owner": self.owner,
            "config_hash": self.config_hash, "code_sha": self.code_sha, "image_digest": self.image_digest,
            "command": self.command, "result_uri": self.result_uri,
            "configs": [c["config_hash"] for c in self.configs],
            "artifacts": sorted(a["artifact_id"] for a in self.artifacts), "tags": self.tags,
            "metrics": {k: repr(v) for k, v in self.metrics.items()}, "step": self.step,
            "wall_time": self.wall_time, "metric_source": self.metric_source, "split": self.split,
            "unit": self.unit, "context": self.context or {},
        })

    def run_row(self, ts: str) -> RunRow:
        completed = self.completed_at or (ts if self.state.lower() in TERMINAL else None)
        return RunRow(run_id=self.run, project=self.project, experiment_id=self.experiment or "",
                      run_group_id=self.group, parent_run_id=self.parent_run, state=self.state, owner=self.owner,
                      created_at=self.created_at or ts, started_at=self.started_at, completed_at=completed,
                      config_hash=self.config_hash, code_sha=self.code_sha, image_digest=self.image_digest,
                      tau_command=self.command, result_uri=self.result_uri)


def record_run(store: ExperimentStore, run: str, *, project: str | None = None, group: str = "default",
               experiment: str | None = None, configs: Sequence[dict[str, Any]] = (),
               config_hash: str | None = None, tags: Mapping[str, str] | None = None,
               metrics: Mapping[str, float] | None = None, **fields: Any) -> dict[str, Any]:
    """``track``: one run with configs, artifacts, tags and scalar metrics (``tau.exp.track.v0``).

    ``fields`` are the other :class:`TrackRequest` fields (state, owner, times, command, artifacts,
    step, wall_time, metric_source, split, unit, context, idempotency_key...).
    """
    project = project or store.project or "default"
    validate_id("run", run)
    validate_id("project", project)
    validate_id("group", group)
    if experiment:
        validate_id("experiment", experiment)
    if configs and not config_hash:
        hashes = sorted(c["config_hash"] for c in configs)
        config_hash = hashes[0] if len(hashes) == 1 else "sha256:" + request_hash("\n".join(hashes))
    req = TrackRequest(run=run, project=project, group=group, experiment=experiment, configs=configs,
                       config_hash=config_hash, tags=dict(tags or {}), metrics=dict(metrics or {}), **fields)
    return track(store, req)


def _stage_metrics(store: ExperimentStore, req: TrackRequest) -> tuple[Path, MetricFileWriter, str]:
    """The request's metrics as one staged Parquet file (outside the writer lock)."""
    import polars as pl

    wall_us = None
    if req.wall_time:
        from ._util import parse_time

        wall_us = int(parse_time(req.wall_time, what="--wall-time").timestamp() * 1_000_000)
    staged = staging_path(store, ".parquet")
    writer = MetricFileWriter(staged, project=req.project, run_group_id=req.group, run_id=req.run,
                              source=req.metric_source, unit=req.unit, split=req.split)
    names = sorted(req.metrics)
    frame = pl.DataFrame(
        {"metric_name": names, "step": [req.step] * len(names), "wall_time_us": [wall_us] * len(names),
         "value": [float(req.metrics[n]) for n in names]},
        schema={"metric_name": pl.String, "step": pl.Int64, "wall_time_us": pl.Int64, "value": pl.Float64},
    )
    writer.write(frame, {**req.tags, "tau.metric.source": "track", "tau.metric.write_version": TRACK_WRITER})
    return staged, writer, writer.close() or ""


def _record_configs(txn: Transaction, req: TrackRequest) -> list[str]:
    new = []
    for c in req.configs:
        row = {**c, "run_id": req.run}
        if txn.ensure("configs", {"config_hash": c["config_hash"], "run_id": req.run}, row,
                      what=f"config {c['config_hash']!r} for run {req.run!r}", ignore=("uri",)):
            new.append(c["config_hash"])
    return new


def _record_artifacts(txn: Transaction, req: TrackRequest, ts: str) -> list[str]:
    new = []
    for a in req.artifacts:
        row = {"created_at": ts, **a, "run_id": req.run}
        if txn.ensure("artifacts", {"artifact_id": a["artifact_id"]}, row, what=f"artifact {a['artifact_id']!r}",
                      ignore=("created_at",)):
            new.append(a["artifact_id"])
    return new


def _record_context(txn: Transaction, run: str, context: Mapping[str, Any]) -> None:
    """Merge the run context (runtime, dependencies, log URI...): later values fill or replace fields."""
    cols = [c for c, _ in schema.TABLES["run_context"]]
    unknown = set(context) - set(cols)
    if unknown:
        raise UsageError(f"unknown run context field(s): {', '.join(sorted(unknown))}")
    cur = txn.conn.execute("SELECT * FROM run_context WHERE run_id = ?", [run])
    found = cur.fetchone()
    merged = {d[0]: found[i] for i, d in enumerate(cur.description)} if found else {"run_id": run}
    merged.update({k: v for k, v in context.items() if v is not None})
    txn.conn.execute(
        f"INSERT OR REPLACE INTO run_context ({', '.join(merged)}) VALUES ({', '.join('?' * len(merged))})",
        list(merged.values()),
    )
    txn.mirror("run_context", merged)


def _summaries(txn: Transaction, run: str) -> list[dict[str, Any]]:
    cur = txn.conn.execute("SELECT * FROM metric_summaries WHERE run_id = ? ORDER BY metric_name", [run])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _reused(req: TrackRequest) -> dict[str, Any]:
    return {"run_id": req.run, "created_run": False, "reused": True, "idempotency_key": req.idempotency_key,
            "run_context": None, "configs": [], "metric_files": [], "metric_summaries": [], "artifacts": [],
            "tags": [], "metric_rows": 0}


def track(store: ExperimentStore, req: TrackRequest) -> dict[str, Any]:
    """Record ``req`` in one transaction (insert-only; a repeated request is reused)."""
    rh = req.request_hash()
    staged: Path | None = None
    writer: MetricFileWriter | None = None
    digest = ""
    try:
        if req.metrics:
            staged, writer, digest = _stage_metrics(store, req)
        with store.writing() as txn:
            if req.idempotency_key and store.check_idempotency(txn, req.idempotency_key, rh, command="exp record",
                                                               target_type="run", target_id=req.run):
                return _reused(req)
            ts = txn.ts
            created = ensure_identity(txn, req.run_row(ts), req.tags, ts)
            new_configs, new_artifacts = _record_configs(txn, req), _record_artifacts(txn, req, ts)
            if req.context:
                _record_context(txn, req.run, req.context)
            new_files = []
            if writer is not None and staged is not None:
                file_id = f"track-{req.run}-{rh[:12]}"
                rel = f"{METRICS}/project={req.project}/group={req.group}/run={req.run}/track-{rh[:12]}.parquet"
                if commit_metric_file(txn, file_id=file_id, rel_path=rel, staged=staged, digest=digest,
                                      writer=writer, created_at=ts):
                    new_files.append(file_id)
            summaries = _summaries(txn, req.run)
        return {
            "run_id": req.run, "created_run": created,
            "reused": not (created or new_configs or new_artifacts or new_files),
            "idempotency_key": req.idempotency_key, "run_context": req.context or None, "configs": new_configs,
            "metric_files": new_files, "metric_summaries": summaries, "artifacts": new_artifacts,
            "tags": sorted(req.tags), "metric_rows": writer.rows if writer else 0,
        }
    finally:
        if staged is not None:
            staged.unlink(missing_ok=True)
