"""``tau data model ...`` verbs."""

from __future__ import annotations

import click

from tau_core.errors import UsageError
from tau_core.modelref import unstructure
from tau_core.output import emit, output_option, render_table, warning
from tau_core.storage import layout

from . import evidence
from .common import open_registry, parse_tags, registry_option
from .models import ModelRegistry, finetune_runs, metric_value, rank, record_from_finetune


@click.group("model")
def model() -> None:
    """Durable model checkpoints (finetune runs) and their aliases."""


def _reg(registry: str, namespace: str | None, context: str | None) -> ModelRegistry:
    return ModelRegistry(open_registry(registry, namespace, context))


@model.command("list")
@registry_option()
@click.option("--model", "model_name", default="")
@click.option("--tag", "tags", multiple=True, help="KEY=VALUE (repeatable).")
@click.option("--metric", default="", help="Show and sort by this metric.")
@click.option("--sort", "sort", type=click.Choice(["asc", "desc"]), default=None)
@output_option("table", "json")
def list_(registry: str, namespace: str | None, context: str | None, model_name: str, tags: tuple[str, ...],
          metric: str, sort: str | None, output: str) -> None:
    """List registered model runs."""
    records = _reg(registry, namespace, context).list(model_name, parse_tags(tags))
    if metric or sort:
        ranked = rank(records, metric, {"asc": "lower", "desc": "higher"}.get(sort or "", ""))
        records = ranked + [r for r in records if r not in ranked]
    emit([unstructure(r) for r in records], output, table=lambda _d: render_table(
        [(r.model, r.run, metric or (r.primary_metric.name if r.primary_metric else "-"),
          metric_value(r, metric), r.evidence.get("config_hash", "")[:12], r.completed_at or r.created_at)
         for r in records], ["model", "run", "metric", "value", "config", "completed"]))


@model.command("show")
@click.argument("ref")
@registry_option()
@output_option("json", "summary")
def show(ref: str, registry: str, namespace: str | None, context: str | None, output: str) -> None:
    """Show MODEL/RUN (registry record) or RUN (the finetune's model.json)."""
    record = _reg(registry, namespace, context).show(ref)
    emit(unstructure(record), output, table=lambda _d: "\n".join(
        [f"{record.model}/{record.run}", f"  checkpoint dir: {record.registry_path or '-'}",
         f"  primary metric: {record.primary_metric.name}={record.primary_metric.value}" if record.primary_metric
         else "  primary metric: -", f"  config hash: {record.evidence.get('config_hash') or '-'}"]))


@model.command("best")
@click.argument("model_name", metavar="MODEL")
@registry_option()
@click.option("--metric", default="")
@click.option("--direction", type=click.Choice(["lower", "higher"]), default=None)
@output_option("ref", "json")
def best(model_name: str, registry: str, namespace: str | None, context: str | None, metric: str,
         direction: str | None, output: str) -> None:
    """The best run of MODEL by a metric (MODEL@RUN)."""
    record = _reg(registry, namespace, context).best(layout.slug(model_name, "model"), metric, direction or "")
    emit(unstructure(record), output, table=lambda _d: f"{record.model}@{record.run}")


@model.group("alias")
def alias() -> None:
    """Point a model alias at a run."""


@alias.command("set")
@click.argument("model_name", metavar="MODEL")
@click.argument("alias_name", metavar="ALIAS")
@click.argument("run")
@registry_option()
@output_option("ref", "json")
def alias_set(model_name: str, alias_name: str, run: str, registry: str, namespace: str | None,
              context: str | None, output: str) -> None:
    """Set MODEL:ALIAS to RUN (overwrites)."""
    record = _reg(registry, namespace, context).alias_set(model_name, alias_name, run)
    emit(unstructure(record), output, table=lambda _d: f"{record.model}:{record.alias} -> {record.model}@{record.run}")


@alias.command("get")
@click.argument("model_name", metavar="MODEL")
@click.argument("alias_name", metavar="ALIAS")
@registry_option()
@output_option("ref", "json")
def alias_get(model_name: str, alias_name: str, registry: str, namespace: str | None, context: str | None,
              output: str) -> None:
    """Print the run MODEL:ALIAS points at (MODEL@RUN)."""
    record = _reg(registry, namespace, context).alias_get(model_name, alias_name)
    emit(unstructure(record), output, table=lambda _d: f"{record.model}@{record.run}")


@model.group("index")
def index() -> None:
    """Maintain the model index."""


@index.command("rebuild")
@registry_option()
@click.option("--model", "model_name", default="", help="Model name for older runs that lack model.json.")
@click.option("--run", "run", default="", help="Index only this run.")
@click.option("--store", default="", help="Experiment store to take config hash and metric summaries from.")
def rebuild(registry: str, namespace: str | None, context: str | None, model_name: str, run: str, store: str) -> None:
    """Backfill registry records from the finetune checkpoints directory."""
    reg = _reg(registry, namespace, context)
    if model_name:
        layout.slug(model_name, "model")
    runs = [layout.slug(run, "run")] if run else finetune_runs(reg.store)
    exp = evidence.open_experiment_store(store) if store else None
    count = 0
    for name in runs:
        try:
            record = record_from_finetune(reg.store, name, model_name)
            if exp is not None:
                evidence.attach(record, exp)
            reg.write(record)
            count += 1
        except UsageError:
            raise
        except Exception as exc:
            warning(f"skipping {name}: {exc}")
    click.echo(f"indexed {count} model run(s)")
