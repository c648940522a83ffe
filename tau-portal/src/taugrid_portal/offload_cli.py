"""``experiment offload metrics`` and ``experiment kusto schema|metrics-query|lifecycle-query`` (thin commands).

Import-light: click and tau_core; the offload loop (:mod:`taugrid_portal.offload`) loads when the command runs.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from tau_core.cli_options import CONTEXT_SETTINGS as CONTEXT
from tau_core.errors import UsageError
from tau_core.output import render_table, to_json, warning
from taugrid_portal.cliutil import json_flag, store_option
from taugrid_portal.kusto_cli import kusto_group

#: ``--watch`` reads these for flags left unset (the rendered sidecar sets some of them); each is listed in
#: ``tau_core.envvars``
ENV_FLAGS = {
    "run": "TAU_METRICS_OFFLOAD_RUN",
    "project": "TAU_METRICS_OFFLOAD_PROJECT",
    "experiment": "TAU_METRICS_OFFLOAD_EXPERIMENT",
    "group": "TAU_METRICS_OFFLOAD_GROUP",
    "source": "TAU_METRICS_OFFLOAD_SOURCE",
    "out": "TAU_METRICS_OFFLOAD_OUT",
    "completion_file": "TAU_METRICS_OFFLOAD_COMPLETION_FILE",
    "status_artifact_uri": "TAU_METRICS_OFFLOAD_ARTIFACT_URI",
    "status_checkpoint_uri": "TAU_METRICS_OFFLOAD_CHECKPOINT_URI",
    "interval": "TAU_METRICS_OFFLOAD_INTERVAL",
    "remote_write_endpoint": "TAU_METRICS_OFFLOAD_REMOTE_WRITE_ENDPOINT",
    "kusto_endpoint": "TAU_METRICS_OFFLOAD_KUSTO_ENDPOINT",
    "kusto_database": "TAU_METRICS_OFFLOAD_KUSTO_DATABASE",
    "kusto_ingest_endpoint": "TAU_METRICS_OFFLOAD_KUSTO_INGEST_ENDPOINT",
    "kusto_cluster": "TAU_METRICS_OFFLOAD_KUSTO_CLUSTER",
    "kusto_namespace": "TAU_METRICS_OFFLOAD_KUSTO_NAMESPACE",
}
WATCH_COLS = ["ITERATION", "MODE", "ROWS", "IMPORT_ROWS", "KUSTO_EVENTS", "KUSTO_PENDING", "REMOTE_WRITE_SAMPLES",
              "COMPLETED", "CHECKPOINT"]
OFFLINE_COLS = ["MODE", "ROWS", "EXPORTED_AT", "REMOTE_WRITE_SAMPLES", "METRICS_FILE", "CHECKPOINT"]


@click.group("offload", context_settings=CONTEXT)
def offload_group() -> None:
    """Ship a run's metrics while it trains (the metrics offload sidecar)."""


_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str, flag: str) -> float:
    """Go-style durations (``10s``, ``1m30s``, ``250ms``) or plain seconds, as seconds; must be positive."""
    try:
        seconds = float(value)
    except ValueError:
        parts = _DURATION.findall(value)
        if not parts or "".join(a + b for a, b in parts) != value:
            raise UsageError(f"{flag} {value!r} is not a duration", hint="for example 10s, 1m or 250ms") from None
        seconds = sum(float(a) * _UNITS[b] for a, b in parts)
    if seconds <= 0:
        raise UsageError(f"{flag} must be positive", hint="for example --interval 10s")
    return seconds


