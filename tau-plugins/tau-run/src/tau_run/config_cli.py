"""Offline config verbs: ``tau run validate``, ``tau run schema``, ``tau run explain-config``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tau_core.cli_options import CONTEXT_SETTINGS as CONTEXT
from tau_core.output import emit, output_option


@click.command(context_settings=CONTEXT)
@click.argument("name", required=False)
@click.option("-c", "--config", "config", type=click.Path(path_type=Path),
              help="Config file to validate (default: tau.yaml, tau.yml or .tau.yaml).")
@click.option("--project", help="Project in tau.projects.yaml (monorepos).")
@output_option("table", "json")
@click.pass_context
def validate(ctx: click.Context, /, name: str | None, config: Path | None, project: str | None, output: str) -> None:
    """Check a run config offline: schema, field rules and config-relative files.

    Every problem is reported at once as FILE:LINE:COLUMN: FIELD: PROBLEM with a hint.
    With --config, NAME overrides the config's name; without it, NAME may name a
    target (tau/NAME.yaml).  Nothing talks to a cluster.

    \b
    Examples:
      tau run validate --config tau/train.yaml
      tau run validate train
      tau run validate -c tau.yaml -o json
    """
    from tau_run.validation import run_validate

    parent = ctx.parent.params if ctx.parent is not None else {}
    config = config or parent.get("config")  # tau run -c FILE validate
    project = project or parent.get("project")
    doc = run_validate(name=name, config=config, project=project, as_json=output == "json")
    if output == "json":
        emit(doc, "json")
        if not doc["valid"]:
            from tau_core.errors import ConfigError

            count = len(doc["errors"])
            raise ConfigError(f"{doc['file']}: {count} problem{'s' if count != 1 else ''} found")
    else:
        inferred = ", inferred" if doc["engine_inferred"] else ""
        profile = f", workload profile {doc['workload_profile']}" if doc.get("workload_profile") else ""
        kind = "managed workflow manifest, " if doc.get("managed_workflow") else ""
        click.echo(f"{doc['file']} is valid: {doc['name']} ({kind}{doc['engine']}{inferred}{profile})")


@click.command(context_settings=CONTEXT)
@click.option("-o", "--output", type=click.Choice(["json"]), default="json", show_default=True,
              help="Output format (JSON Schema draft 2020-12).")
@click.option("--managed", is_flag=True, help="Print the schema of managed workflow manifests (schema_version: 1).")
def schema(output: str, managed: bool) -> None:
    """Print the JSON Schema of the direct run config (or, with --managed, of managed manifests).

    Each schema is generated from its installed field catalog, the same catalog that
    drives validation and explain-config: the installed CLI is the schema authority.

    \b
    Examples:
      tau run schema -o json > tau-run-config.schema.json
      tau run schema --managed > tau-managed-workflow.schema.json
    """
    if managed:
        from tau_core.config.managed import build_managed_schema

        click.echo(json.dumps(build_managed_schema(), indent=2))
        return
    from tau_core.config.schema import build_schema

    click.echo(json.dumps(build_schema(), indent=2))


@click.command("explain-config", context_settings=CONTEXT)
def explain_config() -> None:
    """Print the run config field reference as Markdown.

    Every field with its type, status, engines, description, allowed values and default.

    \b
    Examples:
      tau run explain-config | less
    """
    from tau_core.config.explain import explain_markdown

    click.echo(explain_markdown(), nl=False)
