"""The ``taugrid-portal`` command line.

Import-light: click and tau_core only.  The store, polars and the Stellar commands load
inside the command that needs them; ``stellar``/``serve``/``open`` come from
``taugrid_portal.stellar.cli`` when that module is installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import click

from tau_core.cli_options import CONTEXT_SETTINGS as CONTEXT
from tau_core.errors import UsageError
from tau_core.output import info, render_table, to_json
from taugrid_portal import __version__
from taugrid_portal.cliutil import PROG, emit_rows, field_table, json_flag, open_store, store_option
from taugrid_portal.kusto_status import kusto_table, search_from, source_options, status_from
from taugrid_portal.offload_cli import SUBGROUPS

LAZY_STELLAR = ("stellar", "serve", "open")
ALIASES = {"runs": "search", "dashboard": "stellar"}


def _fmt(output: str, as_json: bool) -> str:
    return "json" if as_json else output


class ExperimentGroup(click.Group):
    """``experiment``: built-in verbs, aliases, and the Stellar verbs loaded on demand."""

    def _stellar(self, name: str) -> click.Command | None:
        if importlib.util.find_spec("taugrid_portal.stellar") is None:
            return None
        try:
            if importlib.util.find_spec("taugrid_portal.stellar.cli") is None:
                return None
        except ModuleNotFoundError:
            return None
        module = importlib.import_module("taugrid_portal.stellar.cli")
        command = getattr(module, name, None)
        if command is None:
            command = getattr(module, f"{name}_command", None)
        if not isinstance(command, click.Command):
            return None
        if name in ("serve", "open"):
            from taugrid_portal.serve_flags import with_reference_flags

            return with_reference_flags(command)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(super().list_commands(ctx))
        for name in LAZY_STELLAR:
            if self._stellar(name) is not None:
                names.add(name)
        return sorted(names)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd_name = ALIASES.get(cmd_name, cmd_name)
        if cmd_name in LAZY_STELLAR:
            return self._stellar(cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                            list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        return (cmd.name if cmd is not None else name), cmd, rest


class RootGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), "portal"})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name == "exp":
            cmd_name = "experiment"
        if cmd_name == "portal":
            from taugrid_portal.portal.cli import portal

            return portal
        return super().get_command(ctx, cmd_name)


@click.group(cls=RootGroup, context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name=PROG, message="%(prog)s version %(version)s")
def cli() -> None:
    """Tau experiment tracking and observability portal.

    \b
    Examples:
      taugrid-portal experiment init resnet-sweep --store ./tau-exp
      taugrid-portal experiment import jsonl --run train-1 --history 'logs/*.jsonl' --store ./tau-exp
      taugrid-portal experiment search --metric-filter 'loss@min<0.5' --store ./tau-exp
    """


@cli.command("version")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def version_cmd(output: str) -> None:
    """Print the taugrid-portal version."""
    if output == "json":
        from taugrid_portal.store import METRIC_SCHEMA_VERSION, SCHEMA_VERSION

        click.echo(to_json({"name": PROG, "version": __version__, "store_schema": SCHEMA_VERSION,
                            "metric_schema": METRIC_SCHEMA_VERSION}))
    else:
        click.echo(f"{PROG} version {__version__}")


@cli.group("experiment", cls=ExperimentGroup, context_settings=CONTEXT)
def experiment() -> None:
    """Track, query, and visualize Tau experiment state.

    Every verb reads the store from --store, else $TAU_EXP_STORE, else
    $TAU_EXP_STORE_ROOT/$TAU_CONTEXT/$TAU_TEAM/$TAU_PROJECT.

    \b
    Examples:
      taugrid-portal experiment init vision --store ./tau-exp
      taugrid-portal experiment import jsonl --run r1 --history 'run1/*.jsonl' --experiment vision
      taugrid-portal experiment status vision -o json
      taugrid-portal experiment compare vision --metric eval/accuracy
    """


# -- init -----------------------------------------------------------------------------------
@experiment.command("init")
@click.argument("name")
@click.option("--project", help="Project of the store and experiment (default: NAME).")
@click.option("--description", help="One line describing the experiment.")
@click.option("--group", default="default", show_default=True, help="Run group (arm) to create.")
@click.option("--idempotency-key", help="Make a retried init a no-op.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@store_option
def init_cmd(name: str, project: str | None, description: str | None, group: str, idempotency_key: str | None,
             output: str, store: str | None) -> None:
    """Create or attach a store and register experiment NAME.

    \b
    Example:
      taugrid-portal experiment init resnet-sweep --store ./tau-exp --description "lr sweep"
    """
    from taugrid_portal.store import ExperimentStore, resolve_store
    from taugrid_portal.store._util import validate_id
    from taugrid_portal.store.writes import init_experiment

    root = resolve_store(store)
    proj = validate_id("project", project or name)
    validate_id("experiment", name)
    s, created = ExperimentStore.init(root, project=proj)
    with s:
        result = init_experiment(s, name, project=proj, description=description, group=group,
                                 idempotency_key=idempotency_key)
    status_cmd = f"{PROG} experiment status {name} --store {root} -o json"
    doc = {"store": str(root), "created_store": created, **result, "status_command": status_cmd}
    if output == "json":
        click.echo(to_json(doc))
        return
    click.echo(f"{'initialized' if created else 'attached'} experiment store {root}")
    click.echo(f"experiment: {name}")
    click.echo(f"group: {group}")
    click.echo(f"status: {status_cmd}")


# -- track ----------------------------------------------------------------------------------
def _kv(values: Sequence[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        if "=" not in v or not v.split("=", 1)[0].strip():
            raise UsageError(f"{flag}: expected key=value, got {v!r}")
        k, _, val = v.partition("=")
        out[k.strip()] = val.strip()
    return out


@experiment.command("track")
@click.argument("run")
@click.option("--project", help="Project (default: the store's project).")
@click.option("--group", default="default", show_default=True)
@click.option("--experiment", "experiment_id", help="Experiment the run belongs to.")
@click.option("--parent-run")
@click.option("--state", default="succeeded", show_default=True)
@click.option("--owner")
@click.option("--created-at", help="RFC3339.")
@click.option("--started-at", help="RFC3339.")
@click.option("--completed-at", help="RFC3339.")
@click.option("--config-hash")
@click.option("--code-sha")
@click.option("--image-digest")
@click.option("--command", "tau_command", help="The command that produced the run.")
@click.option("--result-uri")
@click.option("--config", "configs", multiple=True, type=click.Path(dir_okay=False),
              help="Config file (yaml, json or raw); repeatable.")
@click.option("--config-format", type=click.Choice(["yaml", "json", "raw"]))
@click.option("--artifact", "artifacts", multiple=True,
              help="URI, type:name=URI, or a JSON object; repeatable.")
@click.option("--runtime")
@click.option("--dependencies")
@click.option("--log-uri")
@click.option("--tag", "tags", multiple=True, help="key=value; repeatable.")
@click.option("--metric", "metrics", multiple=True, help="name=value; repeatable.")
@click.option("--step", type=int)
@click.option("--wall-time", help="RFC3339 time of the metric values.")
@click.option("--metric-source", default="tau", show_default=True)
@click.option("--split")
@click.option("--unit")
@click.option("--idempotency-key")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@json_flag
@store_option
def track_cmd(run: str, project: str | None, group: str, experiment_id: str | None, parent_run: str | None,
              state: str, owner: str | None, created_at: str | None, started_at: str | None,
              completed_at: str | None, config_hash: str | None, code_sha: str | None, image_digest: str | None,
              tau_command: str | None, result_uri: str | None, configs: tuple[str, ...], config_format: str | None,
              artifacts: tuple[str, ...], runtime: str | None, dependencies: str | None, log_uri: str | None,
              tags: tuple[str, ...], metrics: tuple[str, ...], step: int | None, wall_time: str | None,
              metric_source: str, split: str | None, unit: str | None, idempotency_key: str | None, output: str,
              as_json: bool, store: str | None) -> None:
    """Record run RUN with its configs, artifacts, tags and scalar metrics.

    \b
    Example:
      taugrid-portal experiment track train-042 --group lr-3e4 --config tau.yaml \\
        --artifact plot:loss.png=reports/loss.png --metric eval/accuracy=0.91 --step 1000
    """
    import math

    from taugrid_portal.store._util import normalize_time
    from taugrid_portal.store.writes import load_config, parse_artifact, record_run

    metric_values: dict[str, float] = {}
    for m in metrics:
        name, sep, raw = m.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--metric: expected name=value, got {m!r}")
        try:
            metric_values[name.strip()] = float(raw)
        except ValueError:
            raise UsageError(f"--metric {m!r}: {raw!r} is not a number") from None
        if not math.isfinite(metric_values[name.strip()]):
            info(f"note: --metric {name.strip()} is non-finite; it is stored and counted as non-finite")
    if step is not None and step < 0:
        raise UsageError("--step must be non-negative")
    s = open_store(store)
    with s:
        result = record_run(
            s, run, project=project, group=group, experiment=experiment_id, parent_run=parent_run, state=state,
            owner=owner, created_at=normalize_time(created_at, what="--created-at"),
            started_at=normalize_time(started_at, what="--started-at"),
            completed_at=normalize_time(completed_at, what="--completed-at"), config_hash=config_hash,
            code_sha=code_sha, image_digest=image_digest, command=tau_command, result_uri=result_uri,
            configs=[load_config(Path(c), config_format) for c in configs],
            artifacts=[parse_artifact(a, run) for a in artifacts], tags=_kv(tags, "--tag"), metrics=metric_values,
            step=step, wall_time=wall_time, metric_source=metric_source, split=split, unit=unit,
            context={k: v for k, v in {"runtime": runtime, "dependencies": dependencies, "log_uri": log_uri}.items()
                     if v} or None,
            idempotency_key=idempotency_key,
        )
    if _fmt(output, as_json) == "json":
        click.echo(to_json(result))
        return
    click.echo(field_table([
        ("run", result["run_id"]), ("created_run", result["created_run"]), ("configs", len(result["configs"])),
        ("artifacts", len(result["artifacts"])), ("tags", len(result["tags"])),
        ("metric_files", len(result["metric_files"])), ("metric_rows", result["metric_rows"]),
        ("reused", result["reused"]), ("idempotency_key", result["idempotency_key"] or ""),
    ]))


# -- import jsonl ---------------------------------------------------------------------------
@experiment.group("import", context_settings=CONTEXT)
def import_group() -> None:
    """Import scalar history into the store."""


class _Progress:
    def __init__(self) -> None:
        self.start = time.monotonic()
        self.last = self.start

    def __call__(self, path: str, done: int, total: int) -> None:
        t = time.monotonic()
        if t - self.last >= 1.0:
            self.last = t
            pct = 100 * done / total if total else 100
            info(f"importing {Path(path).name}: {pct:.0f}% ({done / 1e6:.1f} of {total / 1e6:.1f} MB, "
                 f"{t - self.start:.0f}s)")


def _tau_yaml_defaults() -> dict[str, str]:
    """``name``/``run.name`` and ``experiment.{name,project,group}`` from ./tau.yaml, when present."""
    for candidate in ("tau.yaml", "tau.yml"):
        path = Path(candidate)
        if not path.is_file():
            continue
        from ruamel.yaml import YAML  # only when there is a file: the import costs every command otherwise
        from ruamel.yaml.error import YAMLError

        try:
            data = YAML(typ="safe", pure=True).load(path.read_text("utf-8"))
        except (OSError, YAMLError):
            return {}
        if not isinstance(data, dict):
            return {}
        run_raw, exp_raw = data.get("run"), data.get("experiment")
        run: dict[str, object] = run_raw if isinstance(run_raw, dict) else {}
        exp: dict[str, object] = exp_raw if isinstance(exp_raw, dict) else {}
        out = {"run": run.get("name") or data.get("name"), "experiment": exp.get("name"),
               "project": exp.get("project"), "group": exp.get("group")}
        return {k: str(v) for k, v in out.items() if isinstance(v, (str, int)) and str(v)}
    return {}


@import_group.command("jsonl")
@click.option("--run", help="Run id to import into (default: name in ./tau.yaml).")
@click.option("--history", multiple=True, required=True, help="JSONL file or glob; repeatable.")
@click.option("--project", help="Project (default: the store's project).")
@click.option("--experiment", "experiment_id", help="Experiment (default: experiment.name in ./tau.yaml).")
@click.option("--group", help="Run group (default: experiment.group in ./tau.yaml, else default).")
@click.option("--owner", default="jsonl-import", show_default=True)
@click.option("--state", default="succeeded", show_default=True)
@click.option("--metric-prefix", help="Store metrics as PREFIX/<name>.")
@click.option("--source", default="jsonl", show_default=True)
@click.option("--tag", "tags", multiple=True, help="key=value; repeatable.")
@click.option("--step-field", default="_step", show_default=True)
@click.option("--time-field", default="_timestamp", show_default=True)
@click.option("--idempotency-key")
@click.option("--dry-run", is_flag=True, help="Validate and plan; write nothing.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@json_flag
@store_option
def import_jsonl_cmd(run: str | None, history: tuple[str, ...], project: str | None, experiment_id: str | None,
                     group: str | None,
                     owner: str, state: str, metric_prefix: str | None, source: str, tags: tuple[str, ...],
                     step_field: str, time_field: str, idempotency_key: str | None, dry_run: bool, output: str,
                     as_json: bool, store: str | None) -> None:
    """Import JSONL scalar history (one object per line) for one run.

    Each line looks like {"_step": 0, "_timestamp": 1760000000.125, "loss": 1.0}.
    Re-running the same import is a no-op (reported as reused).

    \b
    Examples:
      taugrid-portal experiment import jsonl --run r1 --history 'metrics-history-attempt-0/*.jsonl'
      taugrid-portal experiment import jsonl --run r1 --history run.jsonl --dry-run -o json
    """
    from taugrid_portal.store.writes import import_jsonl

    defaults = _tau_yaml_defaults() if not (run and experiment_id and group) else {}
    run = run or defaults.get("run")
    if not run:
        raise UsageError("--run is required", hint="pass --run RUN (or run it next to a tau.yaml with a name)")
    experiment_id = experiment_id or defaults.get("experiment")
    project = project or defaults.get("project")
    group = group or defaults.get("group") or "default"
    s = open_store(store)
    progress = _Progress()
    with s:
        result = import_jsonl(
            s, run=run, history=list(history), project=project, experiment=experiment_id, group=group, owner=owner,
            state=state, metric_prefix=metric_prefix, source=source, tags=_kv(tags, "--tag"), step_field=step_field,
            time_field=time_field, idempotency_key=idempotency_key, dry_run=dry_run, progress=progress,
        )
    elapsed = time.monotonic() - progress.start
    if elapsed >= 1.0:
        info(f"{result['action']} {result['rows']} rows from {len(result['history_files'])} file(s) in {elapsed:.1f}s")
    if _fmt(output, as_json) == "json":
        click.echo(to_json(result))
        return
    click.echo(render_table(
        [[result["action"], result["run_id"], result["rows"], len(result["history_files"]), result["metric_file"],
          result["idempotency_key"]]],
        ["ACTION", "RUN", "ROWS", "HISTORY_FILES", "METRIC_FILE", "IDEMPOTENCY_KEY"],
    ))


# -- list -----------------------------------------------------------------------------------
RUN_COLS = ["run_id", "project", "run_group_id", "state", "owner", "created_at", "completed_at", "result_uri"]
GROUP_COLS = ["run_group_id", "project", "name", "created_at", "updated_at"]
EXP_COLS = ["experiment_id", "name", "project", "source", "runs", "run_groups", "state_counts", "lifecycle_counts",
            "latest_run_at", "metric_names"]


@experiment.command("list")
@click.option("--kind", type=click.Choice(["runs", "groups", "run-groups", "experiments"]), default="runs",
              show_default=True)
@click.option("--project")
@click.option("--group")
@click.option("--state")
@click.option("--tag", "tags", multiple=True, help="key=value; repeatable.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@json_flag
@store_option
def list_cmd(kind: str, project: str | None, group: str | None, state: str | None, tags: tuple[str, ...],
             output: str, as_json: bool, store: str | None) -> None:
    """List runs, run groups or experiments.

    \b
    Examples:
      taugrid-portal experiment list
      taugrid-portal experiment list --kind experiments -o json
    """
    from taugrid_portal.store.search import search_experiments

    output = _fmt(output, as_json)
    s = open_store(store)
    with s:
        if kind == "runs":
            rows = [r.to_dict() for r in s.runs(group=group, project=project, state=state, tags=_kv(tags, "--tag"))]
            emit_rows(rows, RUN_COLS, output, empty="(no runs)")
        elif kind in ("groups", "run-groups"):
            emit_rows(s.run_groups(project), GROUP_COLS, output, empty="(no run groups)")
        else:
            doc = search_experiments(s, project=project, tags=_kv(tags, "--tag"), limit=1000)
            emit_rows(doc["experiments"], EXP_COLS, output, empty="(no experiments)")


# -- search ---------------------------------------------------------------------------------
SEARCH_COLS = ["run_id", "lifecycle_state", "successful", "state", "project", "run_group_id", "created_at",
               "completed_at", "metric_names", "tags", "success_reasons"]


@experiment.command("search")
@click.option("-q", "--query", "q", help="Free text over ids, owner, tags and metric names.")
@click.option("--target", help="Limit to a run group, run or experiment.")
@click.option("--project")
@click.option("--group")
@click.option("--state")
@click.option("--lifecycle", type=click.Choice(["pending", "running", "failed", "succeeded", "incomplete",
                                                "success", "successful"]))
@click.option("--tag", "tags", multiple=True, help="key=value; repeatable.")
@click.option("--metric-name", "metric_names", multiple=True, help="Run must have this metric; repeatable.")
@click.option("--metric-filter", "metric_filters", multiple=True,
              help="metric[@latest|min|max|count|...]OP value, e.g. 'loss@min<0.5'; repeatable.")
@click.option("--since", help="RFC3339, a duration (36h) or Nd (7d).")
@click.option("--min-step", help="Success gate: the run must reach this step.")
@click.option("--limit", type=int, default=200, show_default=True, help="At most 1000.")
@click.option("-o", "--output", type=click.Choice(["table", "json", "jsonl", "csv"]), default="table",
              show_default=True)
@json_flag
@store_option
@source_options
def search_cmd(q: str | None, target: str | None, project: str | None, group: str | None, state: str | None,
               lifecycle: str | None, tags: tuple[str, ...], metric_names: tuple[str, ...],
               metric_filters: tuple[str, ...], since: str | None, min_step: str | None, limit: int, output: str,
               as_json: bool, store: str | None, source: str, kusto_endpoint: str | None, kusto_database: str) -> None:
    """Search runs (alias: runs).

    \b
    Examples:
      taugrid-portal experiment search -q resnet --since 7d
      taugrid-portal experiment search --metric-filter 'loss@min<0.5' --lifecycle succeeded -o csv
      taugrid-portal experiment runs --tag dataset=imagenet -o jsonl
      taugrid-portal experiment search --project vision --source kusto --kusto-endpoint https://adx...
    """
    doc = search_from(source, store, kusto_endpoint, kusto_database, q=q, target=target, project=project,
                      group=group, state=state, lifecycle=lifecycle, tags=tags, metric_names=metric_names,
                      metric_filters=metric_filters, since=since, min_step=min_step, limit=limit)
    output = _fmt(output, as_json)
    emit_rows(doc["runs"], SEARCH_COLS, output, document=doc, empty="(no matching runs)")
    if output == "table" and doc["truncated"]:
        info(f"showing {len(doc['runs'])} of {doc['total']} matching runs (raise --limit, at most 1000)")


# -- status ---------------------------------------------------------------------------------
@experiment.command("status")
@click.argument("name")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@json_flag
@store_option
@source_options
def status_cmd(name: str, output: str, as_json: bool, store: str | None, source: str, kusto_endpoint: str | None,
               kusto_database: str) -> None:
    """Show the evidence and lifecycle of a run group, run or experiment.

    \b
    Example:
      taugrid-portal experiment status resnet-sweep -o json
      taugrid-portal experiment status train-7f2c --source kusto --kusto-endpoint https://adx...
    """
    doc = status_from(name, store, source, kusto_endpoint, kusto_database)
    if _fmt(output, as_json) == "json" or doc["source"] == "kusto":
        click.echo(to_json(doc) if _fmt(output, as_json) == "json" else kusto_table(doc))
        return
    click.echo(render_table(
        [[doc["target"], doc["target_type"], doc["runs"], doc["groups"], doc["configs"], doc["metric_files"],
          doc["artifacts"], doc["observations"], doc["latest_event"] or ""]],
        ["TARGET", "TYPE", "RUNS", "GROUPS", "CONFIGS", "METRIC_FILES", "ARTIFACTS", "OBSERVATIONS", "LATEST_EVENT"],
    ))
    states = ", ".join(f"{k}={v}" for k, v in doc["states"].items()) or "(none)"
    life = ", ".join(f"{k}={v}" for k, v in doc["lifecycle"].items()) or "(none)"
    click.echo(f"states:  {states}")
    click.echo(f"lifecycle:  {life}")


@experiment.command("fsck")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@store_option
def fsck_cmd(output: str, store: str | None) -> None:
    """Recover a store after a crash: remove staged and placed files the index does not reference.

    Runs under the writer lock (every write also recovers what a killed writer left).
    """
    s = open_store(store)
    with s:
        removed = s.fsck()
    if output == "json":
        click.echo(to_json({"removed": removed}))
        return
    for rel in removed:
        click.echo(f"removed {rel}")
    click.echo(f"{len(removed)} orphan file(s) removed; index and files agree")


# -- compare --------------------------------------------------------------------------------
COMPARE_COLS = ["metric_name", "direction", "run_group_id", "run_count", "latest_step", "min", "p25", "median",
                "p75", "max", "best_value", "best_run_id", "winner"]


@experiment.command("compare")
@click.argument("target")
@click.option("--metric", help="Metric to compare (default: the primary outcome metric).")
@click.option("--direction", type=click.Choice(["max", "min"]), default="max", show_default=True)
@click.option("-o", "--output", type=click.Choice(["table", "json", "jsonl", "csv"]), default="table",
              show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "jsonl", "csv"]), help="Overrides -o.")
@json_flag
@store_option
def compare_cmd(target: str, metric: str | None, direction: str, output: str, fmt: str | None, as_json: bool,
                store: str | None) -> None:
    """Compare run groups of TARGET on one metric (each run's latest value).

    \b
    Example:
      taugrid-portal experiment compare resnet-sweep --metric loss --direction min
    """
    from taugrid_portal.analysis import compare

    s = open_store(store)
    with s:
        doc = compare(s, target, metric=metric, direction=direction)
    emit_rows(doc["groups"], COMPARE_COLS, _fmt(fmt or output, as_json), document=doc)


# -- plot -----------------------------------------------------------------------------------
@experiment.command("plot")
@click.argument("target")
@click.option("--metric", help="Metric to plot (default: the primary outcome metric, else loss).")
@click.option("--out", type=click.Path(dir_okay=False), help="SVG file to write (required).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@json_flag
@store_option
def plot_cmd(target: str, metric: str | None, out: str | None, output: str, as_json: bool, store: str | None) -> None:
    """Write a deterministic SVG line plot of one metric across TARGET's runs.

    \b
    Example:
      taugrid-portal experiment plot resnet-sweep --metric loss --out loss.svg
    """
    from taugrid_portal.analysis import plot

    if not out:
        raise UsageError("--out is required", hint="for example --out loss.svg")
    s = open_store(store)
    with s:
        doc = plot(s, target, metric=metric, out=Path(out))
    if _fmt(output, as_json) == "json":
        click.echo(to_json(doc))
        return
    click.echo(field_table([("target", doc["target"]), ("target_type", doc["target_type"]),
                            ("metric", doc["metric_name"]), ("out", doc["out"]), ("bytes", doc["bytes"]),
                            ("series", len(doc["series"]))]))
    for w in doc["warnings"]:
        info(f"note: {w}")


for _group in SUBGROUPS:  # offload metrics, kusto schema|metrics-query|lifecycle-query
    experiment.add_command(_group)


def main(args: Sequence[str] | None = None) -> None:
    from tau_core.cli import run

    sys.exit(run(cli, args, prog_name=PROG))

