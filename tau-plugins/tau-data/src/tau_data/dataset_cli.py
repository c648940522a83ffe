"""``tau data dataset ...`` verbs."""

from __future__ import annotations

import click

from tau_core.errors import TauError, UsageError
from tau_core.output import emit, output_option, render_table

from . import ops, register_cli
from .common import open_registry, parse_tags, registry_option
from .datasets import DatasetRegistry, split_ref
from .records import PURPOSES, converter


@click.group("dataset")
def dataset() -> None:
    """The curated dataset registry (records are immutable; only aliases move)."""


def _registry(registry: str, namespace: str | None, context: str | None) -> DatasetRegistry:
    return DatasetRegistry(open_registry(registry, namespace, context))


@dataset.command("list")
@registry_option()
@click.option("--purpose", default="", help="pretrain, rl or eval.")
@click.option("--tag", "tags", multiple=True, help="KEY=VALUE (repeatable).")
@output_option("table", "json")
def list_(registry: str, namespace: str | None, context: str | None, purpose: str, tags: tuple[str, ...],
          output: str) -> None:
    """List registered dataset versions."""
    if purpose and purpose not in PURPOSES:
        raise UsageError(f"--purpose must be one of: {', '.join(PURPOSES)}")
    records = _registry(registry, namespace, context).list(purpose, parse_tags(tags))
    emit([converter.unstructure(r) for r in records], output, table=lambda _d: render_table(
        [(r.name, r.version, r.purpose, len(r.files), r.total_bytes, r.assurance, r.digest[7:19], r.created_at)
         for r in records], ["name", "version", "purpose", "files", "size", "assurance", "digest", "created"]))


@dataset.command("show")
@click.argument("ref")
@registry_option()
@output_option("table", "json")
def show(ref: str, registry: str, namespace: str | None, context: str | None, output: str) -> None:
    """Show one dataset version (NAME, NAME@VERSION or NAME@ALIAS)."""
    record = _registry(registry, namespace, context).resolve(ref)
    emit(converter.unstructure(record), output, table=lambda _d: ops.show_text(record))


@dataset.command("ref")
@click.argument("ref")
@registry_option()
@click.option("--staged-root", default="", help="Where ranks stage the files (for -o env).")
@click.option("--base-url", default="", help="Base URL the files are served from (for -o env).")
@click.option("--env-prefix", default="FINEWEB_DATASET", show_default=True)
@output_option("json", "env")
def ref_(ref: str, registry: str, namespace: str | None, context: str | None, staged_root: str, base_url: str,
         env_prefix: str, output: str) -> None:
    """Resolve a reference for training code (no SAS URLs are ever minted)."""
    record = _registry(registry, namespace, context).resolve(ref)
    if output == "env":
        click.echo(ops.ref_env(record, staged_root, base_url, env_prefix))
    else:
        emit(ops.ref_json(record), "json")


@dataset.group("alias")
def alias() -> None:
    """Move or read aliases (compare-and-swap)."""


@alias.command("set")
@click.argument("name")
@click.argument("alias_name", metavar="ALIAS")
@click.argument("version")
@registry_option()
@click.option("--expect", default=None, help="Only move the alias if it currently points at this version.")
@click.option("--expect-absent", is_flag=True, help="Only create the alias if it does not exist yet.")
@output_option("table", "json")
def alias_set(name: str, alias_name: str, version: str, registry: str, namespace: str | None,
              context: str | None, expect: str | None, expect_absent: bool, output: str) -> None:
    """Point ALIAS at VERSION."""
    if expect is not None and expect_absent:
        raise UsageError("--expect and --expect-absent are mutually exclusive")
    record = _registry(registry, namespace, context).alias_set(name, alias_name, version, expect=expect,
                                                               expect_absent=expect_absent)
    emit(converter.unstructure(record), output, table=lambda _d: f"{name}:{alias_name} -> {version}")


@alias.command("get")
@click.argument("name")
@click.argument("alias_name", metavar="ALIAS")
@registry_option()
@output_option("ref", "json")
def alias_get(name: str, alias_name: str, registry: str, namespace: str | None, context: str | None,
              output: str) -> None:
    """Print the version an alias points at (NAME@VERSION)."""
    record = _registry(registry, namespace, context).alias_get(name, alias_name)
    emit(converter.unstructure(record), output, table=lambda _d: f"{record.name}@{record.version}")


@alias.command("remove")
@click.argument("name")
@click.argument("alias_name", metavar="ALIAS")
@registry_option()
@click.option("--expect", default=None, help="Only remove the alias if it points at this version.")
@click.option("--yes", is_flag=True, help="Really remove the alias.")
def alias_remove(name: str, alias_name: str, registry: str, namespace: str | None, context: str | None,
                 expect: str | None, yes: bool) -> None:
    """Remove an alias (compare-and-swap on its current value)."""
    if not yes:
        raise UsageError(f"refusing to remove alias {name}:{alias_name} without --yes")
    record = _registry(registry, namespace, context).alias_remove(name, alias_name, expect)
    click.echo(f"removed alias {name}:{alias_name} (was {record.version})")


@dataset.command("verify")
@click.argument("ref")
@registry_option()
@click.option("--from", "source", default="", help="Directory or az://... to re-hash (default: the record's location).")
@output_option("table", "json")
def verify(ref: str, registry: str, namespace: str | None, context: str | None, source: str, output: str) -> None:
    """Re-hash the bytes of NAME@VERSION; a mismatch exits 1."""
    name, version = split_ref(ref, exact="verify")
    reg = _registry(registry, namespace, context)
    if not reg.exists(name, version) and reg.is_alias(name, version):
        raise UsageError("verify requires NAME@VERSION (an exact version, not an alias)")
    result = ops.verify(reg.get(name, version), source)
    emit(converter.unstructure(result), output, table=lambda _d: ops.verify_text(result))
    if not result.ok:
        raise TauError(f"verification FAILED for {name}@{version}")


@dataset.command("rm")
@click.argument("ref")
@registry_option()
@click.option("--yes", is_flag=True, help="Really remove the record.")
@output_option("table", "json")
def rm(ref: str, registry: str, namespace: str | None, context: str | None, yes: bool, output: str) -> None:
    """Remove NAME@VERSION's record (refused while an alias points at it)."""
    name, version = split_ref(ref, exact="rm")
    if not yes:
        raise UsageError(f"refusing to remove {name}@{version} without --yes")
    _registry(registry, namespace, context).remove(name, version)
    emit({"removed": f"{name}@{version}"}, output, table=lambda _d: f"removed {name}@{version}")


dataset.add_command(rm, "remove")
for command in register_cli.commands:
    dataset.add_command(command)
