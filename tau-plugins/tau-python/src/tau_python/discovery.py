"""Find the handles of a module for ``tau python`` (discovery errors exit 2)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tau_core.errors import TauError

DISCOVERY_EXIT = 2


class DiscoveryError(TauError):
    exit_code = DISCOVERY_EXIT


@dataclass
class Workflow:
    """The handles of one module: at most one train and one eval in v1."""

    module: Path
    train: Any = None
    eval: Any = None

    @property
    def handles(self) -> list[Any]:
        return [h for h in (self.train, self.eval) if h is not None]


def discover(module: str | Path) -> Workflow:
    from tau._discovery import workloads
    from tau._errors import TauSDKError
    from tau._workflow import EvalHandle, TrainHandle

    path = Path(module)
    if not path.is_file():
        raise DiscoveryError(f"{module}: no such Python file", hint="pass the path of a module using @tau.train")
    try:
        found = workloads(path)
    except TauSDKError as exc:
        raise TauError(str(exc)) from None
    trains = [h for h in found if isinstance(h, TrainHandle)]
    evals = [h for h in found if isinstance(h, EvalHandle)]
    if not found:
        raise DiscoveryError(f"{module}: no @tau.train or @tau.eval handles found",
                             hint="decorate a top-level function with @tau.train(name=..., runtime_pip=[...])")
    if len(trains) > 1 or len(evals) > 1:
        raise DiscoveryError(f"{module}: at most one @tau.train and one @tau.eval per file (found {len(trains)} "
                             f"train, {len(evals)} eval)", hint="split the workflows into separate files")
    wf = Workflow(path, trains[0] if trains else None, evals[0] if evals else None)
    if wf.train is not None and wf.eval is not None and wf.eval.after not in (None, wf.train.name):
        raise DiscoveryError(f"{module}: @tau.eval after={wf.eval.after!r} does not match the train name "
                             f"{wf.train.name!r}", hint=f"set after={wf.train.name!r}")
    return wf


def upstream_for(wf: Workflow, explicit: str | None) -> str | None:
    if explicit:
        return explicit
    if wf.train is not None:
        return str(wf.train.upstream_path())
    return None
