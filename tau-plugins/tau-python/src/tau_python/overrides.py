"""The workload overrides every ``tau python`` verb accepts, applied to discovered handles."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from tau_core.errors import UsageError

RESOURCE_FLAGS = ("cpu_request", "memory_request", "cpu_limit", "memory_limit", "worker_cpu_request",
                  "worker_memory_request", "worker_cpu_limit", "worker_memory_limit")


def override_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("-n", "--namespace", help="Namespace (default: the handle's, else ray)."),
        click.option("--data-pvc", help="PVC mounted at /data."),
        click.option("--queue", help="Kueue LocalQueue."),
        click.option("--gpu-class", help="GPU class (hardware only)."),
        click.option("--disable-default-priorities", is_flag=True, default=None, help="Omit default priorities."),
        click.option("--node-selector", multiple=True, metavar="KEY=VALUE", help="Extra node selector (repeat)."),
        *(click.option(f"--{name.replace('_', '-')}", name, help=f"{name.replace('_', ' ').capitalize()} "
                       "(limits default to requests).") for name in RESOURCE_FLAGS),
        click.option("--profiler", type=click.Choice(["nsys"]), help="Profile with nsys."),
        click.option("--profile-rank", help="Rank(s) to profile: 0, '0,8' or all."),
        click.option("--profile-warmup", help="Delay before capture."),
        click.option("--profile-duration", help="Capture duration."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def apply(handles: Sequence[Any], flags: dict[str, Any]) -> None:
    """Apply command-line overrides to every handle (in place)."""
    selectors: dict[str, str] = {}
    for item in flags.get("node_selector") or ():
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"--node-selector {item!r} must be KEY=VALUE")
        selectors[key] = value
    for h in handles:
        p = h.placement
        for name in ("namespace", "data_pvc", "queue", "gpu_class"):
            if flags.get(name):
                setattr(p, name, flags[name])
        if flags.get("disable_default_priorities"):
            p.disable_default_priorities = True
        p.node_selector.update(selectors)
        for name in RESOURCE_FLAGS:
            if flags.get(name):
                setattr(h.resources, name, flags[name])
        if flags.get("profiler") and hasattr(h, "profiler"):
            prof = {"mode": flags["profiler"], "rank": str(flags.get("profile_rank") or "0")}
            for key in ("warmup", "duration"):
                if flags.get(f"profile_{key}"):
                    prof[key] = flags[f"profile_{key}"]
            h.profiler = prof

