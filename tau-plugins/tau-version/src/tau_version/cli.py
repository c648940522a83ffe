"""``tau version``: the tau version and a table of installed tau distributions."""

from __future__ import annotations

from typing import Any

import click

from tau_core import __version__
from tau_core.cli_options import CONTEXT_SETTINGS
from tau_core.output import emit, output_option, render_table
from tau_core.plugins import FAMILIES, Host, get_host

_HOOK_TO_FAMILY = {hook: family for family, hook in FAMILIES.items()}


def describe(host: Host) -> dict[str, Any]:
    """The installed plugin set as a document (the shape of ``tau version -o json``)."""
    roots = host.roots()
    plugins = []
    for info in sorted(host.plugins, key=lambda p: (p.dist, p.name)):
        plugins.append(
            {
                "plugin": info.name,
                "distribution": info.dist,
                "version": info.version,
                "status": info.status,
                "roots": sorted(n for n in roots if roots[n].plugin == info.name),
                "hooks": info.hooks,
                **({"error": info.error} if info.error else {}),
            }
        )
    return {"version": __version__, "plugins": plugins}


def _table(doc: dict[str, Any]) -> str:
    rows = [
        (
            p["distribution"],
            p["version"] or "-",
            ",".join(p["roots"]) or "-",
            ",".join(h.removeprefix("tau_register_") for h in p["hooks"]) or "-",
            p["status"] + (f" ({p['error']})" if p.get("error") else ""),
        )
        for p in doc["plugins"]
    ]
    return f"tau {doc['version']}\n\n" + render_table(rows, ["distribution", "version", "roots", "hooks", "status"])


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--short", is_flag=True, help="Print only the bare version.")
@output_option("table", "json", "yaml")
def version(short: bool, output: str) -> None:
    """Print the tau version and the installed tau distributions.

    The table lists each plugin distribution with its version, the command roots and
    hook families it provides, and whether it loaded.  Use -o json for scripts.

    \b
    Examples:
      tau version
      tau version --short
      tau version -o json
    """
    if short:
        click.echo(__version__)
        return
    emit(describe(get_host()), output, table=_table)
