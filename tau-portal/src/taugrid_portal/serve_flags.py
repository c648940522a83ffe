"""The reference command-line contract of ``experiment serve`` / ``open`` (charts invoke it), on top of
``--host``/``--port``, which stay as aliases.

``--addr HOST:PORT`` sets both; ``--workspace`` names the TauWorkspace the server serves (required for a
Kusto source, optional for the local store); ``--source local|kusto|auto``; the Kusto and discovery flags of
§1.3.2 are parsed and validated like the Portal's; a Kusto source reads the durable history through
``--kusto-endpoint`` (:mod:`taugrid_portal.stellar.kusto`), scoped to ``--workspace``.  The Stellar
commands themselves are left untouched: :func:`with_reference_flags` returns a copy of a command with these
options, which it translates into the command's own ``host``/``port`` before calling it.
"""

from __future__ import annotations

import re
from typing import Any

import click

from tau_core.errors import UsageError

_WORKSPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _translate(params: dict[str, Any], ctx: click.Context) -> dict[str, Any]:
    from taugrid_portal.portal.kusto_flags import deprecated_aliases, kusto_config

    kusto_names = {p.name for p in _kusto_params() if p.name}
    kusto = {name: params.pop(name) for name in kusto_names}
    kusto["workspace"] = params.get("workspace")
    deprecated_aliases(kusto, lambda line: click.echo(line, err=True))
    params["workspace"] = kusto["workspace"]
    config = kusto_config(kusto)  # validated like the Portal's; the local store does not use it
    addr, workspace, source = params.pop("addr"), params.pop("workspace"), params.pop("source")
    if addr is not None:
        explicit = [p for p in ("host", "port")
                    if ctx.get_parameter_source(p) == click.core.ParameterSource.COMMANDLINE]
        if explicit:
            raise UsageError(f"--addr cannot be combined with --{explicit[0]}", hint="pass one of them")
        from taugrid_portal.portal.config import parse_addr

        params["host"], params["port"] = parse_addr(addr)
    if workspace is not None and not _WORKSPACE.match(workspace):
        raise UsageError(f"--workspace {workspace!r} is not a workspace name (lowercase letters, digits, '-')")
    params["source"], params["kusto"] = source, None
    if source == "kusto" or (source == "auto" and config.configured):
        if workspace is None:
            raise UsageError(f"--source {source} needs --workspace", hint="Stellar refuses unscoped Kusto reads")
        if not config.endpoint:
            raise UsageError(f"--source {source} reads Kusto through --kusto-endpoint",
                             hint="--kusto-query-command and --kusto-metrics-file are not supported by this build")
        from taugrid_portal.stellar.kusto import KustoOrigin

        params["kusto"] = KustoOrigin(config.endpoint, config.database, workspace=workspace,
                                      max_rows=config.max_metric_rows)
    return params


def _kusto_params() -> list[click.Parameter]:
    from taugrid_portal.portal.kusto_flags import stellar_params

    return stellar_params()


def with_reference_flags(command: click.Command) -> click.Command:
    callback = command.callback
    assert callback is not None

    @click.pass_context
    def run(ctx: click.Context, /, **params: Any) -> Any:
        return ctx.invoke(callback, **_translate(params, ctx))

    extra = [
        click.Option(["--addr"], metavar="HOST:PORT", help="Listen address (the reference spelling of "
                     "--host/--port), e.g. 127.0.0.1:8080."),
        click.Option(["--workspace"], help="TauWorkspace this Stellar server serves; required for a Kusto "
                     "source, optional for the local store."),
        click.Option(["--source"], type=click.Choice(["local", "kusto", "auto"]), default="local",
                     show_default=True, help="Where runs and metrics come from (auto: the local store when the target "
                     "is there, else Kusto)."),
    ]
    return click.Command(command.name, callback=run, params=[*command.params, *extra, *_kusto_params()],
                         help=command.help,
                         epilog=command.epilog, short_help=command.short_help,
                         context_settings=command.context_settings)
