"""Stellar over the durable history in Kusto: ``experiment stellar|serve|open --source kusto|local|auto``.

The metric points (``TauExpMetricEventsV1``, deduplicated by ``event_id``) and the recorded lifecycle
(``TauExpRunLifecycle``) of a target are read through the ``kusto`` history source
(``tau_register_history_sources``; this module never imports tau-kusto), then written into a scratch
experiment store in a private temporary directory, from which the ordinary snapshot is built: the same
charts, cards and downsampling as for a local store.  The snapshot shows its store as ``kusto://<host>/<db>``
and its commands read Kusto again.

A target is a run, a run group or a project (tried in that order, as ``experiment status --source kusto``
does).  ``auto`` reads the local store when the target is there, else Kusto; a Kusto failure under ``auto``
is reported as a warning next to the local answer, under ``kusto`` it is the error.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import attrs

from tau_core.errors import NotFoundError, TauError, UsageError
from tau_core.history import LifecycleRow, MetricPoint, RunQuery, history_source, transitions
from tau_core.kql import MetricsFilter

SOURCES = ("local", "kusto", "auto")
T = TypeVar("T")
#: everything the target recorded: Stellar charts full histories (downsampled for display afterwards)
SINCE = "3650d"
MAX_ROWS = 1_000_000


@attrs.frozen
class KustoOrigin:
    """Where the durable history is: the ADX ``endpoint`` and ``database``; ``workspace`` scopes every read
    (the Stellar server's ``--workspace``; empty for the one-shot ``experiment stellar``)."""

    endpoint: str
    database: str = "Metrics"
    workspace: str = ""
    max_rows: int = MAX_ROWS

    @property
    def label(self) -> str:
        return f"kusto://{urlsplit(self.endpoint).netloc}/{self.database}"

    @property
    def option(self) -> str:
        """The CLI options that read this origin again (snapshot actions)."""
        return (f" --source kusto --kusto-endpoint {shlex.quote(self.endpoint)}"
                f" --kusto-database {shlex.quote(self.database)}")


def _points(source: Any, origin: KustoOrigin, target: str) -> tuple[list[MetricPoint], str]:
    """The target's points and what it named (``run``, ``run_group`` or ``project``)."""
    for kind, flt in (("run", MetricsFilter(runs=(target,))), ("run_group", MetricsFilter(group=target)),
                      ("project", MetricsFilter(project=target))):
        points: list[MetricPoint] = source.metric_points(
            attrs.evolve(flt, workspace=origin.workspace, since=SINCE, target_points=origin.max_rows))
        if points:
            return points, kind
    return [], ""


def _runs(rows: list[LifecycleRow], points: list[MetricPoint], target: str,
          workspace: str) -> dict[str, LifecycleRow]:
    """The final recorded row of each run of the target (the latest attempt's; terminal rows win)."""
    wanted = {p.run_id for p in points}
    by: dict[str, list[LifecycleRow]] = {}
    for row in rows:
        if workspace and row.workspace_id != workspace:
            continue
        if row.run_id in wanted or target in (row.run_id, row.run_group_id, row.project):
            by.setdefault(row.durable_id, []).append(row)
    final: dict[str, LifecycleRow] = {}
    for group in by.values():
        last = transitions(group)[-1]
        seen = final.get(last.run_id)
        if seen is None or (last.observed_at and seen.observed_at and last.observed_at >= seen.observed_at):
            final[last.run_id] = last
    return final


def read_target(origin: KustoOrigin, target: str) -> tuple[list[MetricPoint], dict[str, LifecycleRow], str]:
    """The target's metric points, each run's final lifecycle row and what the target named, from Kusto."""
    source = history_source("kusto", endpoint=origin.endpoint, database=origin.database)
    try:
        points, kind = _points(source, origin, target)
        rows = source.run_history(RunQuery(target if not points else "", limit=1000))
        if not rows and not points:  # a group or project with no metrics: its runs' lifecycle rows
            rows = source.run_history(RunQuery("", limit=1000))
    finally:
        source.close()
    runs = _runs(rows, points, target, origin.workspace)
    if not points and not runs:
        raise NotFoundError(f"no recorded metrics or lifecycle for {target!r} in Kusto {origin.database} at "
                            f"{origin.endpoint}", hint="check the name, or read the local store with --source local")
    if not kind:
        kind = "run" if target in runs else "project" if any(r.project == target for r in runs.values()) \
            else "run_group"
    return points, runs, kind


def _iso(row: LifecycleRow, name: str) -> str | None:
    value = getattr(row, name)
    return value.isoformat().replace("+00:00", "Z") if value else None


def materialize(origin: KustoOrigin, target: str, root: Path) -> Any:
    """A scratch experiment store at ``root`` holding what Kusto recorded for ``target`` (the caller closes it)."""
    from taugrid_portal.store import ExperimentStore

    points, runs, kind = read_target(origin, target)
    first = points[0] if points else next(iter(runs.values()))
    store, _ = ExperimentStore.init(root, project=first.project or "default")
    try:
        _fill(store, points, runs, target if kind == "project" else None)
    except BaseException:
        store.close()
        raise
    return store


def _fill(store: Any, points: list[MetricPoint], runs: dict[str, LifecycleRow], project: str | None) -> None:
    """Runs (from their final lifecycle row) and points into ``store``; a ``project`` target is the
    experiment every run belongs to (Kusto's experiment is the project, as in ``lifecycle-query``)."""
    from tau_core.telemetry import ScalarRecord
    from taugrid_portal.store.sink import write_records
    from taugrid_portal.store.track import record_run

    meta = {p.run_id: p for p in points}
    for run_id, row in runs.items():
        p = meta.get(run_id)
        record_run(store, run_id, project=(p.project if p else row.project) or "default",
                   group=(p.run_group_id if p else row.run_group_id) or "default",
                   experiment=project or (p.experiment_id if p else "") or None, state=row.state or "running",
                   created_at=_iso(row, "created_time") or _iso(row, "submit_time"),
                   started_at=_iso(row, "pod_start_time"), completed_at=_iso(row, "completion_time"),
                   image_digest=row.image_digest or None, config_hash=row.config_hash or None,
                   code_sha=row.code_sha or None, command=row.tau_command or None,
                   result_uri=row.result_path or None, tags=row.tags)
    missing = sorted({p.run_id for p in points} - set(runs))
    for run_id in missing:  # metrics without a recorded lifecycle: the run as the sidecar left it
        p = meta[run_id]
        record_run(store, run_id, project=p.project or "default", group=p.run_group_id or "default",
                   experiment=project or p.experiment_id or None, state="running")
    write_records(store, [ScalarRecord(run_id=p.run_id, metric_name=p.metric_name, value=p.value, step=p.step,
                                       wall_time=p.wall_time, project=p.project, run_group_id=p.run_group_id,
                                       experiment_id=p.experiment_id) for p in points], source="kusto")


def kusto_snapshot(origin: KustoOrigin, target: str, *, metric: str | None = None,
                   max_points: int | None = None) -> dict[str, Any]:
    """The Stellar snapshot of ``target`` from Kusto (``source: kusto``)."""
    from .snapshot import build_snapshot

    with tempfile.TemporaryDirectory(prefix="tau-stellar-kusto-") as tmp:
        store = materialize(origin, target, Path(tmp) / "store")
        with store:
            snap = build_snapshot(store, target, metric=metric, max_points=max_points,
                                  origin=(origin.label, origin.option))
    return {**snap, "source": "kusto"}


def local_has(store: Any, target: str) -> bool:
    """The local store knows ``target``."""
    try:
        store.resolve_target(target)
    except NotFoundError:
        return False
    return True


def choose(source: str, origin: KustoOrigin | None, local: Callable[[], T], in_local: Callable[[], bool],
           remote: Callable[[KustoOrigin], T], warn: Callable[[str], None]) -> T:
    """``--source`` semantics: ``local``; ``kusto`` (needs an origin); ``auto`` = local when the target is
    there (or when no Kusto is configured), else Kusto, degrading to the local answer with a warning when
    Kusto fails."""
    if source not in SOURCES:
        raise UsageError(f"--source {source!r} is not one of {', '.join(SOURCES)}")
    if source == "kusto" and origin is None:
        raise UsageError("--source kusto needs --kusto-endpoint")
    if source == "local" or origin is None:
        return local()
    if source == "kusto":
        return remote(origin)
    try:
        here = in_local()
    except TauError:
        here = False  # no local store at all: Kusto is the only answer
    if here:
        return local()
    try:
        return remote(origin)
    except NotFoundError:
        raise
    except TauError as exc:
        warn(f"warning: Kusto history at {origin.endpoint} is unavailable ({exc.message}); reading the local store")
    return local()


class ScratchStores:
    """The scratch stores of a Kusto-backed Stellar server, one per target, re-read from Kusto once older than
    ``refresh`` seconds.  A replaced store is deleted one replacement later, so a request still reading it
    finishes; everything goes with :meth:`close`."""

    def __init__(self, origin: KustoOrigin, refresh: float = 30.0) -> None:
        import shutil
        import threading
        import weakref

        self.origin = origin
        self.refresh = refresh
        self.root = Path(tempfile.mkdtemp(prefix="tau-stellar-kusto-"))
        weakref.finalize(self, shutil.rmtree, self.root, True)  # at the latest when the process exits
        self.entries: dict[str, tuple[float, Any]] = {}
        self.retired: dict[str, Any] = {}
        self.generation = 0
        self.lock = threading.Lock()

    def get(self, target: str) -> Any:
        import time

        with self.lock:
            hit = self.entries.get(target)
            if hit is not None and time.monotonic() - hit[0] < self.refresh:
                return hit[1]
            self.generation += 1
            store = materialize(self.origin, target, self.root / f"s{self.generation}")
            if hit is not None:
                self._drop(self.retired.pop(target, None))
                self.retired[target] = hit[1]
            self.entries[target] = (time.monotonic(), store)
            return store

    @staticmethod
    def _drop(store: Any) -> None:
        import shutil

        if store is not None:
            store.close()
            shutil.rmtree(store.root, ignore_errors=True)

    def close(self) -> None:
        import shutil

        with self.lock:
            for store in [s for _, s in self.entries.values()] + list(self.retired.values()):
                store.close()
            self.entries.clear()
            self.retired.clear()
            shutil.rmtree(self.root, ignore_errors=True)
