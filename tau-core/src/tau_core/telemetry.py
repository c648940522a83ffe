"""Telemetry facts shared by both sides of the telemetry-sink hook.

* :class:`ScalarRecord` is one ``tau.metrics.scalar.v2`` point, the unit a sink's ``write`` receives.
* The terminal ``tau/run_status`` marker and its encoding (1 succeeded, -1 failed, -2 cancelled).
* :class:`RunRegistration` and :class:`RunStatusUpdate`, what a sink's ``register_run`` and
  ``update_status`` receive; :class:`TelemetrySink` is the whole sink contract.
* The JSONL history row parser (``tau.jsonl.import.v1`` rules): the local evidence bridge and the
  experiment store's importer both parse through :func:`parse_jsonl_lines`.

Import-light: attrs and the standard library only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

#: The terminal marker a run writes last; its value encodes the final state.
RUN_STATUS_METRIC = "tau/run_status"
RUN_STATUS_VALUES: Mapping[str, float] = {"succeeded": 1.0, "failed": -1.0, "cancelled": -2.0}
RUN_STATUS_STATES: Mapping[float, str] = {v: k for k, v in RUN_STATUS_VALUES.items()}
#: Run states after which a run no longer changes.
FINAL_STATES = frozenset(RUN_STATUS_VALUES)
SCALAR_SCHEMA = "tau.metrics.scalar.v2"
JSONL_IMPORTER = "tau.jsonl.import.v1"
INT64_MAX = (1 << 63) - 1
MAX_EPOCH_SECONDS = 253402300799  # 9999-12-31T23:59:59Z
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _str_tags(value: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (value or {}).items()}


@attrs.frozen
class ScalarRecord:
    """One scalar metric point in the ``tau.metrics.scalar.v2`` layout."""

    run_id: str
    metric_name: str
    value: float = attrs.field(converter=float)
    step: int | None = None
    wall_time: datetime | None = None
    project: str = ""
    run_group_id: str = ""
    experiment_id: str = ""
    unit: str | None = None
    source: str | None = None
    split: str | None = None
    tags: dict[str, str] = attrs.field(factory=dict, converter=_str_tags)

    @property
    def wall_time_us(self) -> int | None:
        """``wall_time`` as integer microseconds since the epoch."""
        if self.wall_time is None:
            return None
        wall = self.wall_time if self.wall_time.tzinfo else self.wall_time.replace(tzinfo=UTC)
        return (wall - EPOCH) // timedelta(microseconds=1)


@attrs.frozen
class RunRegistration:
    """A run's identity and metadata, registered with a sink before its first metric."""

    run_id: str
    project: str
    run_group_id: str = "default"
    experiment_id: str = ""
    state: str = "running"
    owner: str | None = None
    created_at: str | None = None
    started_at: str | None = None
    config_hash: str | None = None
    config_path: str | None = None
    result_uri: str | None = None
    log_uri: str | None = None
    tau_command: str | None = None
    tags: dict[str, str] = attrs.field(factory=dict, converter=_str_tags)
    #: Registering the same run again with the same key (and the same metadata) is a no-op.
    idempotency_key: str | None = None


@attrs.frozen
class RunStatusUpdate:
    """A run's state change (for a final state, after the terminal marker was written)."""

    run_id: str
    state: str
    completed_at: datetime | None = None
    reason: str = ""
    message: str = ""


@runtime_checkable
class TelemetrySink(Protocol):
    """What ``factory(**options)`` of ``tau_register_telemetry_sinks`` returns.

    ``write`` and ``close`` are required.  ``register_run``, ``update_status`` and
    ``render_evidence`` are what a sink offers to record whole runs (the local backend uses
    them); a metrics-only sink may omit them.
    """

    def write(self, records: Iterable[ScalarRecord | Mapping[str, Any]]) -> Any: ...

    def close(self) -> None: ...


def status_value(state: str) -> float:
    """The ``tau/run_status`` value of a final state (``KeyError`` for a state that is not final)."""
    return RUN_STATUS_VALUES[state]


def state_of_marker(value: float) -> str | None:
    """The final state a ``tau/run_status`` value encodes, or ``None``."""
    return RUN_STATUS_STATES.get(value)


