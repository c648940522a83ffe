"""The Tau Python SDK.

``@tau.train`` / ``@tau.eval`` turn a function into a managed workflow (``schema_version: 1``)
that runs locally when called and submits with ``.submit()``; ``tau.serve`` describes a serving
deployment; ``tau.stellar`` logs metrics that appear in Stellar.  Imports are lazy: ``import tau``
loads nothing until a name is used.
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # typing itself is not imported: it would double the cost of ``import tau``

__version__ = "0.5.0"

_EXPORTS = {
    "train": "tau._api", "eval": "tau._api", "serve": "tau._serve", "ServeHandle": "tau._serve",
    "Ctx": "tau._ctx", "SecretRef": "tau._secrets", "SecretSource": "tau._secrets", "secret": "tau._secrets",
    "secret_from_env": "tau._secrets", "secret_from_file": "tau._secrets", "secret_ref": "tau._secrets",
    "TauSDKError": "tau._errors", "TauCLIError": "tau._errors", "TrainHandle": "tau._workflow",
    "EvalHandle": "tau._workflow", "load_staged_function": "tau._staging", "workloads": "tau._discovery",
    "config": "tau._helpers", "load_config": "tau._helpers", "pvc_mount": "tau._helpers",
    "dataset_file_reference": "tau._helpers", "read_jsonl_objects": "tau._helpers",
    "load_staged_module": "tau._helpers", "call_staged_function": "tau._helpers",
}
__all__ = [
    "Ctx",
    "EvalHandle",
    "SecretRef",
    "SecretSource",
    "ServeHandle",
    "TauCLIError",
    "TauSDKError",
    "TrainHandle",
    "call_staged_function",
    "config",
    "dataset_file_reference",
    "eval",
    "load_config",
    "load_staged_function",
    "load_staged_module",
    "pvc_mount",
    "read_jsonl_objects",
    "secret",
    "secret_from_env",
    "secret_from_file",
    "secret_ref",
    "serve",
    "stellar",
    "train",
    "workloads",
]

if TYPE_CHECKING:
    from typing import Any

    from tau import stellar
    from tau._api import eval, train
    from tau._ctx import Ctx
    from tau._discovery import workloads
    from tau._errors import TauCLIError, TauSDKError
    from tau._helpers import (
        call_staged_function,
        config,
        dataset_file_reference,
        load_config,
        load_staged_module,
        pvc_mount,
        read_jsonl_objects,
    )
    from tau._secrets import SecretRef, SecretSource, secret, secret_from_env, secret_from_file, secret_ref
    from tau._serve import ServeHandle, serve
    from tau._staging import load_function as load_staged_function
    from tau._workflow import EvalHandle, TrainHandle


def __getattr__(name: str) -> Any:
    if name == "stellar":
        return import_module("tau.stellar")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tau' has no attribute {name!r}")
    attr = "load_function" if name == "load_staged_function" else name
    value = getattr(import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
