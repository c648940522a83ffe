"""Remote write of metric points to adx-mon (Prometheus remote-write 1.0), with per-batch checkpoints.

The sidecar never talks to Azure Data Explorer itself: it POSTs ``experiment_metrics`` series to adx-mon's
``/receive`` (``http://${NODE_IP}:3100/receive`` on the platform), and adx-mon, which owns the ADX identity,
appends them to the ``ExperimentMetrics`` table.  Each point is one series whose labels are the reference's
dashboard fields (:data:`LABELS`); the value is the metric value and the timestamp its wall time in ms.

Delivery is at least once per request and exactly once per checkpoint: :meth:`RemoteWriter.send` splits the
series into requests of ``batch_size``, and after each accepted request it records how many series were sent
in a JSON checkpoint (written atomically).  A rerun resumes after the last accepted request, and a completed
checkpoint skips the write altogether.  A request is retried ``max_attempts`` times (connection errors,
429 and 5xx answers), ``backoff`` apart, doubling; then :class:`RemoteWriteError` names the endpoint.

Labels never carry credentials: ``tags`` holds the user's ``--tag`` values, never environment values, and
the endpoint's user-info and query are dropped from every message.
"""

from __future__ import annotations

import functools
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from tau_core.errors import TauError, UsageError
from tau_core.fsutil import write_json_atomic

METRIC = "experiment_metrics"
CHECKPOINT_SCHEMA = "tau.metrics.remote_write.v1"
#: The labels of every ``experiment_metrics`` series (reference §5.2), besides ``__name__``.
LABELS = ("workspace_id", "source_store_id", "project", "experiment_id", "run_group_id", "run_id", "metric_name",
          "source", "unit", "split", "metric_file_id", "metric_file_path", "tags", "step")
TIMEOUT = 30.0


class RemoteWriteError(TauError):
    """adx-mon did not take a request (after the retries): the chunk is not checkpointed."""


@attrs.frozen
class RemoteWriteOptions:
    endpoint: str
    batch_size: int = 5000
    max_attempts: int = 3
    backoff: float = 1.0


def expand_endpoint(value: str) -> str:
    """``--remote-write-endpoint`` with ``$VAR``/``${VAR}`` expanded from the environment (``${NODE_IP}``)."""
    expanded = os.path.expandvars(value.strip())
    if "$" in expanded:
        raise UsageError(f"--remote-write-endpoint {value!r}: a variable in it is not set",
                         hint="set it (the sidecar gets NODE_IP from the downward API) or pass a full URL")
    parsed = urllib.parse.urlsplit(expanded)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise UsageError(f"--remote-write-endpoint {redact(expanded)!r} is not an http(s) URL",
                         hint="for example http://${NODE_IP}:3100/receive")
    return expanded


def redact(url: str) -> str:
    """The endpoint as shown in messages: scheme, host, port and path (no user-info, no query)."""
    try:
        parsed = urllib.parse.urlsplit(url)
        host = parsed.hostname or ""
        port = f":{parsed.port}" if parsed.port else ""
    except ValueError:
        return "<malformed URL>"
    return f"{parsed.scheme}://{host}{port}{parsed.path}"


def tags_label(tags: Mapping[str, str]) -> str:
    """The ``tags`` label: the user tags as compact JSON with sorted keys ('' without tags)."""
    return json.dumps(dict(sorted(tags.items())), separators=(",", ":"), ensure_ascii=False) if tags else ""


@attrs.frozen(kw_only=True)
class SeriesLabels:
    """The labels a group of points shares (everything but ``metric_name`` and ``step``)."""

    workspace_id: str = ""
    source_store_id: str = ""
    project: str = ""
    experiment_id: str = ""
    run_group_id: str = ""
    run_id: str = ""
    source: str = ""
    unit: str = ""
    split: str = ""
    metric_file_id: str = ""
    metric_file_path: str = ""
    tags: str = ""

    def point(self, metric_name: str, step: int | None, value: float, timestamp_ms: int) -> Any:
        """One ``experiment_metrics`` series (a :class:`tau_core.promwrite.Series`)."""
        from tau_core.promwrite import series

        step_label = "" if step is None else str(int(step))
        return series(METRIC, [*_constant_pairs(self), ("metric_name", metric_name), ("step", step_label)], value,
                      timestamp_ms)


@functools.lru_cache(maxsize=64)
def _constant_pairs(labels: SeriesLabels) -> tuple[tuple[str, str], ...]:
    fields = attrs.asdict(labels)
    return tuple((name, str(fields[name])) for name in LABELS if name in fields)


def _checkpoint(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise RemoteWriteError(f"{path}: unreadable remote-write checkpoint ({exc})",
                               hint="remove it to write this chunk again (adx-mon then receives it twice)") from None
    return doc if isinstance(doc, dict) else {}


def is_complete(path: Path, digest: str = "") -> bool:
    doc = _checkpoint(path)
    return bool(doc.get("complete")) and str(doc.get("digest") or "") == digest


class RemoteWriter:
    """POSTs batches of series to one adx-mon endpoint."""

    def __init__(self, options: RemoteWriteOptions, sleep: Callable[[float], None] = time.sleep) -> None:
        self.options = options
        self.sleep = sleep
        self.requests = 0

    def post(self, body: bytes) -> None:
        """One request, retried; :class:`RemoteWriteError` once the attempts are spent or on a 4xx refusal."""
        from tau_core.promwrite import HEADERS

        attempts = max(1, self.options.max_attempts)
        where = redact(self.options.endpoint)
        delay, reason = self.options.backoff, ""
        for attempt in range(1, attempts + 1):
            request = urllib.request.Request(self.options.endpoint, data=body, headers=HEADERS, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                    response.read()
                self.requests += 1
                return
            except urllib.error.HTTPError as exc:
                reason = f"HTTP {exc.code} {exc.reason}"
                if exc.code < 500 and exc.code != 429:
                    raise RemoteWriteError(f"remote write to {where} was refused: {reason}",
                                           hint="adx-mon rejected the data; check its logs") from None
            except (urllib.error.URLError, OSError) as exc:
                reason = str(getattr(exc, "reason", exc))
            if attempt < attempts:
                self.sleep(delay)
                delay *= 2
        raise RemoteWriteError(f"remote write to {where} failed after {attempts} attempt(s): {reason}",
                               hint="is adx-mon running there? the chunk stays unsent and is retried next time")

    def send(self, items: Sequence[Any], checkpoint: Path, digest: str = "") -> int:
        """Send ``items`` (series) from where ``checkpoint`` left off; the number sent now (0: already done).
        ``digest`` names the content: a checkpoint of other content starts over."""
        from tau_core.promwrite import encode

        doc = _checkpoint(checkpoint)
        sent = int(doc.get("sent") or 0) if str(doc.get("digest") or "") == digest else 0
        if doc.get("complete") and str(doc.get("digest") or "") == digest:
            return 0
        start, size = sent, max(1, self.options.batch_size)
        while True:
            batch = items[sent:sent + size]
            if batch:
                self.post(encode(batch))
                sent += len(batch)
            write_json_atomic(checkpoint, {
                "schema_version": CHECKPOINT_SCHEMA, "digest": digest, "samples": len(items), "sent": sent,
                "complete": sent >= len(items), "updated_at": datetime.now(UTC).isoformat()}, durable=True)
            if sent >= len(items):
                return sent - start