def status_record(*, run_id: str, project: str, run_group_id: str, experiment_id: str, state: str,
                  completed_at: datetime, source: str, tags: Mapping[str, str] | None = None) -> ScalarRecord:
    """The terminal ``tau/run_status`` marker of a run in ``state``."""
    return ScalarRecord(run_id=run_id, metric_name=RUN_STATUS_METRIC, value=status_value(state), step=0,
                        wall_time=completed_at, project=project, run_group_id=run_group_id,
                        experiment_id=experiment_id, source=source,
                        tags={"tau.status.state": state, **dict(tags or {})})


def _wall_time(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):  # Unix seconds
        return EPOCH + timedelta(microseconds=round(value * 1_000_000))
    text = str(value).strip()
    try:
        parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        raise ValueError(f"wall_time {text!r} is not an RFC3339 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def to_record(item: ScalarRecord | Mapping[str, Any]) -> ScalarRecord:
    """A sink's input as a :class:`ScalarRecord`; dicts (third-party writers) are checked by name.

    ``ValueError`` names the missing or invalid field.
    """
    if isinstance(item, ScalarRecord):
        return item
    missing = [k for k in ("run_id", "metric_name", "value") if item.get(k) in (None, "")]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    tags = item.get("tags")
    if isinstance(tags, str):
        tags = json.loads(tags) if tags else {}
    step = item.get("step")
    return ScalarRecord(
        run_id=str(item["run_id"]), metric_name=str(item["metric_name"]), value=float(item["value"]),
        step=None if step is None else int(step), wall_time=_wall_time(item.get("wall_time")),
        project=str(item.get("project") or ""), run_group_id=str(item.get("run_group_id") or ""),
        experiment_id=str(item.get("experiment_id") or ""), unit=item.get("unit") or None,
        source=item.get("source") or None, split=item.get("split") or None, tags=tags or {})


# -- JSONL history rows ---------------------------------------------------------------------------
@attrs.define
class JsonlRowError(Exception):
    """A malformed history row: the 1-based line, what is wrong and how to fix it."""

    line: int
    message: str
    hint: str | None = None

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@attrs.define
class ScalarColumns:
    """Parsed history points, column by column (``wall_time_us`` may hold ``None``)."""

    metric_name: list[str] = attrs.Factory(list)
    step: list[int] = attrs.Factory(list)
    wall_time_us: list[int | None] = attrs.Factory(list)
    value: list[float] = attrs.Factory(list)

    def __len__(self) -> int:
        return len(self.value)


_STRUCTURE = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def flatten_row(raw: bytes) -> bytes:
    """``raw`` (one JSON line) with every value nested inside the top-level object replaced by ``null``.

    Strings are honoured (brackets inside them are text).  Unbalanced input is returned unchanged
    (``json`` then reports it).  Linear in the line length, no recursion: a list nested 1,000 deep
    never reaches a recursive parser.
    """
    out: list[bytes] = []
    depth, pos = 0, 0
    for m in _STRUCTURE.finditer(raw):
        tok = m.group(0)
        if tok[:1] == b'"':
            continue
        if tok in (b"[", b"{"):
            depth += 1
            if depth == 2:
                out.append(raw[pos:m.start()])
        else:
            depth -= 1
            if depth < 0:
                return raw
            if depth == 1:
                out.append(b"null")
                pos = m.end()
    if depth != 0 or not out:
        return raw
    out.append(raw[pos:])
    return b"".join(out)


def _shown(value: Any, limit: int = 80) -> str:
    text = json.dumps(value) if not isinstance(value, int) or len(str(value)) < limit else str(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _shown_key(key: str, limit: int = 80) -> str:
    return repr(key) if len(key) <= limit else repr(key[:limit]) + f"... ({len(key)} characters)"


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@attrs.frozen
class JsonlFields:
    """How a history names its step and time fields, and the prefix added to metric names."""

    step_field: str = "_step"
    time_field: str = "_timestamp"
    prefix: str = ""
    #: The evidence protocol (``metrics.history`` chunks) requires a timestamp on every row.
    require_time: bool = False


def _load_row(raw: bytes, line: int, *, last_unterminated: bool) -> dict[str, Any]:
    text = raw.strip()
    if b"[" in text or text.count(b"{") > 1:
        text = flatten_row(text)
    try:
        obj = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        if last_unterminated:
            raise JsonlRowError(line, "truncated last row: the file ends in the middle of a JSON object",
                                "the writer may still be running or was killed; import the file once it is "
                                "complete (write chunks to a temp file and rename them)") from None
        raise JsonlRowError(line, f"invalid JSON ({exc})", "each line must hold exactly one JSON object") from None
    if not isinstance(obj, dict):
        raise JsonlRowError(line, f"row must contain exactly one JSON object, got {type(obj).__name__}",
                            'write one object per line, e.g. {"_step": 0, "loss": 1.0}')
    return obj


def _row_step(obj: Mapping[str, Any], line: int, fields: JsonlFields) -> int:
    name = fields.step_field
    if name not in obj:
        raise JsonlRowError(line, f"missing required numeric {name} field",
                            f"every row needs {name}; use --step-field if the history names it differently")
    raw = obj[name]
    if not _is_number(raw) or (isinstance(raw, float) and not math.isfinite(raw)):
        raise JsonlRowError(line, f"{name} must be a finite number, got {_shown(raw)}")
    step = int(raw)
    if abs(step) > INT64_MAX:
        raise JsonlRowError(line, f"{name} must be an integer representable as int64")
    return step


def _row_wall(obj: Mapping[str, Any], line: int, fields: JsonlFields) -> int | None:
    name = fields.time_field
    ts = obj.get(name)
    if ts is None:
        if fields.require_time:
            raise JsonlRowError(line, f"{name} must be a valid positive Unix epoch-seconds value, got "
                                f"{_shown(ts) if name in obj else 'nothing'}")
        return None
    if not _is_number(ts) or not math.isfinite(ts) or ts <= 0 or ts > MAX_EPOCH_SECONDS:
        raise JsonlRowError(line, f"{name} must be a valid positive Unix epoch-seconds value, got {_shown(ts)}")
    return round(float(ts) * 1_000_000)


def parse_jsonl_row(obj: Mapping[str, Any], line: int, fields: JsonlFields, out: ScalarColumns) -> None:
    """Append one history row's points to ``out``; ``JsonlRowError`` for a row that breaks the rules.

    ``_step`` is required and numeric (floats truncated); the time field, when present, is positive
    Unix seconds; other ``_`` keys are metadata; non-numeric values (strings, booleans, nested
    values, null) are skipped; numeric values must be finite.
    """
    step = _row_step(obj, line, fields)
    wall = _row_wall(obj, line, fields)
    for key, value in obj.items():
        if key == fields.step_field or key == fields.time_field or key.startswith("_") or not _is_number(value):
            continue
        try:
            fvalue = float(value)
        except OverflowError:  # an integer beyond the float range (400 nines)
            fvalue = math.inf
        if not key.isascii() and not _encodable(key):
            raise JsonlRowError(line, f"metric name {ascii(key)[:90]} is not valid Unicode (a lone surrogate escape)",
                                "write metric names as UTF-8 text; \\ud800-\\udfff escapes must come in pairs")
        if not math.isfinite(fvalue):
            raise JsonlRowError(line, f"metric {_shown_key(key)} must be a finite number, got {_shown(value)}",
                                "NaN and Infinity are rejected at import; log a counter such as nan_steps instead")
        out.metric_name.append(f"{fields.prefix}{key}")
        out.step.append(step)
        out.wall_time_us.append(wall)
        out.value.append(fvalue)


def parse_jsonl_lines(data: bytes, fields: JsonlFields = JsonlFields(), *, first_line: int = 1,
                      final: bool = True) -> ScalarColumns:
    """The authoritative line-by-line parser of JSONL history bytes: points, or the first bad row.

    Blank lines are skipped.  When ``final`` is set, a last line without a newline is accepted
    when it is a complete object and reported as a truncated row otherwise.
    """
    out = ScalarColumns()
    lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        lines.pop()
    last = len(lines) - 1
    for offset, raw in enumerate(lines):
        if not raw.strip():
            continue
        obj = _load_row(raw, first_line + offset,
                        last_unterminated=final and offset == last and not ends_with_newline)
        parse_jsonl_row(obj, first_line + offset, fields, out)
    return out


def parse_jsonl_file(path: Path, fields: JsonlFields = JsonlFields()) -> ScalarColumns:
    """A whole (closed) history file through :func:`parse_jsonl_lines`."""
    return parse_jsonl_lines(path.read_bytes(), fields)


def from_us(wall_time_us: int | None) -> datetime | None:
    """Microseconds since the epoch as an aware UTC datetime."""
    if wall_time_us is None:
        return None
    return EPOCH + timedelta(microseconds=wall_time_us)
