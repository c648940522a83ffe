"""``tau run``: a group whose first positional is either a verb or the TARGET to run.

``tau run [TARGET] [OPTIONS]`` resolves, renders and submits a run config;
``tau run VERB ...`` dispatches to a verb.  Verbs are imported only when invoked.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from tau_core.cli_options import CONTEXT_SETTINGS as CONTEXT

#: verb -> (module, attribute, one-line help)
OWN_VERBS: dict[str, tuple[str, str, str]] = {
    "validate": ("tau_run.config_cli", "validate", "Check a run config offline and report every problem."),
    "schema": ("tau_run.config_cli", "schema", "Print the JSON Schema of the run config."),
    "explain-config": ("tau_run.config_cli", "explain_config", "Print the run config field reference (Markdown)."),
    "history": ("tau_run.history_cli", "history", "Durable run history: the in-cluster lifecycle recorder."),
}
LIFECYCLE_MODULE = "tau_run.lifecycle_cli"
LIFECYCLE_VERBS: dict[str, str] = {
    "list": "List runs in the workspace.",
    "status": "Show a run's startup phases and state.",
    "logs": "Print or follow a run's logs.",
    "get": "List or fetch a run's durable artifacts.",
    "cancel": "Cancel a run and release its quota.",
    "resume": "Resubmit a failed run from its checkpoint.",
}
SUBMIT = "\x00submit"


def _run_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("-c", "--config", "config", type=click.Path(path_type=Path),
                     help="Explicit run config; TARGET then names the run."),
        click.option("--dry-run", "dry_run", type=click.Choice(["client", "server", "none"]), default=None,
                     help="client: render locally and print; server: validate against the API server; none: submit."),
        click.option("-n", "--namespace", help="Namespace (overrides config, workspace and connection)."),
        # TAU_CONTEXT is read by resolution itself, so its source (flag or env) stays visible and a
        # TAU_CONTEXT that contradicts the repository descriptor can be reported.
        click.option("--context", "kube_context",
                     help="Kubernetes context (default: $TAU_CONTEXT or the repository connection)."),
        click.option("--workspace", help="TauWorkspace supplying namespace, queue and output defaults."),
        click.option("--project", help="Project in tau.projects.yaml (monorepos)."),
        click.option("--service-account", help="Pod service account (overrides the workspace default)."),
        click.option("--local", is_flag=True, default=None, help="Run as supervised local processes."),
        click.option("--follow", is_flag=True, default=None,
                     help="After submitting, stream the run's log until it ends, then print its outcome and "
                          "where its evidence (Stellar page) is; exits non-zero when the run failed."),
        click.option("-o", "--output", type=click.Choice(["table", "json"]), default=None,
                     help="Output format for submission results (dry-run prints YAML unless json)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _lifecycle_command(name: str) -> click.Command | None:
    if importlib.util.find_spec(LIFECYCLE_MODULE) is None:
        return None
    module = importlib.import_module(LIFECYCLE_MODULE)
    verbs = getattr(module, "VERBS", None)
    if isinstance(verbs, dict):
        found = verbs.get(name)
        if isinstance(found, click.Command):
            return found
    base = name.replace("-", "_")
    for attr in (base, base + "_", base + "_cmd", base + "_command"):
        obj = getattr(module, attr, None)
        if isinstance(obj, click.Command):
            return obj
    return None


class _SubmitContext(click.Context):
    @property
    def command_path(self) -> str:
        return self.parent.command_path if self.parent is not None else "tau run"


class _SubmitCommand(click.Command):
    """The hidden command behind ``tau run [TARGET]``: usage and errors read as ``tau run``."""

    context_class = _SubmitContext


class RunGroup(click.Group):
    """Dispatches ``tau run VERB`` to a verb and ``tau run [TARGET]`` to submission."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = list(OWN_VERBS)
        names += [n for n in LIFECYCLE_VERBS if self._lifecycle_available(n)]
        return names

    def _lifecycle_available(self, name: str) -> bool:
        try:
            return _lifecycle_command(name) is not None
        except Exception:
            return False

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name == SUBMIT:
            return submit_command
        if cmd_name in OWN_VERBS:
            module, attr, _ = OWN_VERBS[cmd_name]
            command: click.Command = getattr(importlib.import_module(module), attr)
            return command
        if cmd_name in LIFECYCLE_VERBS:
            lifecycle = _lifecycle_command(cmd_name)
            if lifecycle is None:
                from tau_core.errors import PluginError

                raise PluginError(f"tau run {cmd_name} is not available in this installation",
                                  hint="install the tau meta-package (pip install tau) for the lifecycle verbs")
            return lifecycle
        return None

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] == SUBMIT:
            return "", submit_command, args[1:]
        return super().resolve_command(ctx, args)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = click.Command.parse_args(self, ctx, args)
        if rest and (rest[0] in OWN_VERBS or rest[0] in LIFECYCLE_VERBS):
            ctx._protected_args, ctx.args = rest[:1], rest[1:]
        else:
            ctx._protected_args, ctx.args = [SUBMIT], rest
        return ctx.args

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, OWN_VERBS[name][2]) for name in OWN_VERBS]
        rows += [(n, LIFECYCLE_VERBS[n]) for n in LIFECYCLE_VERBS if self._lifecycle_available(n)]
        with formatter.section("Verbs"):
            formatter.write_dl(rows)


@click.group(cls=RunGroup, context_settings=CONTEXT, invoke_without_command=True,
             subcommand_metavar="[TARGET | VERB ...]")
@_run_options
def run(**_: Any) -> None:
    """Validate, render and submit a tau.yaml run config, and follow runs.

    TARGET resolves tau/TARGET.yaml (or .yml) from the working directory up to the Git
    root; without TARGET, tau.yaml, tau.yml or .tau.yaml is used.  With --config, the
    positional argument names the run instead.  --dry-run=client renders locally and
    annotates every resolved value with its source (config, workspace default, workload
    profile, flag, env, default); values that need a cluster show as <unresolved-...>.

    \b
    Examples:
      tau run validate --config tau/train.yaml
      tau run train --dry-run=client
      tau run --config examples/kind-smoke/tau.yaml --dry-run=client
      tau run my-run --config experiments/tau.yaml -n research
      tau run train --local
    """


@click.command(SUBMIT, cls=_SubmitCommand, context_settings=CONTEXT, hidden=True)
@click.argument("target", required=False)
@_run_options
@click.pass_context
def submit_command(ctx: click.Context, /, target: str | None, **flags: Any) -> None:
    from tau_core.config.issues import ConfigValidationError
    from tau_core.config.resolve import RunOptions
    from tau_run.reporting import fail_with_issues
    from tau_run.submit import run_target

    parent = ctx.parent.params if ctx.parent is not None else {}
    merged = {k: (v if v is not None else parent.get(k)) for k, v in flags.items()}
    import sys

    options = RunOptions(
        target=target,
        config=merged["config"],
        project=merged["project"],
        namespace=merged["namespace"],
        context=merged["kube_context"],
        workspace=merged["workspace"],
        service_account=merged["service_account"],
        dry_run=None if merged["dry_run"] in (None, "none") else merged["dry_run"],
        local=bool(merged["local"]),
        argv=["tau", *sys.argv[1:]] if sys.argv and sys.argv[0].endswith("tau") else ["tau", "run"],
    )
    try:
        run_target(options, merged["output"] or "table", follow=bool(merged["follow"]))
    except ConfigValidationError as exc:
        fail_with_issues(exc)