def parse_tags(values: tuple[str, ...], env_value: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    if env_value.strip().startswith("{"):
        tags.update({str(k): str(v) for k, v in json.loads(env_value).items()})
    elif env_value.strip():
        values = (*[v for v in env_value.split(",") if v.strip()], *values)
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--tag: expected key=value, got {item!r}", hint="for example --tag workspace=team-a")
        tags[key.strip()] = value
    return tags


def _with_env(params: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    for name, variable in ENV_FLAGS.items():
        if params.get(name) in (None, "") and env.get(variable):
            params[name] = env[variable]
    if not params.get("history") and env.get("TAU_METRICS_HISTORY"):
        params["history"] = tuple(h for h in env["TAU_METRICS_HISTORY"].split(os.pathsep) if h)
    return params


def _store_path(store: str | None, required: bool) -> Path | None:
    from taugrid_portal.store import resolve_store

    try:
        return resolve_store(store)
    except UsageError:
        if required:
            raise
        return None


def remote_options(p: dict[str, Any]) -> Any:
    """The ``--remote-write-*`` flags as :class:`~taugrid_portal.remote_write.RemoteWriteOptions` (None: off)."""
    from taugrid_portal.remote_write import RemoteWriteOptions, expand_endpoint

    attempts, batch = int(p.get("remote_write_max_attempts", 3)), int(p.get("remote_write_batch_size", 5000))
    if attempts < 0:
        raise UsageError("--remote-write-max-attempts must be non-negative", hint="0 or 1: one attempt, no retry")
    if batch <= 0:
        raise UsageError("--remote-write-batch-size must be positive", hint="the default is 5000 series a request")
    backoff = parse_duration(str(p.get("remote_write_retry_backoff") or "1s"), "--remote-write-retry-backoff")
    if not p.get("remote_write_endpoint"):
        return None
    return RemoteWriteOptions(expand_endpoint(str(p["remote_write_endpoint"])), batch, attempts, backoff)


def offline_options(p: dict[str, Any], remote: Any) -> Any:
    from taugrid_portal.offload_offline import OfflineOptions

    if p["watch"] or p.get("baseline"):
        raise UsageError("--watch and --baseline-existing-history need --history",
                         hint="without --history the command projects the whole store once (offline mode)")
    store = _store_path(p.get("store"), required=True)
    assert store is not None
    tags = parse_tags(tuple(p.get("tags") or ()), "")
    return OfflineOptions(out=Path(str(p["out"])).absolute(), store=store, remote_write=remote,
                          workspace_id=tags.get("workspace", ""))


def build_options(p: dict[str, Any]) -> Any:
    from taugrid_portal.offload import KustoTarget, OffloadOptions

    if p["watch"]:
        p = _with_env(dict(p), os.environ)
    if not p.get("out"):
        raise UsageError("--out is required", hint="for example --out /data/run/.tau/metrics/offload")
    remote = remote_options(p)
    if not p.get("history"):
        return offline_options(p, remote)
    if not p.get("run"):
        raise UsageError("--run is required with --history", hint="for example --run train-1")
    experiment = p.get("experiment") or p.get("group")
    if not experiment:
        raise UsageError("--experiment is required with --history", hint="for example --experiment resnet-sweep")
    if p["max_iterations"] < 0:
        raise UsageError("--max-iterations must be non-negative", hint="0 means no limit")
    kusto = None
    if p.get("kusto_endpoint"):
        kusto = KustoTarget(str(p["kusto_endpoint"]), str(p.get("kusto_database") or "Metrics"),
                            str(p.get("kusto_ingest_endpoint") or ""), str(p.get("kusto_cluster") or ""),
                            str(p.get("kusto_namespace") or ""))
    store = _store_path(p.get("store"), required=kusto is None and remote is None)
    return OffloadOptions(
        out=Path(str(p["out"])).absolute(), history=tuple(str(h) for h in p["history"]), run=str(p["run"]),
        project=str(p.get("project") or experiment), experiment=str(experiment), group=str(p.get("group") or
                                                                                               "default"),
        source=str(p.get("source") or "stellar-online"),
        tags=parse_tags(tuple(p.get("tags") or ()),
                        os.environ.get("TAU_METRICS_OFFLOAD_TAGS", "") if p["watch"] else ""),
        completion_file=Path(str(p["completion_file"])) if p.get("completion_file") else None,
        baseline=bool(p["baseline"]), ready_file=Path(p["ready_file"]) if p.get("ready_file") else None,
        done_file=Path(p["done_file"]) if p.get("done_file") else None, watch=bool(p["watch"]),
        interval=parse_duration(str(p.get("interval") or "1m"), "--interval"), max_iterations=p["max_iterations"],
        store=store, kusto=kusto, remote_write=remote, artifact_uri=str(p.get("status_artifact_uri") or ""),
        checkpoint_uri=str(p.get("status_checkpoint_uri") or ""))


@offload_group.command("metrics")
@click.option("--out", help="Spool and checkpoint directory (required).")
@click.option("--history", multiple=True, help="JSONL history file or glob; repeatable (env TAU_METRICS_HISTORY).")
@click.option("--run", help="Run id (required with --history).")
@click.option("--project", help="Project (default: the experiment).")
@click.option("--experiment", help="Experiment (required with --history; the group is the fallback).")
@click.option("--group", help="Run group (default: default).")
@click.option("--source", help="Metric source (default: stellar-online).")
@click.option("--tag", "tags", multiple=True, help="key=value; repeatable (workspace=W sets the Kusto workspace).")
@click.option("--completion-file", help="Exit cleanly once this file appears (written by the workload wrapper).")
@click.option("--baseline-existing-history", "baseline", is_flag=True,
              help="On first start, skip what the history files already hold (needs --ready-file).")
@click.option("--ready-file", help="Written (ready) once the sidecar is ready.")
@click.option("--done-file", help="Written (done) after the completion file was handled.")
@click.option("--status-artifact-uri", help="The run's artifact URI (recorded with its status).")
@click.option("--status-checkpoint-uri", help="The run's checkpoint URI (recorded with its status).")
@click.option("--watch", is_flag=True, help="Keep tailing every --interval until the completion file appears.")
@click.option("--interval", help="Time between passes with --watch (default 1m).")
@click.option("--max-iterations", type=int, default=0, show_default=True, help="Stop after N passes (0: no limit).")
@click.option("--remote-write-endpoint",
              help="adx-mon Prometheus remote write, env-expanded (e.g. http://${NODE_IP}:3100/receive).")
@click.option("--remote-write-batch-size", type=int, default=5000, show_default=True, help="Series per request.")
@click.option("--remote-write-max-attempts", type=int, default=3, show_default=True,
              help="Attempts per request (0 or 1: no retry).")
@click.option("--remote-write-retry-backoff", default="1s", show_default=True,
              help="Wait before the first retry (doubles each time).")
@click.option("--kusto-endpoint", help="Ship to this Kusto cluster through the Kusto telemetry sink.")
@click.option("--kusto-database", help="Kusto database (default Metrics).")
@click.option("--kusto-ingest-endpoint", help="Kusto Data Management endpoint (default: ingest-<cluster>).")
@click.option("--kusto-cluster", help="The cluster column of the events.")
@click.option("--kusto-namespace", help="The namespace column of the events.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@json_flag
@store_option
def offload_metrics(output: str, as_json: bool, **params: Any) -> None:
    """Tail a run's metrics history into its experiment store, Kusto and/or adx-mon, checkpointing per chunk.

    Without --history: project the whole store to <out>/TauExpMetrics.jsonl (offline/recovery mode) and, with
    --remote-write-endpoint, remote-write it once.

    \b
    Example (what a rendered metrics-offload sidecar runs):
      taugrid-portal experiment offload metrics --watch --run r1 --experiment e1 \\
        --history '/data/out/metrics/*.jsonl' --out /data/out/.tau/metrics/s1/offload \\
        --completion-file /var/run/tau/metrics-completion.json --interval 10s
    """
    from taugrid_portal.offload import CHECKPOINT, open_targets, watch

    opts = build_options(params)
    as_json = as_json or output == "json"
    if not hasattr(opts, "history"):
        _offline(opts, as_json)
        return
    if opts.baseline and not opts.ready_file:
        raise UsageError("--baseline-existing-history requires --ready-file", hint="for example --ready-file "
                         "/var/run/tau/metrics-ready")
    targets = open_targets(opts)

    def emit(iteration: int, result: Any, completed: bool) -> None:
        row = {"iteration": iteration, "mode": "online", "rows": result.rows, "import_rows": result.import_rows,
               "kusto_events": result.kusto_events, "kusto_pending": targets.kusto_pending,
               "remote_write_samples": result.remote_write_samples, "completed": completed,
               "checkpoint": str(opts.out / CHECKPOINT)}
        if targets.kusto_error:
            row["kusto_error"] = targets.kusto_error
        if targets.remote_error:
            row["remote_write_error"] = targets.remote_error
            warning(targets.remote_error)
        if as_json:
            click.echo(json.dumps(row) if opts.watch else to_json(row))  # watch: one JSON line per pass
        elif result.chunks or completed or not opts.watch or iteration == 1:
            cells = [str(row[c.lower()]).lower() for c in WATCH_COLS]
            click.echo(render_table([cells], WATCH_COLS) if iteration == 1 else "  ".join(cells))

    try:
        watch(opts, targets, emit)
    finally:
        targets.close()


def _offline(opts: Any, as_json: bool) -> None:
    from taugrid_portal.offload_offline import run_offline

    result = run_offline(opts)
    row = {"mode": "offline", "rows": result.rows, "exported_at": result.exported_at,
           "remote_write_samples": result.remote_write_samples, "metrics_file": result.metrics_file,
           "checkpoint": result.checkpoint}
    if result.remote_write_skipped:
        row["remote_write_skipped"] = True
    if as_json:
        click.echo(to_json(row))
    else:
        click.echo(render_table([[str(row[c.lower()]) for c in OFFLINE_COLS]], OFFLINE_COLS))


#: What ``taugrid-portal experiment`` adds from here.
SUBGROUPS = (offload_group, kusto_group)
