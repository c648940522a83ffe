"""Find the train/eval handles a module defines (``tau python`` and ``tau.workloads``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tau._errors import TauSDKError


def workloads(module: str | Path) -> list[Any]:
    """The train and eval handles defined at the top level of ``module`` (a ``.py`` path), in file order."""
    from tau._workflow import WorkloadHandle

    path = Path(module)
    if not path.is_file():
        raise TauSDKError(f"tau-py: module {str(module)!r} is not a file")
    import importlib.util
    import sys

    name = f"tau_discovered_{path.stem}_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TauSDKError(f"tau-py: cannot import {module}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    found = [v for v in vars(mod).values() if isinstance(v, WorkloadHandle)]
    for handle in found:
        if handle.fn is not None:
            handle.script = str(path.resolve())
    return found
