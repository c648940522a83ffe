"""Small helpers the SDK exports for workload code (configs, mounts, datasets, staged modules)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from tau._errors import TauSDKError

STAGED_MODULE = "tau_user_module"


def load_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A YAML or JSON mapping from ``path`` (for ``config=`` of the decorators)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise TauSDKError(f"tau-py: cannot read config {str(path)!r}: {exc.strerror or exc}") from None
    if file.suffix == ".json":
        data = json.loads(text)
    else:
        from ruamel.yaml import YAML

        data = YAML(typ="safe", pure=True).load(text)
    if not isinstance(data, dict):
        raise TauSDKError(f"tau-py: config {str(path)!r} must be a mapping")
    return data


def config(**values: Any) -> dict[str, Any]:
    """A decorator ``config=`` mapping (JSON-serializable values only)."""
    try:
        return dict(json.loads(json.dumps(values, allow_nan=False)))
    except (TypeError, ValueError) as exc:
        raise TauSDKError(f"tau-py: config values must be JSON-serializable: {exc}") from None


def pvc_mount(name: str, pvc: str, mount_path: str, *, read_only: bool = True) -> dict[str, Any]:
    """A ``mounts=`` entry: PVC ``pvc`` at ``mount_path`` (read-only by default, e.g. a model cache)."""
    if not mount_path.startswith("/"):
        raise TauSDKError(f"tau-py: pvc_mount mount_path {mount_path!r} must be absolute")
    return {"name": name, "mountPath": mount_path, "pvc": pvc, "readOnly": read_only}


def dataset_file_reference(dataset: str, file: str, *, root: str = "/data/datasets") -> str:
    """The in-pod path of ``file`` in ``dataset`` under the data PVC (no ``..`` allowed)."""
    parts = Path(file).parts
    if Path(file).is_absolute() or ".." in parts or "/" in dataset or dataset in ("", ".", ".."):
        raise TauSDKError(f"tau-py: dataset file reference {dataset!r}/{file!r} must stay inside the dataset")
    return f"{root.rstrip('/')}/{dataset}/{Path(*parts).as_posix()}"


def read_jsonl_objects(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every JSON object of a JSONL file (blank lines skipped; anything else is an error naming the line)."""
    out: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise TauSDKError(f"tau-py: {path}:{lineno}: invalid JSON ({exc})") from None
            if not isinstance(obj, dict):
                raise TauSDKError(f"tau-py: {path}:{lineno}: expected a JSON object")
            out.append(obj)
    return out


def load_staged_module(path: str | os.PathLike[str] | None = None) -> ModuleType:
    """The staged user module (``/script/tau_user_module.py`` in a pod)."""
    import importlib.util
    import sys

    file = Path(path) if path is not None else Path(os.environ.get("TAU_PAYLOAD_TARGET_DIR", "/script")) / (
        STAGED_MODULE + ".py")
    spec = importlib.util.spec_from_file_location(STAGED_MODULE, file)
    if spec is None or spec.loader is None or not file.is_file():
        raise TauSDKError(f"tau-py: no staged module at {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[STAGED_MODULE] = module
    spec.loader.exec_module(module)
    return module


def call_staged_function(function: str, *args: Any, path: str | os.PathLike[str] | None = None,
                         **kwargs: Any) -> Any:
    """Call ``function`` of the staged module (a handle's own function when it is a handle)."""
    fn: Callable[..., Any] | None = getattr(load_staged_module(path), function, None)
    if fn is None:
        raise TauSDKError(f"tau-py: the staged module has no function {function!r}")
    inner = getattr(fn, "fn", None)
    return (inner if callable(inner) else fn)(*args, **kwargs)
