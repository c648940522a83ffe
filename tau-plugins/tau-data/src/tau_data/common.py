"""Flags and helpers shared by the dataset and model verbs."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from tau_core.errors import UsageError
from tau_core.storage import ObjectStore, open_store
from tau_core.storage.registry import REGISTRY_FORMS

F = TypeVar("F", bound=Callable[..., Any])
ENV_REGISTRY = "TAU_DATA_REGISTRY"


def registry_option(default: str = "pvc") -> Callable[[F], F]:
    def decorate(func: F) -> F:
        func = click.option("-n", "--namespace", default=None,
                            help="Namespace (pvc backend; default: the workspace's).")(func)
        func = click.option("--context", default=None, help="Kubeconfig context (pvc backend).")(func)
        return click.option("--registry", "registry", default=default, envvar=ENV_REGISTRY, show_default=True,
                            help="'pvc', 'az://<account>/<container>', 'file://<dir>' or a plugin's scheme.")(func)
    return decorate


def open_registry(registry: str, namespace: str | None = None, context: str | None = None) -> ObjectStore:
    if registry == "az://":
        raise UsageError("--registry az URL must be az://<account>/<container>",
                         hint="register defaults to az://; pass --registry az://ACCOUNT/CONTAINER or file://DIR")
    if registry.startswith(("https://", "http://")):
        raise UsageError(f"--registry {registry!r}: {REGISTRY_FORMS}")
    options = {"namespace": namespace, "context": context} if registry == "pvc" else {}
    return open_store(registry, **options)


def open_source(value: str) -> ObjectStore:
    """A ``--from``/``--source-root`` value: a URL through the registry, or a local directory."""
    if "://" in value or value == "pvc":
        return open_store(value)
    if not os.path.isdir(value):
        raise UsageError(f"--from {value!r} is not a directory", hint="pass a local directory or az://ACCOUNT/CONTAINER/PREFIX")
    return open_store("file://" + os.path.abspath(value))


def parse_tags(values: tuple[str, ...]) -> dict[str, str]:
    tags = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise UsageError(f"--tag {value!r} must be KEY=VALUE")
        tags[key] = val
    return tags
