"""Building a ``kubernetes_asyncio`` ApiClient from one isolated kubeconfig context.

Kept apart from :mod:`tau_core.kube` so that the library is imported only here, inside
:func:`load_client`, when a command actually talks to a cluster.

The package's ``__init__`` modules import every generated API class and model (several hundred
modules, most of a CLI command's start-up time).  Tau needs four of its modules: the
``Configuration``, the ``ApiClient``, its REST layer and the kubeconfig loader.  :func:`_import_core`
loads exactly those, registering the packages ``kubernetes_asyncio`` and ``kubernetes_asyncio.client``
(and ``.models``) without running their ``__init__``.  The registered packages stay complete for
any other user in the process: the first access to a name they do not have yet runs the real
``__init__`` (PEP 562 module ``__getattr__``), so ``from kubernetes_asyncio.client import CoreV1Api``
keeps working.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from tau_core.errors import ClusterError
from tau_core.lazy_imports import import_aiohttp_connector, register_lazy, without_trust_store

_PACKAGES = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.client.models")


def _deferred_package(name: str, directory: Path) -> ModuleType:
    """Register package ``name`` (from ``directory``) whose ``__init__`` runs on first unknown attribute."""
    spec = importlib.util.spec_from_file_location(name, directory / "__init__.py",
                                                  submodule_search_locations=[str(directory)])
    if spec is None or spec.loader is None:
        raise ImportError(name)
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    state = {"loaded": False}

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__") or state["loaded"]:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        if (directory / f"{attr}.py").is_file() or (directory / attr / "__init__.py").is_file():
            return importlib.import_module(f"{name}.{attr}")  # just that submodule
        state["loaded"] = True
        loader.exec_module(module)
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    return module


def _import_core() -> tuple[Any, Any, Any, Any]:
    """``(ApiClient, Configuration, ConfigException, KubeConfigLoader)`` with as little importing as possible."""
    if "kubernetes_asyncio.client" not in sys.modules:
        top = importlib.util.find_spec("kubernetes_asyncio")
        if top is None or not top.submodule_search_locations:
            raise ClusterError("the kubernetes-asyncio package is not installed",
                               hint="reinstall tau-core (pip install --force-reinstall tau-core)")
        base = Path(next(iter(top.submodule_search_locations)))
        paths = {"kubernetes_asyncio": base, "kubernetes_asyncio.client": base / "client",
                 "kubernetes_asyncio.client.models": base / "client" / "models"}
        for name in _PACKAGES:
            if name not in sys.modules:
                _deferred_package(name, paths[name])
        client = sys.modules["kubernetes_asyncio.client"]
        # imported by modules below for code paths Tau never takes (each ~5-50 ms of CPU)
        register_lazy("urllib3")  # configuration: a basic-auth helper
        register_lazy("yaml")  # kube_config: reading kubeconfig files (tau hands it a dict); kube.py may have it
        register_lazy("dateutil.parser", forward=("parse",))  # api_client: deserializing models
        register_lazy("multiprocessing.pool", forward=("ThreadPool",))  # api_client: the sync-call pool
        import_aiohttp_connector()  # aiohttp's default SSL contexts: CA bundle loaded on first use
        importlib.import_module("kubernetes_asyncio.client.exceptions")
        configuration = importlib.import_module("kubernetes_asyncio.client.configuration")
        importlib.import_module("kubernetes_asyncio.client.rest")
        api_client = importlib.import_module("kubernetes_asyncio.client.api_client")
        client.__dict__.setdefault("Configuration", configuration.Configuration)
        client.__dict__.setdefault("ApiClient", api_client.ApiClient)
    from kubernetes_asyncio.client.api_client import ApiClient
    from kubernetes_asyncio.client.configuration import Configuration
    from kubernetes_asyncio.config.config_exception import ConfigException
    from kubernetes_asyncio.config.kube_config import KubeConfigLoader

    return ApiClient, Configuration, ConfigException, KubeConfigLoader


async def load_client(config: Mapping[str, Any], context: str) -> Any:
    """An ``ApiClient`` for ``context`` of the (already isolated) kubeconfig dict ``config``."""
    api_client_cls, configuration_cls, config_exception, loader_cls = _import_core()
    configuration = type.__call__(configuration_cls)
    try:
        loader = loader_cls(config_dict=dict(config), active_context=context)
        await loader.load_and_set(configuration)
    except config_exception as exc:
        raise _unusable(context, exc) from exc
    if str(configuration.host).startswith("http://"):  # no TLS: the context's trust store would go unread
        client = without_trust_store(lambda: api_client_cls(configuration))
    else:
        client = api_client_cls(configuration)
    if hasattr(loader, "exec_plugin_expiry"):
        _refresh_exec_token(client, loader, configuration, context, config_exception)
    return client


def _unusable(context: str, exc: BaseException) -> ClusterError:
    text = str(exc)
    if text.startswith("exec: process returned"):  # the credential plugin's own error and hint, on one line each
        lines = [line.strip() for line in text.split(". ", 1)[-1].splitlines() if line.strip()]
        errors = [line.removeprefix("error:").strip() for line in lines if not line.startswith("hint:")]
        hints = [line.removeprefix("hint:").strip() for line in lines if line.startswith("hint:")]
        return ClusterError(f"the credential plugin of kubeconfig context \"{context}\" failed: "
                            f"{errors[-1] if errors else text}",
                            hint=hints[-1] if hints else "fix what the plugin reports, then run the command again")
    return ClusterError(f"kubeconfig context \"{context}\" is unusable: {text}",
                        hint="repair the kubeconfig entry for this context, or pass --context")


def _refresh_exec_token(client: Any, loader: Any, configuration: Any, context: str, config_exception: Any) -> None:
    """Run the exec credential plugin again before a request once its token has expired (the library only
    runs it at load time), so long commands keep working across token lifetimes."""
    send = client.call_api

    async def call_api(*args: Any, **kwargs: Any) -> Any:
        try:
            await loader.load_from_exec_plugin()  # a no-op while the current token is valid
        except config_exception as exc:
            raise _unusable(context, exc) from exc
        configuration.api_key["BearerToken"] = loader.token
        return await send(*args, **kwargs)

    client.call_api = call_api
