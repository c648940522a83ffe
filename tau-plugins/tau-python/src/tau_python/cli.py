"""``tau python``: inspect, build and submit SDK workflows (in-process; exit codes as documented)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click

from tau_core.cli_options import CONTEXT_SETTINGS as CONTEXT
from tau_python.overrides import override_options

MODULE = click.argument("module", type=click.Path(path_type=Path))


def _duration(value: str) -> float:
    from tau_core.errors import UsageError

    units = {"s": 1, "m": 60, "h": 3600}
    text = value.strip()
    try:
        if text[-1:] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError:
        raise UsageError(f"invalid duration {value!r}", hint="use seconds or 30s, 5m, 24h") from None


def _discover(module: Path, flags: dict[str, Any]) -> Any:
    from tau_python.discovery import discover
    from tau_python.overrides import apply

    wf = discover(module)
    apply(wf.handles, flags)
    return wf


@click.group(context_settings=CONTEXT)
def python() -> None:
    """Author, build and submit @tau.train / @tau.eval workflows (the Python SDK).

    \b
    Examples:
      tau python inspect examples/sdk-train-eval/workflow.py
      tau python submit examples/sdk-train-eval/workflow.py --dry-run client
      tau python submit examples/sdk-train-eval/workflow.py --local
      tau python build examples/sdk-train-eval/workflow.py -o build/
    """


@python.command(context_settings=CONTEXT)
@MODULE
@click.option("--upstream-checkpoint", help="Upstream checkpoint for the eval (default: from the train).")
@override_options
def inspect(module: Path, upstream_checkpoint: str | None, **flags: Any) -> None:
    """Print every handle of MODULE and the manifest it submits (exit 2 when there is none)."""
    from tau._staging import to_yaml
    from tau_python.discovery import upstream_for

    wf = _discover(module, flags)
    for handle in wf.handles:
        upstream = upstream_for(wf, upstream_checkpoint) if handle.kind == "rayjob-eval" else None
        kind = "eval" if handle.kind == "rayjob-eval" else "train"
        click.echo(f"# {handle.name} (kind={kind}, source: {module})")
        click.echo(to_yaml(handle.manifest(script="tau_user_module.py", generated=True,
                                           upstream_checkpoint=upstream)), nl=False)


@python.command(context_settings=CONTEXT)
@MODULE
@click.option("-o", "--output", "out", type=click.Path(path_type=Path), required=True, help="Build directory.")
@click.option("--force", is_flag=True, help="Replace an existing build in the directory.")
@click.option("--upstream-checkpoint", help="Upstream checkpoint for the eval (default: from the train).")
@override_options
def build(module: Path, out: Path, force: bool, upstream_checkpoint: str | None, **flags: Any) -> None:
    """Write a deterministic tau.python.build artifact (manifests, modules, tau-build.json)."""
    from tau_python.build import build as do_build

    index = do_build(_discover(module, flags), out, force=force, upstream_checkpoint=upstream_checkpoint)
    for item in index["workloads"]:
        click.echo(f"{item['kind']}\t{item['name']}\t{out / item['config']}")


def _poll_options(fn: Any) -> Any:
    for option in reversed([
        click.option("--context", help="Kubernetes context."),
        click.option("--dry-run", type=click.Choice(["client", "server"]), help="Render only; skips polling and "
                                                                                "eval."),
        click.option("--timeout", default="24h", show_default=True, help="How long to wait for the train."),
        click.option("--poll-interval", default="15", show_default=True, help="Seconds between status polls."),
        click.option("--cleanup-timeout", default="5m", show_default=True, help="Train RayJob teardown budget."),
        click.option("--keep-train-rayjob", is_flag=True, help="Do not delete the train RayJob after success."),
    ]):
        fn = option(fn)
    return fn


def _opts(flags: dict[str, Any]) -> Any:
    from tau_python.flow import PollOptions

    return PollOptions(context=flags.pop("context"), dry_run=flags.pop("dry_run"),
                       timeout=_duration(flags.pop("timeout")), poll_interval=_duration(flags.pop("poll_interval")),
                       cleanup_timeout=_duration(flags.pop("cleanup_timeout")),
                       keep_train_rayjob=bool(flags.pop("keep_train_rayjob")))


@python.command(context_settings=CONTEXT)
@MODULE
@_poll_options
@click.option("--local", is_flag=True, help="Run train then eval on this machine with the local backend.")
@click.option("--upstream-checkpoint", help="Upstream checkpoint for an eval-only module.")
@override_options
def submit(module: Path, local: bool, upstream_checkpoint: str | None, **flags: Any) -> None:
    """Submit MODULE's train, wait for success, clean it up, then submit its eval."""
    from tau_python.discovery import upstream_for
    from tau_python.flow import submit_workflow

    opts = _opts(flags)
    wf = _discover(module, flags)
    if local:
        from tau_python.local import run_with_local_backend

        run_with_local_backend(wf)
        return
    with tempfile.TemporaryDirectory(prefix="tau-py-") as tmp:
        submit_workflow(wf, opts, Path(tmp), upstream=upstream_for(wf, upstream_checkpoint))


@python.command("submit-build", context_settings=CONTEXT)
@click.argument("build_dir", metavar="BUILD", type=click.Path(path_type=Path))
@_poll_options
def submit_build(build_dir: Path, **flags: Any) -> None:
    """Submit every workload of a build (train first, polled to success, then eval)."""
    from tau_python.build import read_index
    from tau_python.flow import cleanup, tau_run, wait_for_success

    opts = _opts(flags)
    index = read_index(build_dir)
    items = sorted(index["workloads"], key=lambda w: w["kind"] != "rayjob")
    for i, item in enumerate(items):
        tau_run(build_dir / item["config"], opts, None)
        more = i + 1 < len(items)
        if opts.dry_run or not more or item["kind"] != "rayjob":
            continue
        wait_for_success(item["resource_name"], item["namespace"], opts)
        if not opts.keep_train_rayjob:
            cleanup(item["resource_name"], item["namespace"], opts)


@python.command(context_settings=CONTEXT)
@click.argument("directory", type=click.Path(path_type=Path), default=".")
@click.option("--force", is_flag=True, help="Overwrite an existing workflow.py.")
def bootstrap(directory: Path, force: bool) -> None:
    """Write a starter workflow.py (a train and an eval that log to Stellar) into DIRECTORY."""
    from tau_python.scaffold import write_starter

    click.echo(f"wrote {write_starter(directory, force=force)}")


@python.command(context_settings=CONTEXT)
@click.option("-n", "--namespace", default="ray", show_default=True)
@click.option("--context", help="Kubernetes context.")
def doctor(namespace: str, context: str | None) -> None:
    """Check the SDK, Python, the tau CLI, the experiment store and cluster permissions."""
    from tau_python.doctor import run_doctor

    run_doctor(namespace, context)
